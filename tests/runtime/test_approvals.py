"""Approvals (issue 29, decision 0021): a call a policy or a tool says needs a person waits for one, durably.

In one process (a ``Run`` answered in place, an ``Engine`` with a SQLite store), through the CLI in separate
processes, and under ``kill -9`` at every point of the approval path: the call runs exactly once when approved,
fails cleanly when refused or expired, and an edit the tool's schema refuses is refused before anything is
recorded.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, ClassVar

import pytest

from aeon_kernel import (
    ConfigError,
    Engine,
    PolicyAction,
    Register,
    RunStoreError,
    Tool,
    ValidationError,
    hookimpl,
)
from aeon_kernel.config import parse_config
from aeon_plugins.policy_rules import RulesPolicy
from tests.support.builders import answer, llm_step, plan, tool_step

ASK_SUMS = {"rules": {"ask": [{"name": "sums", "tool": "calculator", "reason": "a person checks sums"}]}}
SUM_PLAN = plan(tool_step("1", "calculator", {"expression": "2 + 3"}), llm_step("2"))


def responses(tmp_path: Path, *replies: Any) -> dict[str, Any]:
    path = tmp_path / "responses.json"
    path.write_text(json.dumps([r if isinstance(r, str) else json.dumps(r) for r in replies]))
    return {"use": "scripted", "responses": str(path)}


def config(
    tmp_path: Path, *, policy: dict[str, Any] | None = None, store: bool = True, runs: int = 1, **more: Any
) -> Any:
    data: dict[str, Any] = {
        "llm": responses(tmp_path, *[SUM_PLAN] * runs, *[answer("2 + 3 is 5.")] * runs),
        "policy": policy if policy is not None else ASK_SUMS,
        "telemetry": {"use": ["jsonl"], "jsonl": {"path": str(tmp_path / "run.jsonl")}},
        **more,
    }
    if store:
        data["state"] = {"use": "sqlite", "path": str(tmp_path / "state.db")}
    return parse_config(data)


def kinds(result: dict[str, Any]) -> list[str]:
    return [e["type"] for e in result["errors"] if e["type"].startswith("Approval")]


def test_an_asked_call_waits_and_runs_once_approved(tmp_path: Path) -> None:
    artifacts = {"artifacts": {"path": str(tmp_path / "artifacts.db")}}
    with Engine(config(tmp_path, **artifacts)) as engine:
        waiting = engine.run("add 2 and 3")
    assert waiting["status"] == "waiting" and waiting["answer"] is None
    request = waiting["approval"]
    assert (request["tool"], request["arguments"], request["policy"], request["rule"]) == (
        "calculator",
        {"expression": "2 + 3"},
        "rules",
        "sums",
    )
    assert f"aeon approve {waiting['run_id']}" in waiting["message"]
    assert waiting["final_state"]["tool_history"] == []  # the call did not run
    assert [s["status"] for s in waiting["plan"]["steps"]] == ["running", "pending"]

    with Engine(config(tmp_path, **artifacts)) as engine:  # another engine, as another process would be
        with pytest.raises(RunStoreError, match=r"waits for approval.*aeon approve"):
            engine.resume(waiting["run_id"])
        done = engine.approve(waiting["run_id"], by="ann")
        kept = engine.artifact_store.find(done["run_id"], kind="approval")
    assert [(a.schema_name, a.node, a.value.get("decision")) for a in kept] == [
        ("ApprovalRequested", "1", None),
        ("ApprovalDecided", "1", "approved"),
    ]
    assert done["status"] == "completed" and done["answer"] == "2 + 3 is 5."
    assert [c["result"]["value"] for c in done["final_state"]["tool_history"]] == [5]
    assert kinds(done) == ["ApprovalRequested", "ApprovalDecided"]
    decided = next(e for e in done["errors"] if e["type"] == "ApprovalDecided")
    assert (decided["decision"], decided["by"], decided["edited"]) == ("approved", "ann", False)
    lines = [json.loads(line) for line in (tmp_path / "run.jsonl").read_text().splitlines()]
    cycles = [line["step_number"] for line in lines if "step_number" in line]
    assert cycles == list(range(1, done["final_state"]["cycle"] + 1))  # every cycle once, the answer included
    assert any("ApprovalDecided" in json.dumps(line.get("errors")) for line in lines)


def test_a_refused_call_fails_as_a_policy_denial_and_the_run_goes_on(tmp_path: Path) -> None:
    with Engine(config(tmp_path)) as engine:
        run_id = engine.run("add 2 and 3")["run_id"]
        done = engine.deny(run_id, "not now", by="bob")
    first = done["plan"]["steps"][0]
    assert first["status"] == "failed" and "not approved (denied): not now" in first["failure"]
    (call,) = done["final_state"]["tool_history"]
    assert call["error"]["type"] == "PolicyDeniedError" and call["error"]["rule"] == "sums"
    assert done["status"] == "failed"


def test_edited_arguments_are_checked_then_used(tmp_path: Path) -> None:
    with Engine(config(tmp_path)) as engine:
        run_id = engine.run("add 2 and 3")["run_id"]
        with pytest.raises(ValidationError, match="not of type 'string'"):
            engine.approve(run_id, {"expression": 5})
        with pytest.raises(RunStoreError, match="waits for approval"):  # nothing was recorded
            engine.resume(run_id)
        done = engine.approve(run_id, {"expression": "3 + 2"})
    (call,) = done["final_state"]["tool_history"]
    assert call["arguments"] == {"expression": "3 + 2"} and call["result"]["value"] == 5
    assert done["plan"]["steps"][0]["arguments"] == {"expression": "3 + 2"}
    assert next(e for e in done["errors"] if e["type"] == "ApprovalDecided")["edited"] is True


def test_an_expired_request_fails_the_call_whoever_answers(tmp_path: Path) -> None:
    policy = {"rules": {"ask": [{"name": "quick", "tool": "calculator", "expires_in": 0.05}]}}
    with Engine(config(tmp_path, policy=policy, runs=2)) as engine:
        first = engine.run("add 2 and 3")
        second = engine.run("add 2 and 3")
        assert first["approval"]["expires_at"] > first["approval"]["requested_at"]
        time.sleep(0.1)
        approved_late = engine.approve(first["run_id"])
        resumed = engine.resume(second["run_id"])  # nobody answered in time: resume goes on, the call fails
    for done in (approved_late, resumed):
        assert done["plan"]["steps"][0]["status"] == "failed"
        decided = next(e for e in done["errors"] if e["type"] == "ApprovalDecided")
        assert decided["decision"] == "expired" and "expired at" in decided["reason"]


def test_a_run_without_a_store_is_answered_in_place(tmp_path: Path) -> None:
    with Engine(config(tmp_path, store=False)) as engine:
        run = engine.start("add 2 and 3")
        assert run.execute().status == "waiting"
        run.approve()
        result = run.execute()
        with pytest.raises(RunStoreError, match="not waiting"):
            run.approve()
    assert result.status == "completed" and result.answer == "2 + 3 is 5."


def test_two_answers_to_one_request_record_one(tmp_path: Path) -> None:
    with Engine(config(tmp_path)) as engine:
        run_id = engine.run("add 2 and 3")["run_id"]
    from aeon_kernel.approvals import decided
    from aeon_kernel.kit import Approval
    from aeon_plugins.sqlite_state import SqliteStateStore

    with Engine(config(tmp_path)) as engine:
        store = SqliteStateStore(tmp_path / "state.db")
        stored = store.load(run_id)
        other, entry = decided(stored.state, Approval.deny("mine first"), engine.tools)
        store.commit_cycle(other, entry, [])  # another process answered between our read and our write
        done = engine.approve(run_id)  # this one's answer is not recorded over it: it goes on with the first
        store.close()
    assert [e.get("decision") for e in done["errors"] if e["type"] == "ApprovalDecided"] == ["denied"]


def test_a_policy_asking_where_nobody_can_wait_refuses() -> None:
    """``denial`` judges what cannot wait (a model step, what a running call reports): an ask there refuses."""
    policy = RulesPolicy(ask=[{"name": "look", "node": "publish"}, {"name": "all", "arguments": {"x": "."}}])
    stage = PolicyAction(kind="stage", run_id="r", stage="t1/publish", node="publish")
    decision = policy.evaluate(stage)
    assert decision is not None and decision.ask
    from aeon_kernel.policy import denial

    refused = denial([("rules", policy)], stage)
    only = "approval can be asked only before a tool call or a flow stage runs, so it was refused"
    assert refused is not None and only in str(refused)
    with pytest.raises(ConfigError, match="expires_in is for ask rules"):
        RulesPolicy(deny=[{"tool": "x", "expires_in": 5}])


class Notebook(Tool):
    """A tool whose writes need a person, by its own declaration."""

    name: str = "notebook"
    description: str = "Read or write a note."
    input_schema: dict[str, Any] = {
        "type": "object",
        "properties": {"operation": {"enum": ["read", "write"]}, "text": {"type": "string"}},
        "required": ["operation"],
    }
    output_schema: dict[str, Any] = {"type": "object"}
    permissions: dict[str, str] = {"read": "read the note", "write": "change the note"}
    ask: frozenset[str] = frozenset({"write"})
    written: ClassVar[list[str]] = []

    def required_permissions(self, arguments: dict[str, Any]) -> frozenset[str]:
        return frozenset({arguments["operation"]})

    def invoke(self, **kwargs: Any) -> dict[str, Any]:
        if kwargs["operation"] == "write":
            Notebook.written.append(kwargs.get("text", ""))
        return {"done": kwargs["operation"]}


class NotebookPlugin:
    @hookimpl
    def aeon_register_tools(self, register: Register) -> None:
        register("notebook", Notebook)


def test_a_tool_declares_which_permissions_need_approval(tmp_path: Path) -> None:
    Notebook.written.clear()
    the_plan = plan(
        tool_step("1", "notebook", {"operation": "read"}),
        tool_step("2", "notebook", {"operation": "write", "text": "hello"}),
    )
    data = {
        "llm": responses(tmp_path, the_plan),
        "tools": {"notebook": {"grant": ["read", "write"]}},
        "state": {"use": "sqlite", "path": str(tmp_path / "state.db")},
    }
    with Engine(parse_config(data), plugins=[NotebookPlugin()]) as engine:
        waiting = engine.run("write hello in the notebook")
        assert waiting["status"] == "waiting"  # the read ran; the write waits
        assert [c["arguments"]["operation"] for c in waiting["final_state"]["tool_history"]] == ["read"]
        assert (waiting["approval"]["policy"], waiting["approval"]["rule"]) == ("tools.notebook", "ask")
        done = engine.approve(waiting["run_id"])
    assert done["status"] == "completed" and Notebook.written == ["hello"]
    data["tools"] = {"notebook": {"grant": ["read", "write"], "ask": []}}  # the user chooses: no approval
    with Engine(parse_config(data), plugins=[NotebookPlugin()]) as engine:
        assert engine.run("write hello in the notebook")["status"] == "completed"
    data["tools"] = {"notebook": {"grant": ["read"], "ask": ["delete"]}}
    with (
        Engine(parse_config(data), plugins=[NotebookPlugin()]) as engine,
        pytest.raises(ConfigError, match="ask names 'delete', which notebook does not declare"),
    ):
        engine.run("write hello in the notebook")


# --- real processes ----------------------------------------------------------------------------------------------

ROOT = Path(__file__).resolve().parents[2]


def aeon(directory: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "aeon_cli", *args, "--config", str(directory / "aeon.toml")],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=directory,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


def test_the_cli_run_exits_waiting_and_approve_in_another_process_finishes_it(tmp_path: Path) -> None:
    (tmp_path / "responses.json").write_text(json.dumps([json.dumps(SUM_PLAN), answer("2 + 3 is 5.")]))
    (tmp_path / "aeon.toml").write_text(
        '[llm]\nuse = "scripted"\nresponses = "responses.json"\n'
        '[state]\nuse = "sqlite"\npath = "state.db"\n'
        '[[policy.rules.ask]]\nname = "sums"\ntool = "calculator"\n'
    )
    waiting = aeon(tmp_path, "run", "add 2 and 3", "--json", "--no-log")
    assert waiting.returncode == 4, waiting.stderr
    run_id = json.loads(waiting.stdout)["run_id"]
    assert (
        f"aeon approve {run_id}" in waiting.stderr and 'calculator {"expression": "2 + 3"}' in waiting.stderr
    )
    assert "waiting" in aeon(tmp_path, "runs").stdout
    refused = aeon(tmp_path, "approve", run_id, "--edit-arguments", "[1]", "--no-log")
    assert refused.returncode == 2 and "must be a JSON object" in refused.stderr
    done = aeon(tmp_path, "approve", run_id, "--by", "ann", "--json", "--no-log")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["answer"] == "2 + 3 is 5."
    again = aeon(tmp_path, "approve", run_id, "--no-log")
    assert again.returncode == 2 and "already finished" in again.stderr


# --- kill -9 on the approval path (tests/support/crash_worker.py, step 2 asks) -----------------------------------

WORKER = ROOT / "tests" / "support" / "crash_worker.py"


def worker(directory: Path, *args: str, crash: str = "") -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "AEON_CRASH_AT": crash, "AEON_ASK": "2"}
    return subprocess.run(
        [sys.executable, str(WORKER), str(directory), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def stored(directory: Path) -> tuple[str, str]:
    with sqlite3.connect(directory / "state.db") as db:
        return db.execute("SELECT run_id, status FROM runs").fetchone()


@pytest.mark.parametrize(
    ("answer_with", "crash_in_run", "crash_in_answer"),
    [
        ("approve", "commit:3", ""),  # killed once the request is committed (before its log line)
        ("approve", "torn:3", ""),  # killed halfway through the request's log line
        ("approve", "", "commit:4"),  # killed once the answer is committed, before the call
        ("approve", "", "tool:2"),  # killed inside the approved call, after its side effect
        ("approve", "", "commit:5"),  # killed once the approved step is committed
        ("deny", "", "commit:4"),  # a refusal committed, then killed
    ],
)
def test_kill_9_on_the_approval_path_resumes_with_the_call_made_once(
    tmp_path: Path, answer_with: str, crash_in_run: str, crash_in_answer: str
) -> None:
    first = worker(tmp_path, "run", crash=crash_in_run)
    assert first.returncode == (-signal.SIGKILL if crash_in_run else 0), first.stderr
    run_id, status = stored(tmp_path)
    assert status == "waiting"
    answered = worker(tmp_path, answer_with, run_id, crash=crash_in_answer)
    if crash_in_answer:
        assert answered.returncode == -signal.SIGKILL, answered.stderr
        answered = worker(tmp_path, answer_with, run_id)  # answered already: it goes on, as a resume would
    assert answered.returncode == 0, answered.stderr
    result = json.loads(answered.stdout.splitlines()[-1])
    ledger = (tmp_path / "ledger.txt").read_text().splitlines()
    made = [int(key.split(":")[1]) for key in ledger]
    assert made == (list(range(1, 11)) if answer_with == "approve" else [1, *range(3, 11)])  # each call once
    assert [e.get("decision") for e in result["errors"] if e["type"] == "ApprovalDecided"] == [
        "approved" if answer_with == "approve" else "denied"
    ]
    assert result["status"] == ("completed" if answer_with == "approve" else "failed")
    records = [json.loads(line) for line in (tmp_path / "run.jsonl").read_text().splitlines() if line.strip()]
    numbers = [r["step_number"] for r in records if "step_number" in r]
    assert numbers == list(
        range(1, result["final_state"]["cycle"] + 1)
    )  # every cycle in the log exactly once


def test_the_inspector_shows_what_a_waiting_run_waits_on_and_how_to_answer(tmp_path: Path) -> None:
    """The read-only inspector has no button (it changes nothing); it shows the call and the command."""
    from aeon_cli.inspect.app import Inspector
    from aeon_cli.inspect.sources import Catalog, JsonlRuns, SqliteRuns

    policy = {"rules": {"ask": [{"name": "sums", "tool": "calculator", "expires_in": 3600}]}}
    with Engine(config(tmp_path, policy=policy)) as engine:
        run_id = engine.run("add 2 and 3")["run_id"]
    catalog = Catalog([SqliteRuns("store", tmp_path / "state.db"), JsonlRuns("log", tmp_path / "run.jsonl")])
    try:
        for source in ("store", "log"):
            page = Inspector(catalog).handle(f"/run/{source}/{run_id}").body.decode()
            assert "waiting for approval" in page and f"aeon approve {run_id}" in page
            assert "needs approval (rule &#39;sums&#39; of &#39;rules&#39;)" in page and "2 + 3" in page
    finally:
        catalog.close()
