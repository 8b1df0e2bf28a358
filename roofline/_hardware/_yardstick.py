"""A stable yardstick: what a report is judged against when this run's measurement is under contention (the last
idle measurement of this machine, else its theoretical peak from cores, clock, SIMD width and DRAM channels)."""

from __future__ import annotations

import os
import re
from typing import Any

from roofline._hardware._ceilings_cache import _MAX_CACHE_BYTES, _store_cache, cache_dir
from roofline._hardware._ceilings_model import (YARDSTICKS, Ceiling, CeilingNotAvailable,  # noqa: F401  (YARDSTICKS:
                                              Ceilings, _jsonable, _parse_device, _version)  # named here too)
from roofline._hardware._cpu_bench import _theoretical
from roofline._hardware._cpu_info import _cpu_fingerprint, _cpu_info
from roofline._util import _output
from roofline._util._cachedir import untrusted_reason
from roofline._util._warn import warn




def reference_path(kind: str, fingerprint: str) -> str:
    """Where the last idle measurement of a device (``kind`` "cpu" or "cuda", its ``fingerprint``) is kept: every
    idle measurement replaces it, and ``python -m roofline ceilings --save`` writes it. Unlike the cache, it is
    kept across package versions: it is the machine's yardstick."""
    return os.path.join(cache_dir(), "idle", f"{kind}-{fingerprint}.json")


def saved_idle(device: Any = "cpu", path: str | None = None) -> Ceilings | None:
    """The last idle measurement of this machine's ``device`` (:func:`reference_path`), or of ``path``: None when
    there is none, or it is unreadable, of another machine, or flagged busy (with a warning for the last three)."""
    kind, _ = _parse_device(device)
    if kind != "cpu" and path is None:
        return None  # GPU measurements are not flagged for contention: nothing to stand in for
    fingerprint = _cpu_fingerprint(_cpu_info()) if kind == "cpu" else None
    where = path or reference_path(kind, fingerprint)
    if path is None and os.path.isdir(os.path.dirname(where)) and untrusted_reason(os.path.dirname(where)) is not None:
        return None  # a cache folder others can write could feed forged ceilings into every report
    c = load_file(where, quiet_missing=path is None)
    if c is None:
        return None
    if fingerprint is not None and c.fingerprint != fingerprint:
        warn(f"ignoring the saved ceilings {where}: they describe another machine (fingerprint {c.fingerprint}, "
             f"this one is {fingerprint})", RuntimeWarning)
        return None
    if c.info.get("busy"):
        warn(f"ignoring the saved ceilings {where}: they were measured under contention", RuntimeWarning)
        return None
    return c


def load_file(path: str, quiet_missing: bool = False) -> Ceilings | None:
    """Ceilings saved as JSON at ``path`` (``Ceilings.to_json``, ``python -m roofline ceilings --save``), or None
    with a warning (silently for a missing file when ``quiet_missing``)."""
    try:
        with open(path, "rb") as f:
            data = f.read(_MAX_CACHE_BYTES + 1)
        if len(data) > _MAX_CACHE_BYTES:
            raise ValueError(f"it is larger than {_MAX_CACHE_BYTES} bytes")
        return Ceilings.from_json(data)
    except (FileNotFoundError, NotADirectoryError) as e:
        if not quiet_missing:
            warn(f"cannot read the saved ceilings {path} ({e})", RuntimeWarning)
    except (OSError, ValueError) as e:
        warn(f"cannot read the saved ceilings {path} ({e})", RuntimeWarning)
    return None


