"""Flows end to end on real components: node code and retrieval policies from plugins, context layers on real
backends, tools and tool misuse, agent nodes through the kernel's model client, statuses, records."""

from __future__ import annotations

import copy
import itertools
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
import yaml

from aeon_kernel import Engine, hookimpl
from aeon_kernel.config import AeonConfig
from aeon_kernel.errors import UnknownComponentError
from aeon_plugins.flow.engine import FlowEngine
from aeon_plugins.flow.loader import FlowError
from aeon_plugins.scripted import ScriptedLLM


def write_flow(root: Path, flow: dict[str, Any], **files: Any) -> Path:
    """A flow directory: ``flow.yaml`` from ``flow``; ``schemas`` (name -> schema), ``context``, ``memory``."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "flow.yaml").write_text(yaml.safe_dump(flow, sort_keys=False), encoding="utf-8")
    for name, schema in files.get("schemas", {}).items():
        (root / "schemas").mkdir(exist_ok=True)
        (root / "schemas" / f"{name}.json").write_text(json.dumps(schema), encoding="utf-8")
    for name in ("context", "memory"):
        if name in files:
            (root / f"{name}.yaml").write_text(yaml.safe_dump(files[name]), encoding="utf-8")
    return root


def chain(*nodes: dict[str, Any], name: str = "t") -> dict[str, Any]:
    """A flow whose nodes follow one another in the order given."""
    return {
        "name": name,
        "nodes": list(nodes),
        "edges": [[a["id"], b["id"]] for a, b in itertools.pairwise(nodes)],
    }


def config(replies: list[Any] | None = None, **choices: Any) -> AeonConfig:
    chosen = AeonConfig().with_choice("memory", "in_memory")
    if replies is not None:
        chosen = chosen.with_choice("llm", "constrained_script", responses=replies)
    return chosen


class ConstrainedScript(ScriptedLLM):
    """The scripted model, as an adapter that can constrain decoding: it keeps the schema it was given."""

    supports_json_schema = True


class Demo:
    """A plugin with node code and a retrieval policy, as a third-party package would write it."""

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []

    @hookimpl
    def aeon_register_nodes(self, register: Any) -> None:
        def shout(suffix: str = "!") -> Any:
            return lambda value, context: {**value, "text": value["text"].upper() + suffix}

        def note(key: str) -> Any:
            def run(value: Any, context: Any) -> Any:
                context.remember(key, value["text"])
                return value

            return run

        def look() -> Any:
            def run(value: Any, context: Any) -> Any:
                self.seen.append({"context": copy.deepcopy(context.context), "key": context.idempotency_key})
                context.context.clear()  # read-only: a node's changes do not reach the record
                return value

            return run

        def calc(a: float, b: float, tool: str = "calculator") -> Any:
            def run(value: Any, context: Any) -> Any:
                call = context.call_tool(tool, expression=f"{a} / {b}")
                return {**value, "result": call.result, "error": call.error and call.error["type"]}

            return run

        register("demo.shout", shout)
        register("demo.note", note)
        register("demo.look", look)
        register("demo.calc", calc)

    @hookimpl
    def aeon_register_llm_adapters(self, register: Any) -> None:
        register("constrained_script", ConstrainedScript)

    @hookimpl
    def aeon_register_retrieval_policies(self, register: Any) -> None:
        register("oldest", lambda: lambda items, profile: sorted(items, key=lambda item: item["seq"]))


def build(tmp_path: Path, flow: dict[str, Any], replies: list[Any] | None = None, **files: Any) -> FlowEngine:
    plugin = Demo()
    engine = Engine.from_config_dir(
        write_flow(tmp_path / "flow", flow, **files), config(replies), plugins=[plugin]
    )
    engine.plugin = plugin  # type: ignore[attr-defined]
    return engine


START = {"id": "in", "role": "start"}
EXIT = {"id": "out", "role": "exit"}


def test_hook_aeon_register_nodes(tmp_path: Path) -> None:
    """A plugin's node code runs where flow.yaml names it, built with the node's options."""
    flow = chain(
        START, {"id": "loud", "role": "linear", "impl": "demo.shout", "options": {"suffix": "?!"}}, EXIT
    )
    with build(tmp_path, flow) as engine:
        result = engine.run({"text": "hi"})
    assert (result.status, result.output) == ("success", {"text": "HI?!"})
    assert [record["node"] for record in result.history] == ["in", "loud", "out"]

    flow["nodes"][1]["impl"] = "demo.whisper"
    with pytest.raises(FlowError) as caught:
        build(tmp_path / "again", flow)
    (problem,) = caught.value.problems
    assert problem.node == "loud" and "demo.whisper" in problem.message and "demo.shout" in problem.message


def test_hook_aeon_register_retrieval_policies(tmp_path: Path) -> None:
    """A profile's policy orders what the node sees; the context is recorded as the node saw it."""
    nodes = [START, *({"id": f"s{i}", "role": "linear"} for i in range(3))]
    nodes.append({"id": "look", "role": "linear", "impl": "demo.look", "context": {"profile": "first"}})
    profiles = {"profiles": {"first": {"layers": ["task"], "policy": "oldest", "limit": 2}}}
    with build(tmp_path, chain(*nodes, EXIT), context=profiles) as engine:
        result = engine.run({"n": 1})
        (seen,) = engine.plugin.seen  # type: ignore[attr-defined]
    assert [item["key"].split("-", 1)[1] for item in seen["context"]] == ["in", "s0"]
    (record,) = [r for r in result.history if r["node"] == "look"]
    assert record["context"] == seen["context"] != []  # the node cleared its copy, not the record
    assert seen["key"] == f"{result.run_id}:t1/look"

    profiles["profiles"]["first"]["policy"] = "newest-ish"
    with pytest.raises(FlowError, match="newest-ish"):
        build(tmp_path / "bad", chain(*nodes, EXIT), context=profiles)


