"""Does a long-lived Engine stay the same size? RSS over many small runs on the default memory (issue 31, target 3).

    python bench/memory_growth.py [--runs 100000] [--keep-runs]

One Engine, built as W2 builds it (the instant model, the trivial tool, ``[memory] use = "in_memory"``), runs the
W2 request (a plan, then ten thought → tool cycles) ``--runs`` times; the process's resident set size is printed
after 1,000 runs and at each later mark, with its growth against the 1,000-run figure (after ``gc.collect()``).
Target: within 10 % of the 1,000-run RSS after 100,000 runs. ``--keep-runs`` sets the backend's ``keep_runs``
option, which keeps every run's keys as the default did before issue 31: the growth that target is about.
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from workloads import aeon_w


def rss_mb() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * 4096 / 2**20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--keep-runs", action="store_true", help="keep every run's keys (the old default)")
    args = parser.parse_args()
    engine = aeon_w.build_engine(aeon_w.W2_RESPONSES, keep_runs=args.keep_runs)
    marks = sorted(
        {m for m in (1_000, 2_000, 5_000, 10_000, 20_000, 50_000, 100_000) if m <= args.runs} | {args.runs}
    )
    base, started = None, time.perf_counter()
    for done in range(1, args.runs + 1):
        aeon_w.w2_run(engine)
        if done in marks:
            gc.collect()
            rss = rss_mb()
            base = base or rss
            print(
                f"{done:>8,} runs: RSS {rss:7.1f} MB, {100 * (rss - base) / base:+6.1f} % against 1,000 runs"
                f"  ({time.perf_counter() - started:,.0f} s)",
                flush=True,
            )
    engine.close()


if __name__ == "__main__":
    main()
