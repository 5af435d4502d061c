"""Artifacts (spec 004 §10.1, issue 15): every validated output, tool result and cycle record of a run, in a store
indexed by run, node or step, schema and kind; read back by ``aeon artifacts``."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any, get_args

import pytest

from aeon_cli.main import ARTIFACT_KINDS
from aeon_kernel import Artifact, ArtifactStore, Engine, Register, RunStoreError, hookimpl
from aeon_kernel.config import parse_config
from aeon_kernel.kit import register_secret
from aeon_kernel.runtime.artifacts import ArtifactKind
from aeon_plugins.sqlite_artifacts import SQLiteArtifactStore
from tests.plugins.flow.test_engine import EXIT, START, Demo, chain, write_flow
from tests.support.builders import answer, llm_step, plan, tool_step

CANARY = "art-cAnAry-sEcret-7Qw2Lp9Zx4"


def scripted(tmp_path: Path, *replies: Any) -> dict[str, Any]:
    path = tmp_path / "responses.json"
    path.write_text(json.dumps([r if isinstance(r, str) else json.dumps(r) for r in replies]))
    return {"use": "scripted", "responses": str(path)}


def run(
    tmp_path: Path, *replies: Any, request: str = "add 5 and 10, then divide by zero"
) -> tuple[str, Path]:
    db = tmp_path / "artifacts.db"
    config = parse_config({"llm": scripted(tmp_path, *replies), "artifacts": {"path": str(db)}})
    with Engine(config) as engine:
        result = engine.run(request)
    return result["run_id"], db


def test_a_run_keeps_its_plan_tool_results_step_outputs_records_and_answer(tmp_path: Path) -> None:
    the_plan = plan(
        tool_step("1", "calculator", {"expression": "5 + 10"}),
        tool_step("2", "calculator", {"expression": "1 / 0"}),
        llm_step("3", "say the sum"),
    )
    run_id, db = run(tmp_path, the_plan, answer("The sum is 15"))
    store = SQLiteArtifactStore(db)
    found = store.find(run_id)
    assert [(a.kind, a.node, a.schema_name) for a in found if a.kind not in ("telemetry", "model_call")] == [
        ("plan", None, "Plan"),
        ("tool_result", "1", "tool:calculator"),
        ("step_output", "1", None),
        ("step_output", "3", None),
        ("answer", None, None),
    ]
    assert store.find(run_id, kind="plan")[0].value["steps"][0]["arguments"] == {"expression": "5 + 10"}
    assert store.find(run_id, node="1", kind="tool_result")[0].value == {"expression": "5 + 10", "value": 15}
    assert store.find(run_id, node="2", kind="tool_result") == []  # the division failed: no result to keep
    records = store.find(run_id, schema_name="LogEntry")
    assert [a.cycle for a in records] == [1, 2, 3, 4] and records[2].value["errors"]  # the failed cycle too
    assert store.find(run_id, kind="answer")[0].value == "The sum is 15"
    assert store.find("no-such-run") == []
    store.close()


def test_each_model_call_is_kept_with_its_prompt_which_the_state_store_and_log_do_not_keep(
    tmp_path: Path,
) -> None:
    request = "add 5 and 10, then say it"
    the_plan = plan(tool_step("1", "calculator", {"expression": "5 + 10"}), llm_step("2", "say the sum"))
    db, state, log = tmp_path / "artifacts.db", tmp_path / "state.db", tmp_path / "run.jsonl"
    options = {
        "llm": scripted(tmp_path, the_plan, answer("The sum is 15")),
        "artifacts": {"path": str(db)},
        "state": {"use": "sqlite", "path": str(state)},
        "telemetry": {"use": ["jsonl"], "jsonl": {"path": str(log)}},
    }
    with Engine(parse_config(options)) as engine:
        run_id = engine.run(request)["run_id"]
    store = SQLiteArtifactStore(db)
    calls = store.find(run_id, kind="model_call")
    store.close()
    # one per model call, in the cycle that made it: the plan (cycle 1), none for the tool step, the answer (3)
    assert [(a.cycle, a.value["number"], a.schema_name) for a in calls] == [
        (1, 0, "ModelCall"),
        (3, 0, "ModelCall"),
    ]
    planning, answering = (a.value for a in calls)
    assert request in planning["request"]["prompt"] and planning["request"]["system_prompt"]
    # the schema as sent: none, as the scripted model cannot constrain decoding
    assert planning["request"]["json_schema"] is None and planning["constrained"] is False
    assert json.loads(planning["text"]) == the_plan and planning["request"]["temperature"] == 0.0
    assert "say the sum" in answering["request"]["prompt"] and "15" in answering["request"]["prompt"]
    assert answering["text"] == answer("The sum is 15") and answering["duration_ms"] >= 0
    # the prompts are in the artifact store only: the state store and the log keep each call's output
    marker = b"Write a plan as JSON"
    assert marker in planning["request"]["prompt"].encode()
    assert marker not in state.read_bytes() and marker not in log.read_bytes()
    with sqlite3.connect(state) as db_state:
        kept = [c for (row,) in db_state.execute("SELECT llm_outputs FROM cycles") for c in json.loads(row)]
    assert len(kept) == 2 and all("request" not in call and call["text"] for call in kept)


def test_a_flow_keeps_each_stage_output_with_its_schema_and_task(tmp_path: Path) -> None:
    schemas = {"text": {"type": "object", "required": ["text"], "properties": {"text": {"type": "string"}}}}
    loud = {"id": "loud", "role": "linear", "impl": "demo.shout", "output_schema": "text"}
    directory = write_flow(tmp_path / "flow", chain(START, loud, EXIT), schemas=schemas)
    config = parse_config({"memory": {"use": "in_memory"}, "artifacts": {"path": str(tmp_path / "a.db")}})
    with Engine.from_config_dir(directory, config, plugins=[Demo()]) as flows:
        result = flows.run({"text": "hi"})
        store = flows.engine.artifact_store
        assert store is not None
        stages = store.find(result.run.run_id, kind="stage_output")
    assert [(a.node, a.task, a.schema_name, a.value) for a in stages] == [
        ("in", "t1", None, {"text": "hi"}),
        ("loud", "t1", "text", {"text": "HI!"}),
        ("out", "t1", None, {"text": "HI!"}),
    ]


def test_a_flow_stage_keeps_the_memory_it_read_as_an_artifact(tmp_path: Path) -> None:
    """Spec 004 §10.10: each stage's memory snapshot (the context items it read) indexed by run, task and node."""
    look = {"id": "look", "role": "linear", "context": {"profile": "recent"}}
    directory = write_flow(
        tmp_path / "flow", chain(START, look, EXIT), context={"profiles": {"recent": {"layers": ["task"]}}}
    )
    config = parse_config({"memory": {"use": "in_memory"}, "artifacts": {"path": str(tmp_path / "a.db")}})
    with Engine.from_config_dir(directory, config, plugins=[Demo()]) as flows:
        result = flows.run({"text": "hi"})
        store = flows.engine.artifact_store
        assert store is not None
        snapshots = store.find(result.run.run_id, kind="memory_snapshot")
    (snapshot,) = snapshots
    assert (snapshot.node, snapshot.task) == ("look", "t1")
    look_record = next(r for r in result.history if r["node"] == "look")
    assert snapshot.value == look_record["context"] and snapshot.value[0]["value"] == {"text": "hi"}


