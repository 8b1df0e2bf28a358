"""The modules that measure and hold a machine's ceilings (roofline/_hardware/_ceilings.py and the modules it is
split into), seen as one: a test stubs a name (``_core``, ``_cpu_info``, ``_QUICK``, ...) with
``monkeypatch.setattr(ceilings_mod, name, stub)`` and every module that looks the name up sees the stub."""

from __future__ import annotations

import importlib

MODULES = tuple(importlib.import_module(f"roofline._hardware.{m}") for m in (
    "_ceilings", "_ceilings_model", "_ceilings_cache", "_yardstick", "_cpu_bench", "_cpu_info", "_sweep",
    "_cpu_contention"))


class _AllModules:
    def __getattr__(self, name):
        for m in MODULES:
            if hasattr(m, name):
                return getattr(m, name)
        raise AttributeError(f"no ceilings module has {name!r}")

    def __setattr__(self, name, value):
        holders = [m for m in MODULES if hasattr(m, name)]
        if not holders:
            raise AttributeError(f"no ceilings module has {name!r}")
        for m in holders:
            setattr(m, name, value)

    def __delattr__(self, name):  # pragma: no cover - monkeypatch undoes by setattr
        raise AttributeError(name)


ceilings_mod = _AllModules()
