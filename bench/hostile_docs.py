"""Time the readers on the hostile-document corpus of tests/test_documents.py: ~1 MB documents (deep nesting, huge
arrays, long strings, many keys...) through roofline.load, merge, Ceilings.from_json and the ceilings cache reader.
Each must load or fail with ValueError in under 1 s (the suite checks the outcome of each read and only guards
against a hang: a timed test would fail on a loaded machine, not on slow code).

    python bench/hostile_docs.py            # prints every read's time, worst first; exit 1 if one took >= 1 s
"""

import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import test_documents as td  # noqa: E402

LIMIT = 1.0


def main() -> int:
    docs = td._docs()
    times = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, text in td._hostile(docs).items():
            for reader, fn in td._readers(Path(tmp)):
                t0 = time.perf_counter()
                try:
                    fn(text)
                    outcome = "loaded"
                except ValueError:
                    outcome = "ValueError"
                times.append((time.perf_counter() - t0, name, reader, outcome, len(text)))
    times.sort(reverse=True)
    for dt, name, reader, outcome, size in times:
        print(f"{dt:8.3f} s  {name:30s} {reader:20s} {outcome:10s} {size / 1e6:.2f} MB")
    worst = times[0]
    print(f"{len(times)} reads; worst {worst[0]:.3f} s ({worst[1]} through {worst[2]}); limit {LIMIT} s")
    return 0 if worst[0] < LIMIT else 1


if __name__ == "__main__":
    sys.exit(main())