def test_no_secret_is_stored(tmp_path: Path) -> None:
    register_secret(CANARY)
    the_plan = plan(tool_step("1", "echo", {"message": f"the key is {CANARY}"}), goal=f"echo {CANARY}")
    run_id, db = run(tmp_path, the_plan, request=f"echo {CANARY}")
    stored = db.read_bytes() + b"".join(p.read_bytes() for p in tmp_path.glob("artifacts.db-*"))
    assert CANARY.encode() not in stored and CANARY[:12].encode() not in stored
    store = SQLiteArtifactStore(db)
    message = store.find(run_id, kind="tool_result")[0].value["message"]
    assert message.startswith("the key is") and message.endswith(
        "***"
    )  # other tests' secrets stay registered
    store.close()


def test_a_file_that_is_not_an_artifact_store_is_a_clear_error(tmp_path: Path) -> None:
    foreign = tmp_path / "foreign.db"
    with sqlite3.connect(foreign) as db:
        db.execute("CREATE TABLE artifacts (name TEXT)")
    with pytest.raises(RunStoreError, match="holds an 'artifacts' table that is not Aeon's"):
        SQLiteArtifactStore(foreign)
    (tmp_path / "garbage.db").write_bytes(b"not a database at all" * 100)
    with pytest.raises(RunStoreError, match=r"cannot use .* as an artifact store"):
        SQLiteArtifactStore(tmp_path / "garbage.db")


