"""Refresh tests/durations.json from a full run's output, which orders the suite for xdist.

    bash scripts/test --durations=0 | tee /tmp/run.log
    .venv/bin/python scripts/durations.py /tmp/run.log

Keeps the tests that took 15 s or more (setup, call and teardown added up).
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections import defaultdict

LINE = re.compile(r"^([0-9.]+)s (?:setup|call|teardown)\s+(\S+)")
TARGET = os.path.join(os.path.dirname(__file__), "..", "tests", "durations.json")


def main(log_path: str) -> int:
    seconds: dict[str, float] = defaultdict(float)
    with open(log_path, errors="replace") as handle:
        for line in handle:
            match = LINE.match(line)
            if match:
                seconds[match.group(2)] += float(match.group(1))
    kept = {test: round(total) for test, total in sorted(seconds.items()) if total >= 15}
    if not kept:
        print(f"{log_path}: no durations (run pytest with --durations=0)", file=sys.stderr)
        return 2
    with open(TARGET, "w") as handle:
        json.dump(kept, handle, indent=0)
        handle.write("\n")
    print(f"{len(kept)} tests, {sum(kept.values())} s: {os.path.normpath(TARGET)}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1]))
