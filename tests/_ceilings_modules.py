"""The modules that measure and hold a machine's ceilings (roofline/_hardware/_ceilings.py and the modules it is
split into), seen as one: a test stubs a name (``_core``, ``_cpu_info``, ``_QUICK``, ...) with
``monkeypatch.setattr(ceilings_mod, name, stub)`` and every module that looks the name up sees the stub."""

from __future__ import annotations

import importlib

MODULES = tuple(importlib.import_module(f"roofline._hardware.{m}") for m in (
    "_ceilings", "_ceilings_model", "_ceilings_cache", "_yardstick", "_cpu_bench", "_cpu_info", "_sweep",
    "_cpu_contention"))


class _AllModules:
    # name -> [(module, its value before the first stub)]: what deleting the name restores. pytest's monkeypatch
    # undoes a stub either by setting the old value back (the value read through __getattr__) or, from pytest 9.2 on,
    # for an object whose own __dict__ lacks the name (this one's always does), by deleting the name.
    _ORIGINALS: dict = {}

    def __getattr__(self, name):
        for m in MODULES:
            if hasattr(m, name):
                return getattr(m, name)
        raise AttributeError(f"no ceilings module has {name!r}")

    def __setattr__(self, name, value):
        holders = [m for m in MODULES if hasattr(m, name)]
        if not holders:
            raise AttributeError(f"no ceilings module has {name!r}")
        self._ORIGINALS.setdefault(name, [(m, getattr(m, name)) for m in holders])
        for m in holders:
            setattr(m, name, value)

    def __delattr__(self, name):
        for m, value in self._ORIGINALS.pop(name, ()):  # a second delete of the same name has nothing left to undo
            setattr(m, name, value)


ceilings_mod = _AllModules()
