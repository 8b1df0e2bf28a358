"""The datasheet table of known CPUs and GPUs (peaks per unit and dtype, memory bandwidth, caches, with the
source of each figure): the public name of :mod:`roofline._hardware._devices`, which this module *is*
(``import roofline.devices`` gives that module; the package imports it directly, so that
``python -m roofline.devices``, which prints the tables of docs/devices.md, runs this file)."""

import sys

from roofline._hardware import _devices

if __name__ == "__main__":
    print(_devices._render_table())
    print(_devices._render_sources())
else:
    sys.modules[__name__] = _devices
