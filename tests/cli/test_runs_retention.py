"""``aeon runs prune`` (issue 27, item 7): deletes exactly the runs it is asked to — by age (``--older-than``), by
rank (``--keep N``), both — with their artifacts, never a run a live process holds; ``--dry-run`` deletes nothing.

The store is the real default one (``runs.db`` and ``runs-artifacts.db`` in ``$AEON_DATA_DIR``), filled by real
runs on the scripted model; the live owner is another process, the stale one a process that ended holding its run.
The command is ``aeon_cli.runs.runs``, run with click's CliRunner (the ``aeon`` group registers it).
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from aeon_cli.recording import with_default_store
from aeon_cli.runs import parse_duration, runs
from aeon_kernel import AeonConfig, Engine
from aeon_plugins.sqlite_state import SqliteStateStore
from tests.support.redis_server import redis_url  # noqa: F401

ROOT = Path(__file__).resolve().parents[2]
PLAN = {
    "goal": "echo",
    "steps": [{"step_id": "1", "description": "echo", "tool": "echo", "arguments": {"message": "hi"}}],
}
HOLD = """
import sys, time, uuid
from aeon_kernel.models import OrchestrationState
from aeon_plugins.sqlite_state import SqliteStateStore
state = OrchestrationState(run_id=sys.argv[2], request="held", plan=None, current_step_id=None, tool_history=(),
    llm_outputs=(), supervisor_actions=(), errors=(), ttl_remaining=5, cycle=0, status="running", scheduler_state={})
SqliteStateStore(sys.argv[1]).create_run(state, {})
print("ready", flush=True)
if sys.argv[3] == "live":
    time.sleep(120)