def test_hook_aeon_register_flow_engines(tmp_path: Path) -> None:
    """``Engine.from_config_dir`` builds a flow with the flow engine registered under the name it is given: the
    default ``flow`` (aeon_plugins.flow), or a plugin's, which gets the engine and the directory."""
    built: list[tuple[Any, Path]] = []

    class Recorder:
        def __init__(self, engine: Any, directory: Path) -> None:
            built.append((engine, directory))
            self.engine = engine

    class Engines:
        @hookimpl
        def aeon_register_flow_engines(self, register: Any) -> None:
            register("recorder", Recorder)

    directory = write_flow(tmp_path / "flow", chain(START, EXIT))
    with Engine.from_config_dir(directory, config(), plugins=[Engines()]) as flow:
        assert isinstance(flow, FlowEngine) and flow.run({"n": 1}).status == "success"
    made = Engine.from_config_dir(directory, config(), plugins=[Engines()], flow_engine="recorder")
    assert isinstance(made, Recorder) and built == [(made.engine, directory)]
    assert made.engine.registries["flow_engines"].providers()["flow"] == "aeon.flow"
    made.engine.close()

    with pytest.raises(UnknownComponentError, match=r"no flow engine named 'dag'.*'flow' \(from aeon.flow\)"):
        Engine.from_config_dir(directory, config(), flow_engine="dag")


def test_a_clone_sees_what_its_parent_did_and_the_budget_trims_the_context(tmp_path: Path) -> None:
    flow = {
        "name": "ctx",
        "nodes": [
            START,
            {"id": "prep", "role": "linear", "impl": "assign", "options": {"values": {"pad": "x" * 400}}},
            {"id": "fork", "role": "branch"},
            {"id": "a", "role": "linear", "impl": "demo.look", "context": {"profile": "small"}},
            {"id": "b", "role": "linear", "impl": "demo.look", "context": "global"},
            {"id": "out", "role": "exit"},
        ],
        "edges": [["in", "prep"], ["prep", "fork"], ["fork", "a"], ["fork", "b"], ["a", "out"], ["b", "out"]],
    }
    profiles = {"profiles": {"small": {"layers": ["task"], "max_tokens": 60}}}
    with build(tmp_path, flow, context=profiles) as engine:
        engine.run({"q": 1})
        small, everything = engine.plugin.seen  # type: ignore[attr-defined]
    # the clone's context holds its parent's stages (fork, prep, in), newest first; the padded one does not fit
    assert [item["key"].split("-", 1)[1] for item in everything["context"]] == ["fork", "prep", "in"]
    assert [item["key"].split("-", 1)[1] for item in small["context"]] == ["in"]  # the padded two do not fit


def test_a_layer_on_its_own_sqlite_backend_outlives_the_engine(tmp_path: Path) -> None:
    """memory.yaml puts the project layer in a real SQLite file: a later run of a new engine reads it."""
    db = tmp_path / "project.db"
    writer = chain(
        START, {"id": "note", "role": "linear", "impl": "demo.note", "options": {"key": "last"}}, EXIT
    )
    memory = {"layers": {"project": {"use": "sqlite", "path": str(db)}}}
    with build(tmp_path / "one", writer, memory=memory) as engine:
        engine.run({"text": "remember me"})
    reader = chain(START, {"id": "look", "role": "linear", "impl": "demo.look", "context": "global"}, EXIT)
    with build(tmp_path / "two", reader, memory=memory) as engine:
        engine.run({"text": "?"})
        (seen,) = engine.plugin.seen  # type: ignore[attr-defined]
    assert [(i["layer"], i["key"], i["value"]) for i in seen["context"] if i["layer"] == "project"] == [
        ("project", "last", "remember me")
    ]
    with sqlite3.connect(db) as connection:
        assert connection.execute("SELECT count(*) FROM aeon_memory").fetchone()[0] >= 1


