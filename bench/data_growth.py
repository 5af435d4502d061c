"""How much the data directory grows per ``aeon run`` (issue 27, item 7), and what ``aeon runs prune`` gives back.

    python bench/data_growth.py [--runs 50]

Runs the README's quick-start request (``aeon run "calculate the sum of 5 and 10"``: a calculator step, then a
model step) ``--runs`` times on the scripted model, each a real ``python -m aeon_cli`` process recording into a
fresh ``$AEON_DATA_DIR`` as it does by default; prints the bytes each run adds to ``runs.db`` (the state store),
``runs-artifacts.db`` (the artifact store) and ``runs.jsonl`` (the log), measured after the first 5 runs (the
files' fixed cost), then what ``aeon runs prune --keep 5`` leaves.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

FILES = ("runs.db", "runs-artifacts.db", "runs.jsonl")
WARM = 5
SUM = {
    "goal": "Add 5 and 10",
    "steps": [
        {
            "step_id": "1",
            "description": "use calculator",
            "tool": "calculator",
            "arguments": {"expression": "5 + 10"},
        },
        {"step_id": "2", "description": "report the result", "agent": "llm"},
    ],
}


def sizes(data: Path) -> dict[str, int]:
    """Each file's bytes, its write-ahead log included (empty once the last process closed it)."""
    return {
        name: sum(
            (data / suffixed).stat().st_size
            for suffixed in (name, f"{name}-wal")
            if (data / suffixed).exists()
        )
        for name in FILES
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=50)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root, data = Path(tmp), Path(tmp) / "data"
        (root / "responses.json").write_text(json.dumps([SUM, json.dumps({"answer": "The sum is 15"})]))
        (root / "aeon.toml").write_text('[llm]\nuse = "scripted"\nresponses = "responses.json"\n')
        env = {**os.environ, "AEON_DATA_DIR": str(data)}
        command = [sys.executable, "-m", "aeon_cli", "run", "calculate the sum of 5 and 10", "--json"]
        warm: dict[str, int] = {}
        for number in range(1, args.runs + 1):
            subprocess.run(command, cwd=root, env=env, check=True, capture_output=True)
            if number == WARM:
                warm = sizes(data)
        end = sizes(data)
        print(
            f"{args.runs} runs of the quick start on the scripted model; bytes per run from run {WARM + 1} on:"
        )
        for name in FILES:
            print(
                f"  {name:<18} {end[name]:>10,} bytes  {(end[name] - warm[name]) / (args.runs - WARM):>8,.0f} per run"
            )
        prune = [sys.executable, "-c", "from aeon_cli.runs import runs; runs()", "prune", "--keep", str(WARM)]
        subprocess.run(prune, cwd=root, env=env, check=True, capture_output=True)
        after = sizes(data)
        print(f"after `aeon runs prune --keep {WARM}`: " + ", ".join(f"{n} {after[n]:,}" for n in FILES))


if __name__ == "__main__":
    main()
