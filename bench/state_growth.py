"""How the SQLite state store grows: bytes per cycle over a 1,000-cycle run (issue: durable runs, "Growth").

    python bench/state_growth.py [--steps 1000]

A 1,000-step plan of echo steps runs with the sqlite state store; the database size (after a WAL checkpoint) is
sampled as the run goes. Storing deltas means the bytes per cycle stay flat instead of growing with the history
(LangGraph's full-state checkpoints grow quadratically in total).
"""

from __future__ import annotations

import argparse
import sqlite3
import tempfile
import time
from pathlib import Path

from aeon_kernel import Engine, Plan
from aeon_kernel.config import AeonConfig, Choice


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=1000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "state.db"
        config = AeonConfig(ttl=args.steps + 1, state=Choice("sqlite", {"path": str(db)})).with_choice(
            "llm", "scripted", responses=[]
        )
        steps = [
            {
                "step_id": str(i),
                "description": f"echo {i}",
                "tool": "echo",
                "arguments": {"message": f"message {i}"},
            }
            for i in range(1, args.steps + 1)
        ]
        plan = Plan.model_validate({"goal": "many steps", "steps": steps})
        with Engine(config) as engine:
            orchestrator = engine.orchestrator()
            samples: list[tuple[int, int]] = []
            started = time.perf_counter()
            for entry in orchestrator.iter("echo many things", initial_plan=plan):
                if entry.step_number in {1, 10, 100, 250, 500, 750, args.steps}:
                    with sqlite3.connect(db) as check:
                        check.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                    samples.append((entry.step_number, db.stat().st_size))
            elapsed = time.perf_counter() - started
    print(
        f"{args.steps} cycles in {elapsed:.2f} s ({elapsed / args.steps * 1e6:.0f} µs per cycle, SQLite store on)"
    )
    print("cycle   db bytes   bytes/cycle since previous sample")
    previous = (0, samples[0][1])
    for cycle, size in samples:
        rate = (size - previous[1]) / (cycle - previous[0]) if cycle > previous[0] else 0
        print(f"{cycle:5}  {size:9}   {rate:8.0f}")
        previous = (cycle, size)


if __name__ == "__main__":
    main()
