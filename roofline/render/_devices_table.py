"""The datasheet table and its source list as docs/devices.md shows them (peaks in TFLOP/s, TOP/s for INT8), written
from :data:`roofline.devices.DEVICES`."""

from __future__ import annotations

from roofline._hardware import _devices as devices


def table() -> str:
    """The table of docs/devices.md, rendered from DEVICES (peaks in TFLOP/s, TOP/s for INT8)."""

    def fmt(value: float | None, scale: float) -> str:
        return "-" if value is None else f"{value / scale:g}"

    def peak(spec: devices.DeviceSpec, unit: str, *dtypes: str) -> str:
        for dtype in dtypes:
            if (unit, dtype) in spec.peaks:
                return fmt(spec.peaks[(unit, dtype)], devices._T) + ("*" if dtype.endswith("fnuz") else "")
        return "-"

    header = (
        "| Device | Vendor | SMs/CUs | Clock MHz | L2 MiB | Memory GiB | DRAM TB/s | FP64 vec | FP64 mat | "
        "FP32 vec | FP32 mat | TF32 | BF16 | FP16 | FP8 | INT8 | Ridge BF16 |"
    )
    lines = [header, "|" + "---|" * (header.count("|") - 1)]
    for spec in devices._ALL:
        ridge = f"{spec.ridge_point('matrix', 'bfloat16'):.0f}" if ("matrix", "bfloat16") in spec.peaks else "-"
        cells = [
            spec.name,
            spec.vendor,
            "-" if spec.sm_count is None else str(spec.sm_count),
            fmt(spec.boost_clock_hz, 1e6),
            fmt(spec.l2_bytes, devices._MiB),
            fmt(spec.memory_bytes, devices._GiB),
            fmt(spec.memory_bandwidth, 1e12),
            peak(spec, "vector", "float64"),
            peak(spec, "matrix", "float64"),
            peak(spec, "vector", "float32"),
            peak(spec, "matrix", "float32"),
            peak(spec, "matrix", "tfloat32"),
            peak(spec, "matrix", "bfloat16"),
            peak(spec, "matrix", "float16"),
            peak(spec, "matrix", "float8_e4m3fn", "float8_e4m3fnuz"),
            peak(spec, "matrix", "int8"),
            ridge,
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def sources() -> str:
    """The source list of docs/devices.md: each document, and the devices and figures taken from it."""
    by_source: dict[str, dict[str, list[str]]] = {}
    for spec in devices._ALL:
        for key, source in spec.sources.items():
            figure = key[len("peaks.") :].replace(".", " ") if key.startswith("peaks.") else key
            by_source.setdefault(source, {}).setdefault(spec.name, []).append(figure)
    lines = []
    for source, per_device in by_source.items():
        used = "; ".join(f"{device}: {', '.join(figures)}" for device, figures in per_device.items())
        lines.append(f"- {source}\n  ({used})")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":  # python -m roofline.render._devices_table: print the tables of docs/devices.md
    print(table())
    print(sources())
