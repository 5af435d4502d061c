"""Deterministic steps without a plugin (issue 30 item 4): ``call_tool`` calls a listed tool with arguments filled
from the node's input by JSON pointers, and ``template`` reshapes fields; neither evaluates anything."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from aeon_kernel import Engine, hookimpl, tool
from aeon_kernel.config import AeonConfig
from aeon_kernel.errors import ValidationError
from aeon_plugins.flow.engine import TaskResult
from aeon_plugins.flow.loader import FlowError
from aeon_plugins.flow.templates import Template

CONFIG = AeonConfig().with_choice("memory", "in_memory")


def flow_of(*nodes: dict[str, Any]) -> dict[str, Any]:
    chain = [{"id": "in", "role": "start"}, *nodes, {"id": "out", "role": "exit"}]
    return {
        "name": "declarative",
        "nodes": chain,
        "edges": [[a["id"], b["id"]] for a, b in itertools.pairwise(chain)],
    }


def run(tmp_path: Path, flow: dict[str, Any], value: Any) -> TaskResult:
    (tmp_path / "flow").mkdir(parents=True, exist_ok=True)
    (tmp_path / "flow" / "flow.yaml").write_text(yaml.safe_dump(flow, sort_keys=False))
    with Engine.from_config_dir(tmp_path / "flow", CONFIG) as engine:
        return engine.run(value)


def load_problems(tmp_path: Path, flow: dict[str, Any]) -> list[str]:
    (tmp_path / "flow").mkdir(parents=True, exist_ok=True)
    (tmp_path / "flow" / "flow.yaml").write_text(yaml.safe_dump(flow, sort_keys=False))
    with pytest.raises(FlowError) as caught:
        Engine.from_config_dir(tmp_path / "flow", CONFIG)
    return [f"{p.key} {p.node} {p.message}" for p in caught.value.problems]


TOTAL = {
    "id": "total",
    "role": "linear",
    "impl": "call_tool",
    "tools": ["calculator"],
    "options": {
        "tool": "calculator",
        "arguments": {"expression": "{/price} * {/quantity}"},
        "output": {"order": "{/input/order}", "total": "{/result/value}", "computed": "{/result/expression}"},
    },
}


def test_call_tool_fills_the_arguments_from_the_input_and_shapes_the_output(tmp_path: Path) -> None:
    result = run(tmp_path, flow_of(TOTAL), {"order": "A-17", "price": 2.5, "quantity": 4})
    assert result.status == "success", result.message
    assert result.output == {"order": "A-17", "total": 10, "computed": "2.5 * 4"}
    (call,) = next(r for r in result.history if r["node"] == "total")["tool_calls"]
    assert call["tool_name"] == "calculator" and call["arguments"] == {"expression": "2.5 * 4"}


def test_call_tool_without_output_gives_the_tools_result(tmp_path: Path) -> None:
    node = {**TOTAL, "options": {"tool": "calculator", "arguments": {"expression": "{/text}"}}}
    result = run(tmp_path, flow_of(node), {"text": "7 - 2"})
    assert result.output == {"expression": "7 - 2", "value": 5}


def test_a_value_that_is_one_slot_keeps_its_type(tmp_path: Path) -> None:
    node = {
        "id": "shape",
        "role": "linear",
        "impl": "template",
        "options": {"output": {"n": "{/a/0}", "s": "n={/a/0}"}},
    }
    result = run(tmp_path, flow_of(node), {"a": [3, 4]})
    assert result.output == {"n": 3, "s": "n=3"}


def test_template_renames_nests_and_joins_fields(tmp_path: Path) -> None:
    node = {
        "id": "shape",
        "role": "linear",
        "impl": "template",
        "options": {
            "output": {"customer": {"name": "{/user/name}"}, "line": "{/user/name}: {/text}", "raw": "{x}"}
        },
    }
    result = run(tmp_path, flow_of(node), {"user": {"name": "Ada"}, "text": "refund", "noise": 1})
    assert result.output == {"customer": {"name": "Ada"}, "line": "Ada: refund", "raw": "{x}"}


def test_a_missing_field_fails_the_node_naming_it(tmp_path: Path) -> None:
    result = run(tmp_path, flow_of(TOTAL), {"order": "A-17", "price": 2.5})
    assert result.status == "failure"
    (failed,) = [r for r in result.history if r["status"] == "failure"]
    assert failed["node"] == "total"
    assert "options.arguments.expression: {/quantity} is not in the input" in failed["error"]
    assert "'order', 'price'" in failed["error"]


def test_a_tool_error_fails_a_call_tool_node(tmp_path: Path) -> None:
    result = run(tmp_path, flow_of(TOTAL), {"order": "A-17", "price": 1, "quantity": "0 / 0"})
    assert result.status == "failure"
    (failed,) = [r for r in result.history if r["status"] == "failure"]
    assert failed["node"] == "total" and failed["error"].startswith(
        "ValidationError: tool 'calculator' failed"
    )
    assert failed["tool_calls"][0]["error"] is not None


def test_arguments_the_tools_schema_refuses_are_misuse(tmp_path: Path) -> None:
    node = {**TOTAL, "options": {"tool": "calculator", "arguments": {"expression": "{/n}"}}}
    result = run(tmp_path, flow_of(node), {"n": 5})
    assert result.status == "failure" and "tool misuse" in result.history[-1]["error"]


def test_load_checks_catch_an_unlisted_tool_and_a_malformed_pointer(tmp_path: Path) -> None:
    unlisted = {**TOTAL, "tools": []}
    (problem,) = load_problems(tmp_path / "a", flow_of(unlisted))
    assert (
        "nodes[1].options total call_tool calls 'calculator', which the node does not list in tools"
        in problem
    )
    broken = {**TOTAL, "options": {"tool": "calculator", "arguments": {"expression": "{/a~9}"}}}
    (problem,) = load_problems(tmp_path / "b", flow_of(broken))
    assert "could not be built" in problem and "{/a~9} is not a JSON pointer" in problem


def test_a_template_is_never_evaluated() -> None:
    shape = Template({"x": "{/a}", "y": "{__import__('os').system('true')}", "z": "{/b} {1 + 1}"}, "output")
    assert shape.fill({"a": "__import__('os')", "b": 2}) == {
        "x": "__import__('os')",
        "y": "{__import__('os').system('true')}",
        "z": "2 {1 + 1}",
    }
    with pytest.raises(ValidationError, match="holds JSON values"):
        Template({"x": object()}, "output")


# --- checks on a node's output (issue 30 item 5) -----------------------------------------------------------------


def test_a_check_that_fails_fails_the_node_and_contradicts_the_run(tmp_path: Path) -> None:
    checked = {
        **TOTAL,
        "checks": [
            {"equal": ["{/output/total}", "{/tools/calculator/value}"]},
            {"within": ["{/output/order}", "{/input/order}"], "message": "the order must be the input's"},
        ],
    }
    good = run(tmp_path / "good", flow_of(checked), {"order": "A-17", "price": 2, "quantity": 3})
    assert good.status == "success"
    checks = good.run.to_dict()["verification"]["checks"]
    assert [(c["name"], c["verdict"], c["step_id"]) for c in checks] == [("node_check", "passed", "t1/total")]
    wrong = {**checked, "options": {**TOTAL["options"], "output": {"order": "B-1", "total": 7}}}
    bad = run(tmp_path / "bad", flow_of(wrong), {"order": "A-17", "price": 2, "quantity": 3})
    assert bad.status == "failure"
    (failed,) = [r for r in bad.history if r["status"] == "failure"]
    assert failed["error"] == "check failed: checks[0]: '7' is not '6'; the order must be the input's"
    verification = bad.run.to_dict()["verification"]
    assert verification["verdict"] == "contradicted" and "node_check" in verification["reason"]


def test_an_agent_node_that_fails_its_check_is_asked_once_more_with_the_finding(tmp_path: Path) -> None:
    flow = flow_of(
        {
            "id": "copy",
            "role": "linear",
            "kind": "agent",
            "instruction": "Copy the name.",
            "checks": [{"within": ["{/output/name}", "{/input/name}"], "message": "copy the input's name"}],
        }
    )
    (tmp_path / "flow").mkdir()
    (tmp_path / "flow" / "flow.yaml").write_text(yaml.safe_dump(flow, sort_keys=False))
    replies = [{"name": "Bob"}, {"name": "Ada"}]
    config = CONFIG.with_choice("llm", "scripted", responses=replies)
    with Engine.from_config_dir(tmp_path / "flow", config) as engine:
        result = engine.run({"name": "Ada"})
        prompts = [asked["prompt"] for asked in engine.engine.llm.adapter.prompts]
    assert result.status == "success" and result.output == {"name": "Ada"}
    assert len(prompts) == 2 and 'Your reply {"name": "Bob"} was wrong: copy the input\'s name' in prompts[1]


def test_bad_checks_and_examples_are_load_problems(tmp_path: Path) -> None:
    (tmp_path / "flow" / "schemas").mkdir(parents=True)
    schema = {
        "type": "object",
        "required": ["n"],
        "properties": {"n": {"type": "integer"}},
        "examples": [{"n": "x"}],
    }
    (tmp_path / "flow" / "schemas" / "count.json").write_text(json.dumps(schema))
    flow = flow_of(
        {
            "id": "ask",
            "role": "linear",
            "kind": "agent",
            "instruction": "Count.",
            "output_schema": "count",
            "example": {"n": 1.5},
            "checks": [{"equal": ["{/output/n~9}", 1]}],
        },
        {"id": "both", "role": "linear", "checks": [{"equal": [1, 1], "within": [1, 1]}]},
    )
    (tmp_path / "flow" / "flow.yaml").write_text(yaml.safe_dump(flow, sort_keys=False))
    with pytest.raises(FlowError) as caught:
        Engine.from_config_dir(tmp_path / "flow", CONFIG)
    listed = [f"{p.file} {p.key} {p.message}" for p in caught.value.problems]
    assert any("schemas/count.json" in p and "examples[0] does not match the schema" in p for p in listed), (
        listed
    )
    assert any("nodes[1].example" in p and "does not match output schema 'count'" in p for p in listed), (
        listed
    )
    assert any("nodes[1].checks" in p and "is not a JSON pointer" in p for p in listed), listed
    assert any("a check has one of equal and within" in p for p in listed), listed


# --- tools in the universal status model (spec 004 §5) -----------------------------------------------------------


class PartialTools:
    """A search tool that finds only some of what it is asked for, and says so."""

    @hookimpl
    def aeon_register_tools(self, register: Any) -> None:
        @tool(name="lookup")
        def lookup(names: list[str]) -> dict[str, Any]:
            """Look names up in a small directory."""
            known = {"ada": "ada@example.org"}
            found = {name: known[name] for name in names if name in known}
            return {"found": found, "partial": len(found) < len(names)}

        register("lookup", lambda: lookup)


def test_a_tool_reports_partial_and_its_node_makes_the_task_partial(tmp_path: Path) -> None:
    node = {
        "id": "find",
        "role": "linear",
        "impl": "call_tool",
        "tools": ["lookup"],
        "options": {"tool": "lookup", "arguments": {"names": "{/names}"}},
    }
    (tmp_path / "flow").mkdir()
    (tmp_path / "flow" / "flow.yaml").write_text(yaml.safe_dump(flow_of(node), sort_keys=False))
    with Engine.from_config_dir(tmp_path / "flow", CONFIG, plugins=[PartialTools()]) as engine:
        whole = engine.run({"names": ["ada"]})
        part = engine.run({"names": ["ada", "bob"]})
    assert whole.status == "success"
    assert [c["status"] for c in next(r for r in whole.history if r["node"] == "find")["tool_calls"]] == [
        "success"
    ]
    assert part.status == "partial" and part.output["found"] == {"ada": "ada@example.org"}
    record = next(r for r in part.history if r["node"] == "find")
    assert record["status"] == "success" and record["task_status"] == "partial"
    assert [c["status"] for c in record["tool_calls"]] == ["partial"]
    assert {
        "event": "partial",
        "task": "t1",
        "node": "find",
        "reason": "tool 'lookup' reported a partial result",
    } in (record["events"])
    failed = run(tmp_path / "failed", flow_of(TOTAL), {"order": "A", "price": 1, "quantity": "0 / 0"})
    (call,) = next(r for r in failed.history if r["node"] == "total")["tool_calls"]
    assert call["status"] == "failure"


@pytest.mark.parametrize("second", [{"sum": 42}, {"sum": 1500000000000000}])
def test_an_agent_nodes_numbers_are_held_to_its_tools_results(tmp_path: Path, second: dict[str, Any]) -> None:
    """Issue 30: an agent answered 17 + 25 as 1500000000000000 and the flow still ended success. Now a number in
    neither the input nor a tool's result is asked about once more, then fails the node."""
    flow = flow_of(
        {
            "id": "add",
            "role": "linear",
            "kind": "agent",
            "instruction": "Add a and b.",
            "tools": ["calculator"],
        }
    )
    (tmp_path / "flow").mkdir()
    (tmp_path / "flow" / "flow.yaml").write_text(yaml.safe_dump(flow, sort_keys=False))
    replies = [
        {"tool": "calculator", "arguments": {"expression": "17 + 25"}},
        {"sum": 1500000000000000},
        second,
    ]
    with Engine.from_config_dir(
        tmp_path / "flow", CONFIG.with_choice("llm", "scripted", responses=replies)
    ) as engine:
        result = engine.run({"a": 17, "b": 25})
        prompts = [asked["prompt"] for asked in engine.engine.llm.adapter.prompts]
    assert "1500000000000000 is in neither the input nor a tool's result" in prompts[2]
    if second["sum"] == 42:
        assert result.status == "success" and result.output == {"sum": 42}
    else:
        assert result.status == "failure"
        assert "check failed: 1500000000000000 is in neither" in result.history[-1]["error"]
        assert result.run.to_dict()["verification"]["verdict"] == "contradicted"


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=8,
)


@settings(max_examples=200, deadline=None)
@given(
    key=st.text(alphabet=st.characters(blacklist_characters="{}", blacklist_categories=("Cs",)), max_size=6),
    value=JSON,
)
def test_a_slot_is_the_value_at_its_pointer_and_nothing_is_evaluated(key: str, value: Any) -> None:
    """RFC 6901 escapes (``~0`` for ``~``, ``~1`` for ``/``) reach any key; a slot alone keeps the value's type, a slot
    in a longer string its text."""
    document = {"other": 1, key: value}  # the key may be "other" too
    pointer = "/" + key.replace("~", "~0").replace("/", "~1")
    assert Template({"v": "{" + pointer + "}"}, "t").fill(document) == {"v": value}
    expected = (
        value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    )
    assert Template("<{" + pointer + "}>", "t").fill(document) == f"<{expected}>"
