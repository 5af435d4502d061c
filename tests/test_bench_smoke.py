"""``bench/run.py --smoke`` keeps working: it runs every workload for Aeon and writes valid JSON.

No timing is asserted (timings are machine noise); only that each workload ran, gave correct results and was
written. The peers are left out (``--only aeon``) so the test needs no ``aeon-core[bench]`` extra.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

RUN = Path(__file__).resolve().parent.parent / "bench" / "run.py"


def test_smoke_run_writes_every_workload_for_aeon(tmp_path: Path) -> None:
    out = tmp_path / "results.json"
    done = subprocess.run(
        [sys.executable, str(RUN), "--smoke", "--only", "aeon", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(out.read_text(encoding="utf-8"))
    assert report["mode"] == "smoke"
    assert set(report["versions"]) == {"aeon"}
    results = report["results"]
    aeon = {workload: [r for r in rows if r["framework"] == "aeon"] for workload, rows in results.items()}
    assert set(aeon) == {"W1", "W2", "W3", "W4", "W5", "W6", "W7", "W8", "W9"}
    for workload, rows in aeon.items():
        assert rows, f"no Aeon row for {workload}"
        assert all("error" not in row for row in rows), rows
    assert all({"median", "min", "max", "build_ms"} <= set(row) for row in aeon["W1"])
    assert {row["variant"] for row in aeon["W2"]} == {"plain", "jsonl", "sqlite", "stream"}
    assert all("median" in row for row in aeon["W2"])
    assert all(row["bytes_per_step"] > 0 for row in aeon["W2"] if row["variant"] in ("jsonl", "sqlite"))
    (streamed,) = [row for row in aeon["W2"] if row["variant"] == "stream"]
    assert isinstance(streamed["stream_overhead"], float)  # engine.stream over engine.run (issue 28)
    assert {row["variant"] for row in aeon["W3"]} == {
        "import aeon_kernel",
        "user import",
        "user import, no tool",
        "one pydantic model",
        "aeon --help",
    }
    (many,) = aeon["W4"]
    assert many["runs"] == 20 and many["failed"] == 0
    assert {"wall_s", "runs_per_s", "peak_rss_mb", "growth_mb"} <= set(many)
    for workload, nodes in (("W5", 14), ("W6", 100)):
        (flow,) = aeon[workload]
        assert flow["variant"] == "history" and flow["nodes"] == nodes
        assert {"median", "build_ms"} <= set(flow) and flow["history_bytes_per_node"] > 0
    # W7, the wide fan-out (issue 31): one Aeon row per smoke width, timed per branch
    assert sorted(row["width"] for row in aeon["W7"]) == [20, 50]
    for row in aeon["W7"]:
        assert row["variant"] == "history" and row["per"] == "branch" and row["nodes"] == row["width"] + 4
        assert {"median", "build_ms"} <= set(row) and row["history_bytes_per_node"] > 0
    # W8, the map over K items, and W9, the 100-round loop (issue 30): µs per node over the nodes executed
    (mapped,) = aeon["W8"]
    assert mapped["variant"] == "history" and mapped["items"] == 20 and mapped["nodes"] == 20 + 4
    (looped,) = aeon["W9"]
    assert looped["variant"] == "history" and looped["nodes"] == 2 * 100 + 2
    for row in (mapped, looped):
        assert {"median", "build_ms"} <= set(row) and row["history_bytes_per_node"] > 0
    # the required-work floor (bench/required_work.py) is measured beside Aeon's W1, and compared with it
    (floor,) = [row for row in results["W1"] if row["framework"] == "floor"]
    assert floor["n"] == 10 and "error" not in floor and floor["median"] > 0
    goals = {t["target"]: t for t in report["targets"]}
    assert isinstance(goals["W1 N=10: Aeon / required-work floor"]["value"], float)
    assert goals["W1 N=10: Aeon / required-work floor"]["limit"] == "<= 2"
    assert isinstance(goals["W7: Aeon µs/branch K=50 / K=20"]["value"], float)
    assert {"W7: Aeon / fastest peer at K=20", "W7: Aeon / fastest peer at K=50"} <= set(goals)
    # no peer ran, so W8's and W9's targets have no value, but they are there
    assert {"W8: Aeon / fastest peer, map of K=20", "W9: Aeon / fastest peer, loop of 100 rounds"} <= set(
        goals
    )
    assert "Targets" in done.stdout and "Flow ratios" in done.stdout and "W7 wide fan-out" in done.stdout
    assert "W8 map" in done.stdout and "W9 loop" in done.stdout


def test_the_required_work_floor_runs() -> None:
    """``bench/required_work.py`` (the floor W1 is compared with) runs against the current models: it broke once
    without anyone noticing when ``LogEntry`` gained a field (issue 31)."""
    done = subprocess.run(
        [sys.executable, str(RUN.parent / "required_work.py"), "10"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "required work of a tool step, N=10: median" in done.stdout