def save_idle(c: Ceilings, path: str | None = None) -> str:
    """Write an idle measurement ``c`` as this machine's yardstick (:func:`reference_path`, or ``path``); returns
    where. ValueError when ``c`` was measured under contention (it would make every later report wrong)."""
    if c.info.get("busy"):
        raise ValueError("these ceilings were measured under contention ("
                         + "; ".join(map(str, c.info.get("contention") or ["flagged busy"]))
                         + "): not saved; measure again when the machine is idle")
    if c.duration_s is None:
        raise ValueError("these ceilings hold no measurement: nothing to save")
    kind, _ = _parse_device(c.device)
    where = path or reference_path(kind, c.fingerprint)
    if path is None:
        if not _store_cache(where, c):
            raise OSError(f"could not write {where} (the warning says why)")
    else:
        _output.write(where, c.to_json(), where="ceilings --save")
    return where


def theoretical(measured: Ceilings | None = None, info: dict[str, Any] | None = None) -> Ceilings:
    """This CPU's theoretical ceilings, from what it reports: the peak per float dtype = cores x clock x SIMD lanes
    x FMA units x 2 (the SIMD width detected, the FMA units per core assumed per SIMD generation unless
    ``ROOFLINE_CPU_FMA_UNITS`` says), the DRAM bandwidth = memory channels x transfer rate x bus width where the
    firmware's memory table is readable (``/sys/firmware/dmi/tables/DMI``, usually root only). Without it the
    DRAM figure is ``measured``'s (its ``datasheet`` column empty, the note saying so). The figures sit in the
    ``datasheet`` column (with ``source="best"``, a figure of the ``measured`` column is only the DRAM fallback).
    ``info["yardstick"]`` says what they are."""
    info = dict(info or (measured.info if measured is not None and measured.info.get("simd") else _cpu_info()))
    simd = str(info.get("simd") or "scalar")
    theory = _theoretical(info, simd)
    if not theory["peak"]:
        raise CeilingNotAvailable(f"no theoretical peak for this CPU: {theory['clock_note']}")
    peaks = {("vector", d): Ceiling(None, v, "", theory["formula"][d]) for d, v in theory["peak"].items()}
    notes = [f"{d} peak, {theory['formula'][d]}" for d in theory["peak"]]
    if theory["clock_note"]:
        notes.append(theory["clock_note"])
    dram = dram_theoretical()
    bandwidths = {}
    if dram is not None:
        bandwidths["DRAM"] = Ceiling(None, dram["bytes_per_s"], "", dram["formula"])
        notes.append(f"DRAM: {dram['formula']}")
    elif measured is not None and any(c.measured for c in measured.bandwidths.values()):
        # DRAM is the slowest level: under contention a level's figure can come out far off either way (a cache
        # level below DRAM is what flags it), so the lowest figure of any level is the one that does not overstate
        # DRAM's rate
        level, low = min(((k, c.measured) for k, c in measured.bandwidths.items() if c.measured),
                         key=lambda kv: kv[1])
        bandwidths["DRAM"] = Ceiling(low, None, f"the lowest bandwidth measured in this run ({level})"
                                     + (", under contention" if measured.info.get("busy") else ""), "")
        notes.append("DRAM: the memory table is not readable (/sys/firmware/dmi/tables/DMI): the bandwidth is the "
                     f"lowest this run measured ({level})" + (", under contention: MBU and the memory bounds are not "
                                                             "stable" if measured.info.get("busy") else ""))
    else:
        notes.append("DRAM: no theoretical bandwidth (the memory table is not readable) and no measurement")
    yard = {"kind": "theoretical", "formula": [theory["formula"][d] for d in theory["peak"]],
            "dram": dram["formula"] if dram else None}
    return Ceilings(device="cpu", name=str(info.get("model") or "CPU"), fingerprint=_cpu_fingerprint(info),
                    peaks=peaks, bandwidths=bandwidths, duration_s=None, version=_version(), timestamp=None,
                    quick=None, info=_jsonable(dict(info, yardstick=yard, busy=False)), notes=notes)


_DMI_TABLE = "/sys/firmware/dmi/tables/DMI"