"""


def finished_runs(count: int, config: AeonConfig | None = None) -> list[str]:
    chosen = with_default_store(
        (config or AeonConfig()).with_choice("llm", "scripted", responses=[PLAN] * count)
    )
    with Engine(chosen) as engine:
        return [engine.run(f"request {i}: say hi")["run_id"] for i in range(count)]  # PLAN's echo


def held_run(db: Path, run_id: str, how: str) -> subprocess.Popen[str]:
    """A process that creates ``run_id`` and holds it (``live``) or ends holding it (``stale``)."""
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(db), run_id, how],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        if how == "stale":
            proc.wait(timeout=30)
    except BaseException:
        proc.kill()
        proc.communicate()
        raise
    return proc


def age(db: Path, run_id: str, days: float) -> None:
    """Make ``run_id`` look ``days`` old (started and last changed then)."""
    when = (datetime.now(UTC) - timedelta(days=days)).isoformat(timespec="milliseconds")
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE runs SET started = ?, updated = ? WHERE run_id = ?", (when, when, run_id))


def stored(db: Path) -> set[str]:
    with sqlite3.connect(db) as conn:
        return {row[0] for row in conn.execute("SELECT run_id FROM runs")}


def artifact_runs(db: Path) -> set[str]:
    with sqlite3.connect(db) as conn:
        return {row[0] for row in conn.execute("SELECT DISTINCT run_id FROM artifacts")}


def prune(*args: str) -> Result:
    return CliRunner().invoke(runs, ["prune", *args])


@pytest.fixture
def data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """Runs of every kind in the default store: finished 40 and 1 days old, interrupted (released), stale and
    live — the last three 40 days old."""
    monkeypatch.setenv("AEON_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("AEON_CONFIG", raising=False)
    old, new = finished_runs(2)
    db = tmp_path / "data" / "runs.db"
    store = SqliteStateStore(db)
    released = "r" * 32
    store.create_run(_state(released), {})
    store.release(released)
    store.close()
    stale = held_run(db, "s" * 32, "stale")
    try:
        live = held_run(db, "l" * 32, "live")
    except BaseException:
        stale.communicate()
        raise
    try:
        for run_id in (old, released, "s" * 32, "l" * 32):
            age(db, run_id, 40)
        age(db, new, 1)
        yield {
            "db": db,
            "artifacts": tmp_path / "data" / "runs-artifacts.db",
            "old": old,
            "new": new,
            "released": released,
            "stale": "s" * 32,
            "live": "l" * 32,
            "live_pid": live.pid,
        }
    finally:
        for proc in (stale, live):
            if proc.poll() is None:
                proc.kill()
            proc.communicate()


def _state(run_id: str) -> Any:
    from aeon_kernel.models import OrchestrationState

    return OrchestrationState(
        run_id=run_id,
        request="interrupted",
        plan=None,
        current_step_id=None,
        tool_history=(),
        llm_outputs=(),
        supervisor_actions=(),
        errors=(),
        ttl_remaining=5,
        cycle=0,
        status="running",
        scheduler_state={},
    )


def test_older_than_deletes_the_old_runs_and_their_artifacts_but_never_a_live_one(
    data: dict[str, Any],
) -> None:
    assert {data["old"], data["new"]} <= artifact_runs(data["artifacts"])
    result = prune("--older-than", "30d", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert {run["run_id"] for run in report["deleted"]} == {data["old"], data["released"], data["stale"]}
    (kept,) = report["kept"]
    assert kept["run_id"] == data["live"] and f"running (live, pid {data['live_pid']})" in kept["why"]
    assert stored(data["db"]) == {data["new"], data["live"]}
    assert artifact_runs(data["artifacts"]) == {data["new"]} and report["artifacts"] > 0
    assert len(report["compacted"]) == 2  # runs.db and runs-artifacts.db, vacuumed


def test_dry_run_deletes_nothing_and_says_what_it_would(data: dict[str, Any]) -> None:
    before = stored(data["db"])
    result = prune("--older-than", "30d", "--dry-run")
    assert result.exit_code == 0, result.output
    assert result.stdout.count("would delete ") == 3 and f"kept {data['live']}" in result.stdout
    assert "would delete 3 run(s)" in result.output
    assert stored(data["db"]) == before and data["old"] in artifact_runs(data["artifacts"])


def test_keep_n_keeps_the_newest_n_whatever_their_age(data: dict[str, Any]) -> None:
    listed = [run["run_id"] for run in json.loads(CliRunner().invoke(runs, ["--json"]).stdout)]
    result = prune("--keep", "2", "--json")
    assert result.exit_code == 0, result.output
    assert stored(data["db"]) == set(listed[:2]) | {data["live"]}  # the live one stays wherever it ranks


def test_both_delete_what_is_old_and_not_among_the_newest(data: dict[str, Any]) -> None:
    listed = [run["run_id"] for run in json.loads(CliRunner().invoke(runs, ["--json"]).stdout)]
    result = prune("--older-than", "30d", "--keep", "3", "--json")
    assert result.exit_code == 0, result.output
    assert stored(data["db"]) == set(listed[:3]) | {data["new"], data["live"]}


def test_nothing_to_prune_and_bad_options(data: dict[str, Any]) -> None:
    result = prune("--older-than", "1000d")
    assert result.exit_code == 0 and "deleted 0 run(s)" in result.output
    assert prune().exit_code == 2 and "--older-than DURATION, --keep N" in prune().output
    bad = prune("--older-than", "soon")
    assert bad.exit_code == 2 and "is not a duration" in bad.output
    assert prune("--keep", "-1").exit_code == 2
    assert [parse_duration(text) for text in ("30d", "12h", "90m", "45s", "2w", "1.5h")] == [
        2592000,
        43200,
        5400,
        45,
        1209600,
        5400,
    ]


def test_aeon_runs_says_who_holds_each_running_run(data: dict[str, Any]) -> None:
    listed = CliRunner().invoke(runs, [])
    assert listed.exit_code == 0, listed.output
    lines = {line.split()[0]: line for line in listed.stdout.splitlines()}
    assert f"running (live, pid {data['live_pid']})" in lines[data["live"]]
    assert (
        "running (stale: owner pid" in lines[data["stale"]] and "on this host is gone" in lines[data["stale"]]
    )
    assert "running (interrupted: no process holds it)" in lines[data["released"]]
    assert "completed" in lines[data["old"]]


def test_prune_on_the_redis_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, redis_url: str) -> None:  # noqa: F811
    monkeypatch.chdir(tmp_path)
    namespace = f"prune{time.monotonic_ns()}:"
    (tmp_path / "aeon.toml").write_text(
        f'[state]\nuse = "redis"\nurl = "{redis_url}"\nnamespace = "{namespace}"\n'
    )
    from aeon_kernel.config import load_config

    made = finished_runs(3, load_config(str(tmp_path / "aeon.toml")))
    result = prune("--keep", "1", "--config", "aeon.toml", "--json")
    assert result.exit_code == 0, result.output
    assert {run["run_id"] for run in json.loads(result.stdout)["deleted"]} == set(made[:2])
    listed = json.loads(CliRunner().invoke(runs, ["--config", "aeon.toml", "--json"]).stdout)
    assert [run["run_id"] for run in listed] == made[2:]


def _wired() -> bool:
    import click

    from aeon_cli.main import cli

    return isinstance(cli.commands.get("runs"), click.Group)


@pytest.mark.skipif(
    not _wired(), reason="WIRING: aeon_cli.runs.runs is not registered on `aeon` yet (main.py)"
)
def test_the_aeon_command_lists_and_prunes(data: dict[str, Any]) -> None:
    """Once main.py registers ``aeon_cli.runs.runs``: the real ``aeon runs`` and ``aeon runs prune``."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}

    def aeon(*args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "aeon_cli", "runs", *args]
        return subprocess.run(command, capture_output=True, text=True, env=env, timeout=60, check=False)

    listed = aeon()
    assert listed.returncode == 0 and f"running (live, pid {data['live_pid']})" in listed.stdout, (
        listed.stderr
    )
    pruned = aeon("prune", "--keep", "0", "--json")
    assert pruned.returncode == 0, pruned.stderr
    assert {run["run_id"] for run in json.loads(pruned.stdout)["kept"]} == {data["live"]}
    assert stored(data["db"]) == {data["live"]}


def test_a_retention_table_keeps_the_recorded_runs_to_its_limit(tmp_path: Path, monkeypatch: Any) -> None:
    """``[retention] keep = 2``: before each recorded run the CLI deletes all but the newest two, so the store never
    holds more than three; a bad table is a configuration error (exit 2) before anything runs."""
    from aeon_cli.main import cli

    monkeypatch.setenv("AEON_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "script.json").write_text(json.dumps([PLAN, {"answer": "hi"}]))
    (tmp_path / "aeon.toml").write_text(
        '[llm]\nuse = "scripted"\nresponses = "script.json"\n[retention]\nkeep = 2\n'
    )
    for _ in range(4):
        result = CliRunner().invoke(cli, ["run", "--json", "echo hi"])
        assert result.exit_code == 0, result.output
    listed = json.loads(CliRunner().invoke(cli, ["runs", "--json"]).stdout)
    assert len(listed) == 3 and all(run["status"] == "completed" for run in listed)
    assert "[retention] deleted 1 old run(s)" in result.stderr

    (tmp_path / "aeon.toml").write_text(
        '[llm]\nuse = "scripted"\nresponses = "script.json"\n[retention]\nkeeps = 2\n'
    )
    refused = CliRunner().invoke(cli, ["run", "echo hi"])
    assert refused.exit_code == 2 and "[retention] takes keep = N" in refused.output
