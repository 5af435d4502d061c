"""A run whose TTL expired can be continued with more cycles (issue 27, item 3).

``Engine.resume(run_id, ttl=N)``, ``aeon resume RUN_ID --ttl N``, ``FlowEngine.resume(run_id, ttl=N)`` and
``aeon flow resume RUN_ID --ttl N`` give a ``ttl_expired`` run N more cycles and go on from where it stopped —
no step run again — recording "TTL extended by N at cycle C" in its history (a cycle record of its own, which
spends no TTL). Without ``--ttl`` such a run is refused as before, with a message that says how to continue
it; a completed or failed run cannot be continued.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from aeon_kernel import Engine, RunStoreError
from aeon_kernel.config import AeonConfig, Choice
from aeon_kernel.runtime.run import TTL_EXTENDED
from aeon_plugins import in_memory, jsonl, plan_finished, schema_validator, scripted, sqlite_state, supervisor
from aeon_plugins.sqlite_state import SqliteStateStore
from tests.plugins.flow import crash_nodes
from tests.plugins.flow.test_durable import INPUT, comparable, make_flow, open_flow
from tests.support import interrupts, ledger
from tests.support.interrupts import REQUEST

REPO = Path(__file__).resolve().parents[2]


def engine(root: Path, *, ttl: int = 20, interrupt_at: int = 0, llm: str = "interrupting") -> Engine:
    config = AeonConfig(
        ttl=ttl,
        state=Choice("sqlite", {"path": str(root / "state.db")}),
        telemetry=(Choice("jsonl", {"path": str(root / "run.jsonl")}),),
    ).with_choice("planner", "model", check=False)
    if llm == "interrupting":
        config = config.with_choice("llm", "interrupting", interrupt_at=interrupt_at)
    else:  # a model with nothing to say: the run fails
        config = config.with_choice("llm", "scripted", responses=[])
    builtins = [
        in_memory,
        jsonl,
        plan_finished,
        schema_validator,
        scripted,
        supervisor,
        sqlite_state,
        interrupts,
    ]
    return Engine(config, plugins=builtins, autoload=False)


@pytest.fixture
def files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(ledger.LEDGER_ENV, str(tmp_path / "ledger.txt"))
    monkeypatch.setenv(interrupts.DIR_ENV, str(tmp_path))
    monkeypatch.delenv(interrupts.AT_ENV, raising=False)
    return tmp_path


def steps_and_answer(result: dict[str, Any]) -> Any:
    steps = [(s["step_id"], s["status"], s["result"]) for s in result["plan"]["steps"]]
    return steps, result["answer"]


def extensions(root: Path, run_id: str) -> list[tuple[int, str, int]]:
    """(cycle, message, ttl after it) of every TTL extension in the stored history."""
    store = SqliteStateStore(root / "state.db")
    try:
        entries = store.load(run_id).entries
    finally:
        store.close()
    return [
        (entry.step_number, error["message"], entry.ttl_remaining)
        for entry in entries
        for error in entry.errors
        if error.get("type") == TTL_EXTENDED
    ]


# --- in Python -------------------------------------------------------------------------------------------------


def test_a_ttl_expired_run_is_continued_with_more_cycles_and_the_history_says_so(files: Path) -> None:
    with engine(files, ttl=2) as short:
        first = short.run(REQUEST)  # the plan and step 1
    run_id = first["run_id"]
    assert first["status"] == "ttl_expired" and first["final_state"]["cycle"] == 2

    with engine(files) as again:
        with pytest.raises(RunStoreError) as refused:
            again.resume(run_id)
        assert "ttl_expired" in str(refused.value) and f"aeon resume {run_id} --ttl N" in str(refused.value)
        with pytest.raises(ValueError, match="positive integer"):
            again.resume(run_id, ttl=0)
        second = again.resume(run_id, ttl=2)  # steps 2 and 3: expired once more
        assert second["status"] == "ttl_expired" and second["final_state"]["cycle"] == 5
        third = again.resume(run_id, ttl=4)  # step 4, with 3 cycles to spare
        assert third["status"] == "completed"

    with pytest.MonkeyPatch.context() as patch, engine(files / "reference") as plain:
        (files / "reference").mkdir()
        patch.setenv(ledger.LEDGER_ENV, str(files / "reference" / "ledger.txt"))
        reference = plain.run(REQUEST)
    assert steps_and_answer(third) == steps_and_answer(reference)
    assert third["final_state"]["cycle"] == 7 and third["final_state"]["ttl_remaining"] == 3
    assert extensions(files, run_id) == [
        (3, "TTL extended by 2 at cycle 2: the run, whose TTL had expired, goes on", 2),
        (6, "TTL extended by 4 at cycle 5: the run, whose TTL had expired, goes on", 4),
    ]
    assert [e["type"] for e in third["errors"]] == [TTL_EXTENDED, TTL_EXTENDED]
    assert interrupts.lines(files / "executions.txt") == [f"{run_id}:1", f"{run_id}:3"]  # nothing ran again
    logged = [json.loads(line) for line in (files / "run.jsonl").read_text().splitlines()]
    assert [line["step_number"] for line in logged if "step_number" in line] == list(range(1, 8))
    manifests = [line["manifest"] for line in logged if "manifest" in line]
    assert [m.get("ttl_extended") for m in manifests] == [
        None,
        {"by": 2, "at_cycle": 2},
        {"by": 4, "at_cycle": 5},
    ]


def test_an_interrupted_run_resumed_with_ttl_gets_the_cycles_on_top(files: Path) -> None:
    with engine(files, interrupt_at=2) as interrupted:
        orchestrator = interrupted.orchestrator()
        with pytest.raises(KeyboardInterrupt):
            orchestrator.execute(REQUEST)
        assert orchestrator.run is not None
        run_id = orchestrator.run.run_id
    with engine(files) as again:
        run = again.orchestrator().start_resume(run_id, ttl=3)
        assert run.state.ttl_remaining == 18 + 3 and run.manifest["ttl_extended"] == {"by": 3, "at_cycle": 2}
        result = run.execute().to_dict()
    assert result["status"] == "completed" and result["final_state"]["ttl_remaining"] == 21 - 3
    assert extensions(files, run_id) == [(3, "TTL extended by 3 at cycle 2", 21)]


def test_a_completed_or_failed_run_cannot_be_continued(files: Path) -> None:
    with engine(files) as plain:
        completed = plain.run(REQUEST)["run_id"]
    with engine(files, llm="scripted") as mute:
        failed = mute.run(REQUEST)
    assert failed["status"] == "failed"
    with engine(files) as again:
        for run_id, status in ((completed, "completed"), (failed["run_id"], "failed")):
            with pytest.raises(RunStoreError) as refused:
                again.resume(run_id, ttl=5)
            message = str(refused.value)
            assert f"already finished ({status})" in message and "cannot be continued" in message, message
            with pytest.raises(RunStoreError, match="nothing to resume"):
                again.resume(run_id)
    assert extensions(files, completed) == [] and extensions(files, failed["run_id"]) == []


def test_a_ttl_expired_flow_run_is_continued(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    make_flow(tmp_path)
    monkeypatch.setenv(crash_nodes.DIR_ENV, str(tmp_path / "files"))
    monkeypatch.setenv(crash_nodes.BLOCK_ENV, "")
    with open_flow(tmp_path / "flow") as flow:
        short = flow.run(INPUT, ttl=3)
        assert short.run.status == "ttl_expired"
        with pytest.raises(RunStoreError, match=f"aeon flow resume {short.run_id} --ttl N"):
            flow.resume(short.run_id)
    with open_flow(tmp_path / "flow") as flow:
        result = flow.resume(short.run_id, ttl=10)
    with open_flow(tmp_path / "flow") as flow:
        reference = flow.run(INPUT)
    assert result.status == "success" and result.run_id == short.run_id
    ended, expected = comparable(result), comparable(reference)
    assert [e["type"] for e in ended.pop("errors")] == [TTL_EXTENDED] and expected.pop("errors") == []
    assert ended == expected
    assert extensions(tmp_path, short.run_id)[0][:2] == (
        4,
        "TTL extended by 10 at cycle 3: the run, whose TTL had expired, goes on",
    )


# --- the command line ------------------------------------------------------------------------------------------


def aeon(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    site = root / "site"
    if not site.exists():  # the test plugins, installed the way a third party's are
        info = site / "aeon_ttl_tests-1.0.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text("Metadata-Version: 2.1\nName: aeon-ttl-tests\nVersion: 1.0\n")
        (info / "entry_points.txt").write_text(
            "[aeon]\naeon_interrupts = tests.support.interrupts\naeon_crash_nodes = tests.plugins.flow.crash_nodes\n"
        )
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(site), str(REPO), *sys.path]),
        "AEON_DATA_DIR": str(root / "data"),
        ledger.LEDGER_ENV: str(root / "ledger.txt"),
        interrupts.DIR_ENV: str(root),
        crash_nodes.DIR_ENV: str(root / "files"),
        crash_nodes.BLOCK_ENV: "",
    }
    env.pop("AEON_CONFIG", None)
    env.pop(interrupts.AT_ENV, None)
    proc = subprocess.run(
        [sys.executable, "-m", "aeon_cli", *args],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def test_aeon_resume_ttl_continues_a_ttl_expired_run(tmp_path: Path) -> None:
    (tmp_path / "aeon.toml").write_text(
        '[llm]\nuse = "interrupting"\n[planner]\nuse = "model"\ncheck = false\n'
        '[state]\nuse = "sqlite"\npath = "state.db"\n'
    )
    short = aeon(tmp_path, "run", REQUEST, "--ttl", "2", "--json", "--log", "run.jsonl")
    assert short.returncode == 3, short.stderr
    run_id = json.loads(short.stdout)["run_id"]
    assert f"aeon resume {run_id} --ttl N" in short.stderr

    refused = aeon(tmp_path, "resume", run_id)
    assert refused.returncode == 2 and "ttl_expired" in refused.stderr and "--ttl N" in refused.stderr

    resumed = aeon(tmp_path, "resume", run_id, "--ttl", "3", "--json", "--log", "run.jsonl")
    assert resumed.returncode == 0, resumed.stderr
    result = json.loads(resumed.stdout)
    assert result["status"] == "completed" and result["answer"] == "noted 4"
    assert result["final_state"]["cycle"] == 6 and result["final_state"]["ttl_remaining"] == 0
    logged = [json.loads(line) for line in (tmp_path / "run.jsonl").read_text().splitlines()]
    cycles = [line for line in logged if "step_number" in line]
    assert [line["step_number"] for line in cycles] == [1, 2, 3, 4, 5, 6]
    assert cycles[2]["errors"][0]["message"].startswith("TTL extended by 3 at cycle 2")
    manifests = [line["manifest"] for line in logged if "manifest" in line]
    assert [m.get("ttl_extended") for m in manifests] == [None, {"by": 3, "at_cycle": 2}]  # the resume's line

    done = aeon(tmp_path, "resume", run_id, "--ttl", "3")
    assert done.returncode == 2 and "completed" in done.stderr and "cannot be continued" in done.stderr
    with sqlite3.connect(tmp_path / "state.db") as db:
        assert db.execute("SELECT status, cycle FROM runs").fetchall() == [("completed", 6)]


def test_aeon_flow_resume_ttl_continues_a_ttl_expired_flow_run(tmp_path: Path) -> None:
    flow = make_flow(tmp_path)
    config = str(flow / "aeon.toml")
    short = aeon(tmp_path, "flow", "run", str(flow), "--input", json.dumps(INPUT), "--ttl", "2", "--json")
    assert short.returncode == 3, short.stderr
    run_id = json.loads(short.stdout)["run_id"]
    assert f"aeon flow resume --config {config} {run_id} --ttl N" in short.stderr

    refused = aeon(tmp_path, "flow", "resume", run_id, "--config", config)
    assert refused.returncode == 2 and "--ttl N" in refused.stderr, refused.stderr

    resumed = aeon(tmp_path, "flow", "resume", run_id, "--config", config, "--ttl", "20", "--json")
    assert resumed.returncode == 0, resumed.stderr
    result = json.loads(resumed.stdout)
    assert result["status"] == "success" and result["run_status"] == "completed"
    assert [e["message"] for e in result["errors"]] == [
        "TTL extended by 20 at cycle 2: the run, whose TTL had expired, goes on"
    ]
    assert [stage["seq"] for stage in result["history"]] == list(range(1, 10))


def test_a_run_resumed_in_the_engine_it_ended_in_gets_back_its_released_step_results(
    files: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``in_memory`` drops a run's keys when it ends (issue 31): resumed in the same engine, the run writes back
    what its completed steps stored before its next prompt, then releases them again when it ends."""
    with engine(files, ttl=2) as one:
        first = one.run(REQUEST)  # the plan and step 1 (a tool)
        run_id = first["run_id"]
        assert first["status"] == "ttl_expired" and one.memory.search(f"run/{run_id}/") == []
        writes: list[str] = []
        write = one.memory.write
        monkeypatch.setattr(one.memory, "write", lambda key, value: (writes.append(key), write(key, value)))
        second = one.resume(run_id, ttl=10)
        assert second["status"] == "completed"
        assert writes == [f"run/{run_id}/{step}" for step in ("1", "2", "3", "4")]  # 1 restored, then run
        assert one.memory.search(f"run/{run_id}/") == []
