"""Which ceilings a report is judged against: the one place that chooses them, from what ``measure`` was given
(``"measured"``, ``"datasheet"``, ``"theoretical"``, saved ceilings, a device name, a :class:`roofline.Ceilings`),
and makes them into the report's roofs (:mod:`roofline._hardware._roofs`). Choosing may measure the machine (the
microbenchmarks of :func:`roofline._hardware._ceilings.ceilings`) and asks torch a CUDA device's name; the report
chooses once, on first use, and hands the roofs to the analyses, which never measure."""

from __future__ import annotations

import os

from roofline._hardware import _devices as devices
from roofline._hardware import _ceilings as _ceil
from roofline._hardware import _roofs, _yardstick
from roofline._hardware._ceilings_model import YARDSTICKS, CeilingNotAvailable, Ceilings
from roofline._util._warn import warn



def roofs(spec, meta: dict) -> _roofs.Roofs:
    """The roofs of a report whose ``meta`` names the devices its ops ran on, for ``spec`` (see :func:`choose`;
    roofs already chosen are returned as they are; None: no ceilings)."""
    if isinstance(spec, _roofs.Roofs):
        return spec
    if spec is None:
        return _roofs.of(None, "measured", meta)
    ceilings, source, note = choose(spec, meta)
    return _roofs.of(ceilings, source, meta, note)


def choose(spec, meta: dict):
    """``(ceilings or None, source, note)`` for a report whose ``meta`` names the devices its ops ran on.

    ``spec``: ``"measured"`` (the figures of the device the ops ran on: when a CPU's measurement in this run is
    under contention, the stable yardstick instead, :func:`roofline._hardware._yardstick.stable`: the last idle
    measurement of this machine, else its theoretical peak), ``"datasheet"`` (a GPU's datasheet; a CPU's measured
    figures), ``"theoretical"`` (a CPU's theoretical peak from its cores, clock and SIMD width; a GPU's datasheet),
    the path of saved ceilings (``python -m roofline ceilings --save PATH``, ``Ceilings.to_json``), a device name
    from :mod:`roofline.devices` (its datasheet), or a Ceilings (used as given, with ``meta["ceilings_source"]``,
    default "best"). None of a device's own for meta or fake tensors (``note`` says why). ``source`` is which
    figures of the ceilings the roofline uses ("measured" when there are none); the ceilings' ``info["yardstick"]``
    says what a stand-in is. TypeError for anything else."""
    if isinstance(spec, Ceilings):
        return spec, meta.get("ceilings_source", "best"), ""
    devs = meta.get("devices") or []
    device = next((d for d in devs if d.startswith("cuda")), "cpu" if "cpu" in devs else None)
    if "meta" in devs or "fake" in devs:
        device = None  # counted without running: only a projection has ceilings
    if spec in YARDSTICKS:
        if device is None:
            return None, "measured", (f"ops ran on {', '.join(devs) or 'no device'}: no ceilings to judge them "
                                      "against; use r.project('<device>')")
        if spec in ("datasheet", "theoretical") and device.startswith("cuda"):
            import torch

            name = torch.cuda.get_device_name(torch.device(device))
            ds = devices.lookup(name)
            if ds is None:
                warn(f"roofline: no datasheet entry for {name!r}; using measured ceilings")
            else:
                return Ceilings.from_datasheet(ds, device=device), "datasheet", ""
        if spec == "theoretical":
            try:
                return _yardstick.theoretical(), "best", ""
            except CeilingNotAvailable as e:
                return None, "measured", f"no theoretical ceilings: {e}"
        try:
            measured = _ceil.ceilings(device)
        except Exception as e:  # a GPU without NVRTC, say: say so, and keep the counts usable
            return None, "measured", f"ceilings of {device} unavailable: {e}"
        if spec == "measured" and device == "cpu" and measured.info.get("busy"):
            try:
                stand_in = _yardstick.stable(measured)
            except CeilingNotAvailable:
                stand_in = measured  # no clock to compute a peak from: the contended figures, flagged
            return stand_in, "best" if stand_in.info.get("yardstick", {}).get("kind") == "theoretical" else \
                "measured", ""
        return measured, ("measured" if spec == "measured" else "datasheet"), ""
    if isinstance(spec, str) and (spec.endswith(".json") or os.sep in spec or os.path.isfile(spec)):
        if device is None:
            return None, "measured", (f"ops ran on {', '.join(devs) or 'no device'}: no ceilings to judge them "
                                      "against; use r.project('<device>')")
        saved = _yardstick.load_file(spec)
        if saved is None:
            return None, "measured", f"the saved ceilings {spec} could not be read"
        saved.info["yardstick"] = {"kind": "file", "path": spec, "measured_at": saved.timestamp}
        return saved, "best", ""
    if isinstance(spec, str):
        return Ceilings.from_datasheet(devices.get(spec)), "datasheet", ""
    raise TypeError(f"ceilings must be 'measured', 'datasheet', 'theoretical', the path of saved ceilings, a device "
                    f"name or a Ceilings, got {spec!r}")


def check_spec(spec) -> None:
    """Check a ``ceilings=`` argument before a block runs: "measured", "datasheet", "theoretical", a Ceilings, the
    path of an existing saved-ceilings file, or a datasheet device name (KeyError with close matches); TypeError
    for anything else."""
    if isinstance(spec, Ceilings) or spec in YARDSTICKS:
        return
    if not isinstance(spec, str):
        raise TypeError(f"ceilings must be 'measured', 'datasheet', 'theoretical', the path of saved ceilings, a "
                        f"device name or a Ceilings, got {type(spec).__name__}")
    if spec.endswith(".json") or os.sep in spec or os.path.isfile(spec):
        if not os.path.isfile(spec):
            raise FileNotFoundError(f"ceilings: no saved ceilings file {spec!r}")
        return
    devices.get(spec)


