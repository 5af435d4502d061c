"""Recorded flow runs replay offline to the same history (docs/flows.md "History, resume, replay").

The agent nodes are answered by the ``scripted`` model while a cassette records every request and response;
replaying the cassette must not load any model (the configured one is made unloadable) and must give a history
identical byte for byte once timestamps and durations are removed — in Python and through ``aeon flow run``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from aeon_cli.main import cli
from aeon_kernel import Engine
from aeon_plugins.flow.engine import TaskResult

FLOW_YAML = """\
name: agent-triage
version: 2
parallelism: 1
nodes:
  - {id: intake, role: start, impl: pick, options: {keys: [ticket]}}
  - {id: fork, role: split}
  - id: estimate
    role: linear
    kind: agent
    instruction: Estimate the cost of handling the ticket; use the calculator.
    tools: [calculator]
    output_schema: estimate
    example: {"cost": 5}
  - id: summarise
    role: linear
    kind: agent
    instruction: Summarise the ticket in a few words.
    output_schema: summary
    example: {"summary": "refund request"}
  - {id: join, role: merge, impl: collect}
  - id: classify
    role: decision
    kind: agent
    instruction: Decide which team handles the ticket.
    context: global
    output_schema: team
    example: {"team": "billing", "route": "billing"}
  - {id: billing, role: exit}
  - {id: support, role: exit}
edges:
  - [intake, fork]
  - [fork, estimate]
  - [fork, summarise]
  - [estimate, join]
  - [summarise, join]
  - [join, classify]
  - [classify, billing]
  - [classify, support]
"""
SCHEMAS = {
    "estimate": {"type": "object", "properties": {"cost": {"type": "number"}}, "required": ["cost"]},
    "summary": {"type": "object", "properties": {"summary": {"type": "string"}}, "required": ["summary"]},
    "team": {"type": "object", "properties": {"team": {"type": "string"}}, "required": ["team"]},
}
#: what the scripted model answers, in the order the stages ask (parallelism 1)
RESPONSES = [
    {"tool": "calculator", "arguments": {"expression": "2 * (3 + 4)"}},
    {"cost": 14},
    'Sure! Here it is: {"summary": "wrong invoice"}',  # prose around the JSON: the supervisor repairs it
    {"team": "billing", "route": "billing"},
]
INPUT = {"ticket": "My invoice is wrong, I was charged twice", "customer": 42}
NODES = ["intake", "fork", "estimate", "summarise", "join", "classify", "billing"]


@pytest.fixture
def flow(tmp_path: Path) -> Path:
    directory = tmp_path / "flow"
    (directory / "schemas").mkdir(parents=True)
    (directory / "flow.yaml").write_text(FLOW_YAML)
    for name, schema in SCHEMAS.items():
        (directory / "schemas" / f"{name}.json").write_text(json.dumps(schema))
    (tmp_path / "responses.json").write_text(json.dumps(RESPONSES))
    (directory / "aeon.toml").write_text(
        f'[llm]\nuse = "scripted"\nresponses = "{tmp_path / "responses.json"}"\n'
    )
    return directory


def offline(flow: Path) -> None:
    """Make the configured model impossible to load: a replay that tried would fail."""
    (flow.parent / "responses.json").unlink()
    (flow / "aeon.toml").write_text(f'[llm]\nuse = "scripted"\nresponses = "{flow.parent / "gone.json"}"\n')


def without_times(history: Any) -> bytes:
    """The history as bytes, timestamps and durations removed (key order kept: byte-identical means that too)."""
    stripped = [
        {k: v for k, v in stage.items() if k not in ("started", "duration_ms", "profile")}
        for stage in history
    ]
    return json.dumps(stripped, ensure_ascii=False).encode()


def summary(result: TaskResult | dict[str, Any]) -> dict[str, Any]:
    data = result.to_dict() if isinstance(result, TaskResult) else result
    keep = ("status", "output", "message", "run_status", "errors", "tasks", "flow")
    return {key: data[key] for key in keep}


def record(flow: Path, cassette: Path) -> TaskResult:
    with Engine.from_config_dir(flow, record=cassette) as engine:
        result = engine.run(INPUT)
    assert result.status == "success", result.message
    assert [stage["node"] for stage in result.history] == NODES
    return result


def test_a_recorded_flow_replays_offline_to_a_byte_identical_history(flow: Path, tmp_path: Path) -> None:
    cassette = tmp_path / "run.cassette.jsonl"
    recorded = record(flow, cassette)
    # what the agents did is in the history: the tool call, the repaired reply, the decision with its context
    stages = {stage["node"]: stage for stage in recorded.history}
    assert stages["estimate"]["tool_calls"][0]["result"]["value"] == 14
    assert stages["estimate"]["output"] == {"cost": 14}
    assert stages["summarise"]["output"] == {"summary": "wrong invoice"}
    assert stages["classify"]["route"] == ["billing"] and stages["classify"]["context"]
    assert recorded.output == {"team": "billing", "route": "billing"}
    requests = cassette.read_text().splitlines()[1:]
    assert len(requests) == len(RESPONSES)
    cassette_bytes = cassette.read_bytes()

    offline(flow)
    with Engine.from_config_dir(flow, replay=cassette) as engine:
        replayed = engine.run(INPUT)

    assert replayed.run_id != recorded.run_id
    assert without_times(replayed.history) == without_times(recorded.history)
    assert summary(replayed) == summary(recorded)
    assert cassette.read_bytes() == cassette_bytes, "a replay never writes the cassette"


def test_a_replay_is_the_same_whatever_the_parallelism(flow: Path, tmp_path: Path) -> None:
    """The clones' stages run at once with parallelism 2, and the history is still the recorded one."""
    cassette = tmp_path / "run.cassette.jsonl"
    recorded = record(flow, cassette)
    offline(flow)
    (flow / "flow.yaml").write_text(FLOW_YAML.replace("parallelism: 1", "parallelism: 2"))
    with Engine.from_config_dir(flow, replay=cassette) as engine:
        replayed = [engine.run(INPUT) for _ in range(3)]
    for result in replayed:
        assert without_times(result.history) == without_times(recorded.history)
        assert summary(result)["output"] == recorded.output