def dram_theoretical(table: bytes | None = None) -> dict[str, Any] | None:
    """``{"bytes_per_s", "channels", "mt_s", "width_bits", "formula"}`` from the SMBIOS memory devices (type 17)
    of ``table`` (default: read from /sys/firmware/dmi/tables/DMI; None when unreadable or holding no populated
    device with a speed). Channels are the distinct channel names of the devices' locators ("CHANNEL A",
    "ChannelB", "P0 CH1", ...); where the locators name none, each populated device counts as a channel (an upper
    bound: two DIMMs on one channel share it, and the formula says so)."""
    if table is None:
        try:
            with open(_DMI_TABLE, "rb") as f:
                table = f.read(1 << 20)
        except OSError:
            return None
    devs = []
    i = 0
    while i + 4 <= len(table):
        kind, length = table[i], table[i + 1]
        if length < 4 or i + length > len(table):
            break
        end = table.find(b"\0\0", i + length)
        if end < 0:
            break
        strings = table[i + length:end].split(b"\0")
        if kind == 17 and length >= 0x17:
            body = table[i:i + length]
            size = int.from_bytes(body[0x0C:0x0E], "little")
            width = int.from_bytes(body[0x0A:0x0C], "little")  # data width, bits
            speed = int.from_bytes(body[0x15:0x17], "little")
            if length >= 0x22:
                conf = int.from_bytes(body[0x20:0x22], "little")
                speed = conf or speed
            if size not in (0, 0xFFFF) and width not in (0, 0xFFFF) and speed not in (0, 0xFFFF):

                def string(n):
                    return strings[n - 1].decode("ascii", "replace") if 0 < n <= len(strings) else ""

                locator = f"{string(body[0x10])} {string(body[0x11])}"
                devs.append((locator, width, speed))
        if kind == 127:
            break
        i = end + 2
    if not devs:
        return None
    channels = set()
    for locator, _, _ in devs:
        m = re.search(r"(?:channel|chan|ch)[\s_-]*([a-z0-9]+)", locator, re.I)
        channels.add(m.group(1).upper() if m else None)
    named = None not in channels
    n = len(channels) if named else len(devs)
    speed = min(d[2] for d in devs)
    width = min(d[1] for d in devs)
    bw = n * speed * 1e6 * width / 8
    how = "channels named by the locators" if named else "populated devices, each taken as a channel: an upper bound"
    return {"bytes_per_s": bw, "channels": n, "mt_s": speed, "width_bits": width,
            "formula": f"{n} channels ({how}) x {speed} MT/s x {width // 8} bytes (SMBIOS memory devices)"}


def stable(measured: Ceilings, saved: str | None = None) -> Ceilings:
    """The yardstick for a report whose ceilings were ``measured`` in this run: ``measured`` itself when it is
    not flagged busy; else the last idle measurement of this machine (:func:`saved_idle`, or the file ``saved``),
    else the CPU's :func:`theoretical` ceilings. The returned ceilings' ``info["yardstick"]`` says which and why:
    ``kind`` ("measured", "idle", "theoretical"), ``contention`` (why this run's measurement was not used)."""
    if not measured.info.get("busy"):
        return measured
    reasons = [str(x) for x in (measured.info.get("contention") or ["flagged busy"])]
    idle = saved_idle(measured.device, saved)
    if idle is not None:
        out = Ceilings.from_dict(idle.to_dict())
        out.info["yardstick"] = {"kind": "idle", "measured_at": idle.timestamp, "by_version": idle.version,
                                 "contention": reasons}
        out.notes = list(out.notes) + [f"the last idle measurement of this machine ({idle.timestamp}), used because "
                                       f"this run's measurement was under contention: {'; '.join(reasons)}"]
        return out
    out = theoretical(measured)
    out.info["yardstick"]["contention"] = reasons
    out.notes.insert(0, "no idle measurement of this machine is saved (python -m roofline ceilings --save when it "
                        "is idle): the theoretical peak is the yardstick, because this run's measurement was under "
                        f"contention: {'; '.join(reasons)}")
    return out