def test_tools_a_node_lists_work_and_their_errors_do_not_fail_it_but_misuse_does(tmp_path: Path) -> None:
    ok = {
        "id": "calc",
        "role": "linear",
        "impl": "demo.calc",
        "options": {"a": 6, "b": 3},
        "tools": ["calculator"],
    }
    with build(tmp_path / "ok", chain(START, ok, EXIT)) as engine:
        result = engine.run({})
    assert result.status == "success" and result.output["result"] == {"expression": "6 / 3", "value": 2}
    (call,) = next(r for r in result.history if r["node"] == "calc")["tool_calls"]
    assert call["tool_name"] == "calculator" and call["step_id"] == "t1/calc"
    assert result.run.state.tool_history[0].tool_name == "calculator"

    zero = {**ok, "options": {"a": 1, "b": 0}}
    with build(tmp_path / "zero", chain(START, zero, EXIT)) as engine:
        result = engine.run({})
    assert result.status == "success" and result.output["error"] is not None  # the node saw it and decided

    unlisted = {**ok, "options": {"a": 1, "b": 1, "tool": "echo"}}
    with build(tmp_path / "misuse", chain(START, unlisted, EXIT)) as engine:
        result = engine.run({})
    assert result.status == "failure"
    (failed,) = [r for r in result.history if r["status"] == "failure"]
    assert (
        failed["node"] == "calc" and failed["error"].startswith("tool misuse:") and "echo" in failed["error"]
    )


def test_schemas_are_checked_on_the_way_in_and_out(tmp_path: Path) -> None:
    schemas = {"text": {"type": "object", "required": ["text"], "properties": {"text": {"type": "string"}}}}
    flow = chain(
        START,
        {
            "id": "loud",
            "role": "linear",
            "impl": "demo.shout",
            "input_schema": "text",
            "output_schema": "text",
        },
        EXIT,
    )
    with build(tmp_path, flow, schemas=schemas) as engine:
        assert engine.run({"text": "a"}).status == "success"
        bad = engine.run({"txt": "a"})
    assert bad.status == "failure" and "input does not match schema 'text'" in bad.history[-1]["error"]
    assert bad.tasks[0]["ended_at"] == "loud"


def test_a_flow_output_is_handed_back_as_a_type(tmp_path: Path) -> None:
    """Typed access to a flow's output (issue 28): as a pydantic model, or checked against a JSON Schema."""
    from pydantic import BaseModel

    from aeon_kernel.errors import ValidationError

    class Loud(BaseModel):
        text: str

    flow = chain(START, {"id": "loud", "role": "linear", "impl": "demo.shout"}, EXIT)
    with build(tmp_path, flow) as engine:
        result = engine.run({"text": "a"})
        unexpected = engine.run({"note": "a"})
    assert result.output_as(Loud) == Loud(text="A!")
    assert result.output_as({"type": "object", "required": ["text"]}) == {"text": "A!"}
    with pytest.raises(ValidationError, match=f"the output of run {unexpected.run_id}"):
        unexpected.output_as(Loud)


def test_a_flow_run_streams_its_stages(tmp_path: Path) -> None:
    """``flow.start(value).stream()`` (issue 28): one StageFinished per history record, then the result."""
    from aeon_kernel.events import RunFinished, StageFinished

    flow = chain(START, {"id": "loud", "role": "linear", "impl": "demo.shout"}, EXIT)
    with build(tmp_path, flow) as engine:
        events = list(engine.stream({"text": "a"}))
        expected = engine.run({"text": "a"})
    stages = [e.stage for e in events if isinstance(e, StageFinished)]
    assert [s["node"] for s in stages] == [s["node"] for s in expected.history] == ["in", "loud", "out"]
    assert stages[-1]["output"] == {"text": "A!"}
    assert isinstance(events[-1], RunFinished) and events[-1].result["task"]["output"] == {"text": "A!"}


