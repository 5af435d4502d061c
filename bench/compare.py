"""Compare two checkouts of Aeon on the hot path and the cold import, in alternating fresh processes.

    git worktree add /tmp/before <commit>           # the code to compare against
    python bench/compare.py /tmp/before [--rounds 5]

Each round runs W1 (N = 10 and 100) and W2 through ``bench/workloads/aeon_w.py`` of each checkout, in a fresh
process with that checkout first on ``PYTHONPATH`` (and an editable install's finder dropped: ``checkout.py``),
alternating which goes first; medians over the rounds. Then
the user import (``from aeon_kernel import Engine, FunctionTool, hookimpl`` and ``AeonConfig``), net of
``python -c pass``. Only Aeon runs: the peers' side-by-side ratios are ``bench/run.py``'s job.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from checkout import CHECKOUT_FIRST

HERE = Path(__file__).resolve().parent
USER_IMPORT = (
    "from aeon_kernel import Engine, FunctionTool, hookimpl\nfrom aeon_kernel.config import AeonConfig"
)

# Run inside each checkout: microseconds per step (W1) or per cycle (W2), as JSON.
PROBE = """
import json, statistics, sys, tempfile, time
from pathlib import Path
sys.path.insert(0, sys.argv[1] + "/bench")
from workloads import aeon_w
out = {}
for label, make, reps in [("W1 N=10", lambda: aeon_w.w1(10), 200), ("W1 N=100", lambda: aeon_w.w1(100), 30),
                          ("W2", lambda: aeon_w.w2("plain", Path(tempfile.mkdtemp())), 200)]:
    case = make()
    for _ in range(20):
        case.run()
    samples = []
    for _ in range(7):
        started = time.perf_counter()
        for _ in range(reps):
            case.run()
        samples.append((time.perf_counter() - started) / reps / case.units * 1e6)
    out[label] = statistics.median(samples)
    case.close()
print(json.dumps(out))
"""


def _env(checkout: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(checkout)}


def _probe(checkout: Path) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, "-c", CHECKOUT_FIRST + PROBE, str(checkout)],
        env=_env(checkout),
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def _wall_ms(code: str, checkout: Path | None, repeats: int = 21) -> float:
    env = _env(checkout) if checkout else dict(os.environ)
    samples = []
    with tempfile.TemporaryDirectory() as cwd:
        for _ in range(repeats):
            started = time.perf_counter()
            subprocess.run([sys.executable, "-c", CHECKOUT_FIRST + code], env=env, cwd=cwd, check=True)
            samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("before", type=Path, help="the checkout to compare against")
    parser.add_argument("after", type=Path, nargs="?", default=HERE.parent, help="default: this checkout")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    checkouts = {"before": args.before.resolve(), "after": args.after.resolve()}
    results: dict[str, list[dict[str, float]]] = {name: [] for name in checkouts}
    for round_ in range(args.rounds):
        order = list(checkouts) if round_ % 2 == 0 else list(reversed(checkouts))
        for name in order:
            results[name].append(_probe(checkouts[name]))
    for workload in results["before"][0]:
        before = statistics.median(r[workload] for r in results["before"])
        after = statistics.median(r[workload] for r in results["after"])
        print(
            f"{workload:9s} before {before:7.1f} µs  after {after:7.1f} µs  after/before {after / before:.3f}"
        )
    floor = _wall_ms("pass", None)
    for name, checkout in checkouts.items():
        print(
            f"user import, {name:6s}  {_wall_ms(USER_IMPORT, checkout) - floor:5.0f} ms net of python -c pass"
        )


if __name__ == "__main__":
    main()
