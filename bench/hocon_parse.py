"""Reading a job's text: SeaTide's HOCON reader against pyhocon (the reader it replaced), on
the same job files, alternating, in one run.

    .venv/bin/python bench/hocon_parse.py [--rounds 5] [--out bench/results/hocon_parse]

The job files are the repository's examples, each read whole (a ``-i`` variable the file
leaves open is filled with a placeholder first).
SeaTide: ``config.hocon.parse`` with the plugin sections kept apart, as the loader reads a job;
pyhocon: ``ConfigFactory.parse_string``. Reports milliseconds a job for each and the ratio
(SeaTide / pyhocon; lower is faster). Without pyhocon installed, SeaTide's time alone.
Writes ``<out>.json``.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))

from seatide.config.hocon import HoconError, parse  # noqa: E402

_VARIABLE = re.compile(r"\$\{(?!\?)[A-Za-z_][A-Za-z0-9_.\-]*(?::[^}]*)?\}")


def job_texts() -> list[str]:
    paths = sorted(glob.glob(os.path.join(HERE, "..", "examples", "*.conf")))
    texts = []
    for path in paths:
        with open(path, encoding="utf-8") as handle:
            texts.append(_VARIABLE.sub('"x"', handle.read()))
    return texts


def per_job_ms(read, texts: list[str], repeat: int) -> float:
    started = time.perf_counter()
    for _ in range(repeat):
        for text in texts:
            read(text)
    return (time.perf_counter() - started) / (repeat * len(texts)) * 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=20, help="passes over the job files a round")
    parser.add_argument("--out", default=os.path.join(HERE, "results", "hocon_parse"))
    args = parser.parse_args()
    texts = []
    for text in job_texts():
        try:
            parse(text)
            texts.append(text)
        except HoconError:
            continue
    seatide = lambda text: parse(text, apart=("source", "transform", "sink"))  # noqa: E731
    try:
        from pyhocon import ConfigFactory
        other = ConfigFactory.parse_string
    except ImportError:
        other = None
    rounds = []
    for _ in range(args.rounds):
        ours = per_job_ms(seatide, texts, args.repeat)
        theirs = per_job_ms(other, texts, args.repeat) if other else None
        rounds.append({"seatide_ms": ours, "pyhocon_ms": theirs})
    ours = statistics.median(r["seatide_ms"] for r in rounds)
    result = {"jobs": len(texts), "rounds": rounds, "seatide_ms_per_job": round(ours, 3)}
    if other:
        theirs = statistics.median(r["pyhocon_ms"] for r in rounds)
        result |= {"pyhocon_ms_per_job": round(theirs, 3), "ratio_seatide_to_pyhocon": round(ours / theirs, 3)}
    print(json.dumps({k: v for k, v in result.items() if k != "rounds"}, indent=2))
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out + ".json", "w") as handle:
        json.dump(result, handle, indent=2)


if __name__ == "__main__":
    main()
