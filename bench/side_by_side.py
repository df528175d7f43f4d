"""What the data-plane benches share: SeaTide vs a hand-written program, case by case,
written to ``bench/results/<name>.json`` and drawn to ``<name>.png`` (matplotlib, the
``bench`` extra: ``pip install -e .[bench]``)."""

from __future__ import annotations

import json
import os
import statistics
from typing import Callable

HERE = os.path.dirname(os.path.abspath(__file__))
# SEATIDE_BENCH_RESULTS: the soak set's short runs (tests/bench) write elsewhere, so the
# committed results stay the measured ones.
RESULTS = os.environ.get("SEATIDE_BENCH_RESULTS") or os.path.join(HERE, "results")


def sample_rows(spark, rows: int):
    """The sink benches' input: id bigint, name string, value double, insert rows (spark.range-based,
    two partitions), the same for SeaTide and for the library used by hand."""
    from pyspark.sql import functions as F

    return (spark.range(0, rows, numPartitions=2)
            .withColumn("name", F.concat(F.lit("name-"), F.col("id").cast("string")))
            .withColumn("value", F.col("id") * 0.5)
            .withColumn("__row_kind", F.lit(0).cast("tinyint")))


def median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def write_results(name: str, payload: dict) -> str:
    os.makedirs(RESULTS, exist_ok=True)
    path = os.path.join(RESULTS, name + ".json")
    with open(path, "w") as handle:
        json.dump(payload, handle, indent=2)
    return path


def pyplot():
    """matplotlib's pyplot without a display, or None when the bench extra is not installed."""
    try:
        import matplotlib
    except ImportError:
        return None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def draw_pairs(ax, labels: list[str], seatide: list[float], hand: list[float], ylabel: str,
               goals: list[float | None] | None = None) -> None:
    """Side-by-side bars per case, each pair annotated with SeaTide / hand-written."""
    width = 0.38
    xs = range(len(labels))
    ax.bar([x - width / 2 for x in xs], seatide, width, label="SeaTide", color="#2b7bba")
    ax.bar([x + width / 2 for x in xs], hand, width, label="hand-written PySpark", color="#aaaaaa")
    for x, s, h, goal in zip(xs, seatide, hand, goals or [None] * len(labels)):
        note = f"{s / h:.2f}x" + (f"\n(goal ≤ {goal}x)" if goal else "")
        ax.annotate(note, (x, max(s, h)), ha="center", va="bottom", fontsize=8)
    ax.set_xticks(list(xs), labels, fontsize=8)
    ax.set_ylabel(ylabel)
    ax.margins(y=0.2)
    ax.legend(fontsize=8)


def draw_alternating(path: str, samples: dict[str, list[dict]], measures: list[tuple[str, str]],
                     title: str) -> bool:
    """One panel per measure: a bar at each side's median, its samples as dots. ``samples``
    maps each side's label to its samples, the first side drawn in SeaTide's colour."""
    plt = pyplot()
    if plt is None:
        return False
    fig, axes = plt.subplots(1, len(measures), figsize=(4 * len(measures), 3.6))
    for ax, (key, label) in zip(axes, measures):
        for i, values in enumerate([s[key] for s in side] for side in samples.values()):
            ax.bar(i, statistics.median(values), 0.6, color="#2a7ab9" if i == 0 else "#b0b0b0")
            ax.scatter([i] * len(values), values, s=12, color="black", zorder=3)
        ax.set_xticks(range(len(samples)), list(samples))
        ax.set_ylabel(label)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return True


def alternate(rounds: int, sides: dict[str, Callable[[], dict]]) -> dict[str, list[dict]]:
    """Samples of each side, round by round, the order reversed every other round so the
    machine's load falls on every side alike."""
    names = list(sides)
    samples: dict[str, list[dict]] = {name: [] for name in names}
    for round_no in range(rounds):
        for name in names if round_no % 2 == 0 else names[::-1]:
            samples[name].append(sides[name]())
            print(f"round {round_no + 1} {name}: {samples[name][-1]}", flush=True)
    return samples


def median_of(samples: list[dict], key: str) -> float:
    return statistics.median(s[key] for s in samples)


def write_json(path: str, payload: dict) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as handle:
        json.dump(payload, handle, indent=1)
