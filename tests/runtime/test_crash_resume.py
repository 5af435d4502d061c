"""Crash tests with real processes and ``kill -9`` (issue: durable runs).

A ten-step plan whose tool records a side effect in a ledger is killed at every cycle boundary (after the commit,
and halfway through the log line), inside every step (after the side effect), and at random moments; then it is
resumed — and killed again, for the random ones — until it finishes. Every time the result must equal an
uninterrupted run, the ledger must hold each step's side effect exactly once, SQLite's integrity check must pass
and the JSONL log must hold every cycle exactly once, with no corrupt line.
"""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

WORKER = Path(__file__).resolve().parent.parent / "support" / "crash_worker.py"
DETERMINISTIC = (
    [f"commit:{k}" for k in range(1, 12)]
    + [f"torn:{k}" for k in range(1, 12)]
    + [f"tool:{k}" for k in range(1, 11)]
)
RANDOM_SCENARIOS = 20


def start(directory: Path, *args: str, crash: str = "", tool_seconds: str = "0") -> subprocess.Popen[str]:
    env = {**os.environ, "AEON_CRASH_AT": crash, "AEON_TEST_TOOL_SECONDS": tool_seconds}
    return subprocess.Popen(
        [sys.executable, str(WORKER), str(directory), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def stored_run_id(directory: Path) -> str | None:
    if not (directory / "state.db").exists():
        return None
    with sqlite3.connect(directory / "state.db") as db:
        row = db.execute("SELECT run_id FROM runs").fetchone()
    return row[0] if row else None


def finish(directory: Path) -> tuple[dict[str, Any], int]:
    """Resume (or start, if the crash came before the run was stored) until the run completes."""
    for _ in range(5):
        run_id = stored_run_id(directory)
        proc = start(directory, *(["resume", run_id] if run_id else ["run"]))
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        return json.loads(out.splitlines()[-1]), 0
    raise AssertionError("never finished")


def check(directory: Path, result: dict[str, Any], reference: dict[str, Any]) -> None:
    run_id = result["run_id"]
    assert result["status"] == "completed"

    def essentials(r: dict[str, Any]) -> Any:
        steps = [(s["step_id"], s["status"], s["result"]) for s in r["plan"]["steps"]]
        calls = [(c["tool_name"], c["arguments"], c["result"]) for c in r["final_state"]["tool_history"]]
        return steps, calls, r["final_state"]["cycle"], r["final_state"]["ttl_remaining"], r["answer"]

    assert essentials(result) == essentials(reference)
    assert (directory / "ledger.txt").read_text().splitlines() == [f"{run_id}:{i}" for i in range(1, 11)]
    with sqlite3.connect(directory / "state.db") as db:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    records = [json.loads(line) for line in (directory / "run.jsonl").read_text().splitlines()]
    assert [r["step_number"] for r in records if "step_number" in r] == list(range(1, 12))
    assert all(r.get("run_id", run_id) == run_id for r in records)


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    directory = tmp_path_factory.mktemp("reference")
    proc = start(directory, "run")
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    return json.loads(out.splitlines()[-1])


def deterministic_scenario(directory: Path, crash: str) -> tuple[dict[str, Any], int]:
    proc = start(directory, "run", crash=crash)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == -signal.SIGKILL, f"{crash}: expected a kill, got {proc.returncode}: {err}"
    result, _ = finish(directory)
    return result, 1


def random_scenario(directory: Path, seed: int) -> tuple[dict[str, Any], int]:
    """Kill at random moments — most of them inside steps — resuming after each kill, until it finishes."""
    rng = random.Random(seed)
    kills = 0
    for _ in range(rng.randint(2, 4)):
        run_id = stored_run_id(directory)
        proc = start(directory, *(["resume", run_id] if run_id else ["run"]), tool_seconds="0.02")
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "READY"
        time.sleep(rng.uniform(0.0, 0.3))
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            kills += 1
        proc.communicate(timeout=120)
        with sqlite3.connect(directory / "state.db") as db:
            status = db.execute("SELECT status FROM runs").fetchone()
        if status and status[0] == "completed":
            break
    run_id = stored_run_id(directory)
    with sqlite3.connect(directory / "state.db") as db:
        done = db.execute("SELECT status FROM runs").fetchone()[0] == "completed"
    if done:  # finished between kills: read the result the store kept
        proc = start(directory, "resume", str(run_id))
        _, err = proc.communicate(timeout=120)
        assert "already finished" in err
        from aeon_plugins.sqlite_state import SqliteStateStore

        stored = SqliteStateStore(directory / "state.db").load(str(run_id)).state
        plan = stored.plan.model_dump(mode="json") if stored.plan else None
        return {
            "run_id": run_id,
            "status": stored.status,
            "plan": plan,
            "final_state": stored.model_dump(mode="json"),
            "answer": plan["steps"][-1]["result"],
        }, kills
    result, _ = finish(directory)
    return result, kills


def test_kill_9_anywhere_then_resume_gives_the_uninterrupted_result(
    tmp_path: Path, reference: dict[str, Any]
) -> None:
    jobs = [(deterministic_scenario, tmp_path / f"d-{c.replace(':', '-')}", c) for c in DETERMINISTIC]
    jobs += [(random_scenario, tmp_path / f"r-{i}", i) for i in range(RANDOM_SCENARIOS)]
    for _, directory, _ in jobs:
        directory.mkdir()

    def run(job: tuple[Any, Path, Any]) -> int:
        scenario, directory, arg = job
        result, kills = scenario(directory, arg)
        check(directory, result, reference)
        return kills

    with ThreadPoolExecutor(max_workers=2) as pool:
        kills = sum(pool.map(run, jobs))
    assert kills >= 50, f"only {kills} kills"
