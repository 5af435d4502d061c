"""How the JSONL log grows with the plan: bytes per line and µs per step, log on and off (issue 13, item 13).

    python bench/log_growth.py [--sizes 100,1000] [--reps 3]

A plan of N echo steps runs to the end on one engine, with the ``jsonl`` sink and without it. FR-038 wants the
plan at cycle start on every line; written whole, N steps make the log grow as N x cycles (quadratic). The sink
writes the plan whole once and then only the steps a cycle changed (decision 0012), so the bytes per line stay
flat and the cost per step at 1,000 steps stays near its cost at 100. ``read_log`` gives every line's plan back;
this script checks that it does, for the last line.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from aeon_kernel import Engine, Plan
from aeon_kernel.config import AeonConfig
from aeon_kernel.kit import read_log


def plan(size: int) -> Plan:
    steps = [
        {"step_id": str(i), "description": f"echo {i}", "tool": "echo", "arguments": {"message": f"m{i}"}}
        for i in range(1, size + 1)
    ]
    return Plan.model_validate({"goal": "many steps", "steps": steps})


def run_once(size: int, log: Path | None) -> float:
    """Seconds per step of one run of ``size`` steps (the engine built outside the timing)."""
    config = AeonConfig(ttl=size + 1).with_choice("llm", "scripted", responses=[])
    with Engine(config) as engine:
        if log is not None:
            engine.add_sink("jsonl", path=str(log))
        initial = plan(size)
        began = time.perf_counter()
        result = engine.start("many steps", initial_plan=initial).execute()
        elapsed = time.perf_counter() - began
    assert result.status == "completed", result.message
    return elapsed / size


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="100,1000")
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    print(f"{'steps':>6} {'log off µs/step':>16} {'log on µs/step':>15} {'bytes/line':>11} {'max line':>9}")
    costs: dict[int, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for size in sizes:
            off, on, per_line, longest = [], [], 0.0, 0
            for rep in range(args.reps):
                off.append(run_once(size, None))
                log = Path(tmp) / f"log-{size}-{rep}.jsonl"
                on.append(run_once(size, log))
                lines = log.read_text(encoding="utf-8").splitlines()
                cycles = lines[1:]  # the manifest first
                per_line = sum(map(len, cycles)) / len(cycles)
                longest = max(map(len, cycles))
                last = list(read_log(log))[-1]
                assert len(last["plan_state"]["steps"]) == size  # every line's plan is recoverable
            costs[size] = statistics.median(on)
            print(
                f"{size:>6} {statistics.median(off) * 1e6:>16.1f} {costs[size] * 1e6:>15.1f} "
                f"{per_line:>11,.0f} {longest:>9,}"
            )
    if len(sizes) >= 2:
        low, high = sizes[0], sizes[-1]
        print(
            f"\nlog on, µs per step at {high} / at {low}: {costs[high] / costs[low]:.2f} (target: at most 1.5)"
        )


if __name__ == "__main__":
    main()