def test_continue_on_failure_makes_the_task_partial_and_always_fail_overrides_success(tmp_path: Path) -> None:
    broken = {"id": "loud", "role": "linear", "impl": "demo.shout", "continue_on_failure": True}
    with build(tmp_path / "a", chain(START, broken, EXIT)) as engine:
        result = engine.run({"no_text": 1})
    assert (result.status, result.output) == ("partial", {"no_text": 1})  # the output it had before the node
    assert "KeyError" in result.history[1]["error"] and result.history[2]["task_status"] == "partial"

    with build(tmp_path / "b", chain(START, {"id": "out", "role": "exit", "always_fail": True})) as engine:
        result = engine.run({"x": 1})
    assert result.status == "failure" and result.run.status == "failed" and result.output == {"x": 1}


def test_an_agent_decision_is_constrained_to_its_edges_and_routes(tmp_path: Path) -> None:
    schemas = {"route": {"type": "object", "properties": {"team": {"type": "string"}}, "required": ["team"]}}
    flow = {
        "name": "triage",
        "nodes": [
            START,
            {
                "id": "pick",
                "role": "decision",
                "kind": "agent",
                "instruction": "Which team?",
                "output_schema": "route",
                "example": {"team": "x", "route": "billing"},
            },
            {"id": "billing", "role": "exit"},
            {"id": "tech", "role": "exit"},
        ],
        "edges": [["in", "pick"], ["pick", "billing"], ["pick", "tech"]],
    }
    with build(tmp_path, flow, replies=[{"team": "ops", "route": "tech"}], schemas=schemas) as engine:
        result = engine.run({"ticket": "the server is down"})
        llm = engine.engine.llm.adapter
    assert isinstance(llm, ScriptedLLM)
    (asked,) = llm.prompts
    assert asked["json_schema"]["properties"]["route"] == {"type": "string", "enum": ["billing", "tech"]}
    assert (
        "Which team?" in asked["prompt"]
        and "the server is down" in asked["prompt"]
        and '"billing"' in asked["prompt"]
    )
    assert result.status == "success" and result.tasks[0]["exit"] == "tech"
    decision = result.history[1]
    assert decision["route"] == ["tech"] and decision["node"] == "pick"


def test_a_deterministic_decision_outside_its_edges_fails_the_node(tmp_path: Path) -> None:
    flow = {
        "name": "d",
        "nodes": [
            START,
            {
                "id": "pick",
                "role": "decision",
                "impl": "route_by",
                "options": {"key": "k", "routes": {"a": "x"}},
            },
            {"id": "x", "role": "exit"},
            {"id": "y", "role": "exit"},
        ],
        "edges": [["in", "pick"], ["pick", "x"], ["pick", "y"]],
    }
    with build(tmp_path, flow) as engine:
        assert engine.run({"k": "a"}).tasks[0]["exit"] == "x"
        result = engine.run({"k": "b"})
    assert result.status == "failure" and "must be one of its edges" in result.history[-1]["error"]


def test_iterating_yields_one_record_per_stage_and_the_run_records_what_produced_it(tmp_path: Path) -> None:
    log = tmp_path / "run.jsonl"
    flow = chain(START, {"id": "mid", "role": "linear"}, EXIT)
    with build(tmp_path, flow) as engine:
        engine.engine.add_sink("jsonl", path=str(log))
        records = list(engine.iter({"a": 1}))
        result = engine.result
    assert result is not None and [r["seq"] for r in records] == [1, 2, 3] and list(result.history) == records
    lines = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
    manifest = lines[0]["manifest"] if "manifest" in lines[0] else lines[0]
    flow_meta = manifest["flow"]
    assert flow_meta["name"] == "t" and set(flow_meta["hashes"]) == {"flow.yaml"}
    assert [stage["node"] for line in lines[1:] for stage in line.get("stages", [])] == ["in", "mid", "out"]
    json.dumps(result.to_dict())  # the Task result is JSON
    assert result.history_ref["run_id"] == result.run_id


def test_a_flow_run_resumes_as_a_flow_and_only_as_one(tmp_path: Path) -> None:
    """Stopped after two stages, a stored flow run goes on with `resume`; the plan scheduler refuses it."""
    from aeon_kernel import RunStoreError

    stored = config().with_choice("state", "sqlite", path=str(tmp_path / "runs.db"))
    flow_dir = write_flow(
        tmp_path / "flow", chain(START, {"id": "a", "role": "linear"}, {"id": "b", "role": "linear"}, EXIT)
    )
    with Engine.from_config_dir(flow_dir, stored) as engine:
        run = engine.start({"n": 1})
        run.next(), run.next()
        run.close()
    with Engine(stored) as plain, pytest.raises(RunStoreError, match=f"aeon flow resume {run.run_id}"):
        plain.resume(run.run_id)
    with Engine.from_config_dir(flow_dir, stored) as engine:
        result = engine.resume(run.run_id)
    assert result.status == "success" and [r["node"] for r in result.history] == ["in", "a", "b", "out"]