class Kept(ArtifactStore):
    """A store a plugin provides: keeps what it is given, in memory."""

    instances: list[Kept] = []

    def __init__(self, label: str = "") -> None:
        self.label, self.kept = label, []
        self.closed = False
        Kept.instances.append(self)

    def put(self, artifacts: Any) -> None:
        self.kept.extend(artifacts)

    def find(
        self, run_id: str, *, node: Any = None, schema_name: Any = None, kind: Any = None
    ) -> list[Artifact]:
        return [a for a in self.kept if a.run_id == run_id]

    def close(self) -> None:
        self.closed = True


def test_hook_aeon_register_artifact_stores(tmp_path: Path) -> None:
    class Plugin:
        @hookimpl
        def aeon_register_artifact_stores(self, register: Register) -> None:
            register("kept", Kept)

    the_plan = plan(tool_step("1", "calculator", {"expression": "2 * 21"}))
    config = parse_config({"llm": scripted(tmp_path, the_plan), "artifacts": {"use": "kept", "label": "x"}})
    with Engine(config, plugins=[Plugin()]) as engine:
        result = engine.run("double 21")
    (store,) = Kept.instances
    assert store.label == "x" and store.closed  # built with its options, closed with the engine
    kinds = {a.kind for a in store.kept}
    assert kinds == {"plan", "tool_result", "step_output", "telemetry", "model_call", "answer"}
    assert all(a.run_id == result["run_id"] for a in store.kept)


def test_the_cli_keeps_artifacts_by_default_and_shows_them(tmp_path: Path) -> None:
    (tmp_path / "responses.json").write_text(
        json.dumps([json.dumps(plan(tool_step("1", "calculator", {"expression": "6 * 7"})))])
    )
    (tmp_path / "aeon.toml").write_text('[llm]\nuse = "scripted"\nresponses = "responses.json"\n')

    def aeon(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "aeon_cli", *args],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
        )

    done = aeon("run", "--json", "multiply 6 by 7")
    run_id = json.loads(done.stdout)["run_id"]
    listed = aeon("artifacts", run_id)
    assert listed.returncode == 0, listed.stderr
    assert (
        "tool_result" in listed.stdout
        and "tool:calculator" in listed.stdout
        and '"value": 42' in listed.stdout
    )
    only = json.loads(aeon("artifacts", run_id, "--schema", "tool:calculator", "--json").stdout)
    assert [a["value"] for a in only] == [{"expression": "6 * 7", "value": 42}]
    assert json.loads(aeon("artifacts", run_id, "--node", "1", "--kind", "step_output", "--json").stdout)[0][
        "value"
    ] == {
        "expression": "6 * 7",
        "value": 42,
    }
    missing = aeon("artifacts", "nope")
    assert missing.returncode == 1 and "no artifacts for run nope" in missing.stderr


def test_the_cli_lists_every_kind() -> None:
    assert get_args(ArtifactKind) == ARTIFACT_KINDS