def test_a_replay_of_changed_prompts_fails_loudly_naming_the_difference(flow: Path, tmp_path: Path) -> None:
    cassette = tmp_path / "run.cassette.jsonl"
    record(flow, cassette)
    offline(flow)
    (flow / "flow.yaml").write_text(FLOW_YAML.replace("Summarise the ticket", "Summarize the ticket"))
    with Engine.from_config_dir(flow, replay=cassette) as engine:
        result = engine.run(INPUT)
    assert result.status == "failure"
    assert result.run.status == "failed"
    errors = json.dumps(result.to_dict()["errors"])
    assert "no recording of this request" in errors and "Summarize" in errors, errors
    # the stages before the changed one were replayed
    assert [stage["node"] for stage in result.history][:3] == ["intake", "fork", "estimate"]


def test_cli_record_then_replay_gives_the_same_history(
    flow: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("AEON_CONFIG", raising=False)
    runner = CliRunner()
    cassette = tmp_path / "cli.cassette.jsonl"
    given = ["flow", "run", str(flow), "--input", json.dumps(INPUT), "--json"]

    recorded = runner.invoke(cli, [*given, "--record", str(cassette)])
    assert recorded.exit_code == 0, recorded.output
    offline(flow)
    replayed = runner.invoke(cli, [*given, "--replay", str(cassette)])
    assert replayed.exit_code == 0, replayed.output

    first, second = json.loads(recorded.stdout), json.loads(replayed.stdout)
    assert first["status"] == second["status"] == "success"
    assert [stage["node"] for stage in first["history"]] == NODES
    assert without_times(second["history"]) == without_times(first["history"])
    assert summary(second) == summary(first)


def test_cli_record_and_replay_together_is_a_usage_error(flow: Path, tmp_path: Path) -> None:
    result = CliRunner().invoke(
        cli,
        ["flow", "run", str(flow), "--input", "{}", "--record", "a.jsonl", "--replay", "b.jsonl"],
    )
    assert result.exit_code == 2, result.output
    assert "choose one of record and replay" in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
