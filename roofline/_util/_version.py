"""The package's version (``roofline.__version__``), written into every report and cache it makes.

One source: ``version`` in pyproject.toml. An installed package reads it from its metadata (which the build copied
from pyproject.toml); a source checkout used in place (``python setup.py build_ext --inplace``) reads the
pyproject.toml beside the package, which may be newer than any installed metadata. Versions follow semantic
versioning (CHANGELOG.md): a release that adds a capability moves the minor number, one that removes or changes
what existed (after a release of deprecation warnings) the major number.
"""

from __future__ import annotations

import os
import re
from importlib import metadata

_PYPROJECT = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                          "pyproject.toml")
# the [project] table's name and version (the only TOML this needs; tomllib is not in Python 3.10)
_TABLE = re.compile(r"^\[project\]\s*$(.*?)(?=^\[|\Z)", re.M | re.S)
_KEY = r'^{}\s*=\s*"([^"\n]+)"\s*$'


def from_pyproject(text: str) -> str | None:
    """The ``[project]`` version of a pyproject.toml whose project is named roofline; None otherwise."""
    table = _TABLE.search(text)
    if table is None:
        return None
    name = re.search(_KEY.format("name"), table.group(1), re.M)
    version = re.search(_KEY.format("version"), table.group(1), re.M)
    if name is None or version is None or name.group(1) != "roofline":
        return None
    return version.group(1)


def _version() -> str:
    try:
        with open(_PYPROJECT, encoding="utf-8") as f:
            found = from_pyproject(f.read())
        if found:
            return found
    except OSError:  # an installed package: no pyproject.toml beside it
        pass
    try:
        return metadata.version("roofline")
    except metadata.PackageNotFoundError:  # neither installed nor a checkout: say so rather than guess
        return "0+unknown"


VERSION = _version()
