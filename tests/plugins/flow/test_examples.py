"""The example flows of ``examples/flows/``: each one is valid as shipped, replays offline from a run recorded on the
embedded model, and (marked ``model``) runs on the embedded model itself.

The cassettes in ``tests/cassettes/flows/`` (one per example, holding each of its cases) were recorded from Gemma 3
270M (llama.cpp, constrained decoding); ``AEON_RECORD_CASSETTES=1 python3 -m pytest -m model
tests/plugins/flow/test_examples.py`` re-records them. Replay serves only recorded requests, so an instruction,
schema or agent prompt changed without re-recording fails the replay tests, naming the nearest recorded prompt.
Replay loads no model.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from aeon_cli.main import cli
from aeon_kernel import Engine
from aeon_kernel.config import AeonConfig
from aeon_kernel.schemas import schema_errors
from aeon_plugins.flow.engine import TaskResult
from aeon_plugins.flow.graph import Flow, mermaid
from aeon_plugins.flow.loader import load_flow

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = ROOT / "examples" / "flows"
CASSETTES = ROOT / "tests" / "cassettes" / "flows"
FLOWS = sorted(path.parent.name for path in EXAMPLES.glob("*/flow.yaml"))
#: the keys every history record has (docs/flows.md, "History, resume, replay"; the others only when not empty)
RECORD_KEYS = {
    *("seq", "task", "node", "role", "input", "output", "status", "route", "task_status", "started"),
    "duration_ms",
}


@dataclass(frozen=True)
class Case:
    """One recorded run of an example: its input, and what its replay gives."""

    flow: str
    name: str
    input: dict[str, Any]
    exit: str
    #: ``task/node`` of every stage, in order
    stages: tuple[str, ...]
    output: Any

    @property
    def directory(self) -> Path:
        return EXAMPLES / self.flow


def cassette(flow: str) -> Path:
    return CASSETTES / f"{flow}.jsonl"


BILLING = "I was charged twice for my subscription this month, please refund one payment."
CRASH = "The app crashes every time I open the settings page on my Android phone."
MIXED = "The battery lasts all day and the screen is bright, but the speaker crackles."
BROKEN = "It broke after two days and support never answered."
ACK = "Thank you for your message. Our billing team will check your account and reply within two days."
FIX_ACK = (
    "Thank you for the report. Our engineers are looking into it; please tell us your device and app version."
)
BRANCH_STAGES = (
    "t1/review",
    "t1/approaches",
    "t1.1/label",
    "t1.2/quote",
    "t1/votes",
    "t1/verdict",
    "t1/done",
)

CASES = (
    Case(
        "ticket-triage",
        "billing",
        {"ticket": BILLING},
        "billing_done",
        (
            "t1/intake",
            "t1/classify",
            "t1/billing",
            "t1.1/facts",
            "t1.2/acknowledge",
            "t1/join",
            "t1/billing_done",
        ),
        {"items": [{"request": BILLING}, {"team": "billing", "ticket": BILLING, "reply": ACK}]},
    ),
    Case(
        "ticket-triage",
        "fix",
        {"ticket": CRASH},
        "fix_done",
        ("t1/intake", "t1/classify", "t1/fix", "t1/fix_reply", "t1/fix_done"),
        {"symptom": CRASH, "reply": FIX_ACK},
    ),
    Case(
        "review-sentiment",
        "mixed",
        {"review": MIXED},
        "done",
        BRANCH_STAGES,
        {"sentiment": "positive", "quote": MIXED},
    ),
    Case(
        "review-sentiment",
        "broken",
        {"review": BROKEN},
        "done",
        BRANCH_STAGES,
        {"sentiment": "negative", "quote": BROKEN},
    ),
)
KETTLE = "The kettle leaks. Can I get my 30 euros back?"
BLENDER = "Do you have the blender in red?"
CASES += (
    Case(
        "refund-check",
        "refund",
        {"message": KETTLE},
        "refund",
        ("t1/in", "t1/extract", "t1/check", "t1/refund"),
        {
            "message": KETTLE,
            "amount": 5,
            "route": "refund",
        },  # the 270M model's amount is the example's (README)
    ),
    Case(
        "refund-check",
        "none",
        {"message": BLENDER},
        "none",
        ("t1/in", "t1/extract", "t1/check", "t1/none"),
        {"message": BLENDER, "amount": 5, "route": "none"},
    ),
)
BY_ID = {f"{case.flow}/{case.name}": case for case in CASES}


def documented_inputs(text: str) -> list[tuple[str, Any]]:
    """``(example, input)`` of every ``aeon flow run examples/flows/NAME --input '...'`` command in ``text``."""
    found = re.findall(r"aeon flow run examples/flows/([\w-]+) --input '([^']+)'", text)
    return [(name, json.loads(value)) for name, value in found]


def check_run(flow: Flow, result: TaskResult) -> None:
    """What every run of an example is, whatever the model answered: it reached an exit with success or partial,
    its output matches that exit's schema, and every stage is in the history, in order, along the flow's edges."""
    assert result.status in ("success", "partial"), result.message
    assert result.run.status == "completed", result.message
    root = next(task for task in result.tasks if task["id"] == "t1")
    exit_node = flow.nodes[root["exit"]]
    assert exit_node.role == "exit" and exit_node.output_schema
    assert schema_errors(flow.schemas[exit_node.output_schema], result.output) == []
    history = result.history
    assert [record["seq"] for record in history] == list(range(1, len(history) + 1))
    assert history[0]["node"] == flow.default_start and history[-1]["node"] == exit_node.id
    last: dict[str, dict[str, Any]] = {}
    for record in history:
        assert set(record) >= RECORD_KEYS, sorted(RECORD_KEYS - set(record))
        node = flow.nodes[record["node"]]
        assert record["role"] == node.role
        if node.output_schema and record["status"] == "success":
            assert schema_errors(flow.schemas[node.output_schema], record["output"]) == [], node.id
        assert set(record["route"]) <= set(flow.successors[node.id])
        # a task's next stage is one its previous stage (or, for a new clone or subtask, its parent's) routed to;
        # a merge is where the tasks of a fork arrive
        previous = last.get(record["task"]) or last.get(record["task"].rpartition(".")[0])
        if node.role == "merge":
            assert any(node.id in earlier["route"] for earlier in last.values()), node.id
        elif previous is not None:
            assert node.id in previous["route"], (previous["node"], node.id)
        last[record["task"]] = record
    assert {task["id"] for task in result.tasks} == {record["task"] for record in history}


def run_case(case: Case, **options: Any) -> tuple[Flow, TaskResult]:
    with Engine.from_config_dir(case.directory, AeonConfig(), **options) as engine:
        return engine.flow, engine.run(case.input)


# --- valid as shipped, documented (fast) ----------------------------------------------------------------------


def test_the_examples_show_decision_split_merge_branch_a_context_profile_a_loop_and_a_check() -> None:
    roles = {name: {node.role for node in load_flow(EXAMPLES / name).spec.nodes} for name in FLOWS}
    assert any({"decision", "split", "merge"} <= found for found in roles.values()), roles
    assert any({"branch", "merge"} <= found for found in roles.values()), roles
    assert any(load_flow(EXAMPLES / name).profiles for name in FLOWS)
    assert any(load_flow(EXAMPLES / name).loops for name in FLOWS)
    assert any(node.checks for name in FLOWS for node in load_flow(EXAMPLES / name).spec.nodes)
    assert {case.flow for case in CASES} == set(FLOWS), "every example has a recorded case"


@pytest.mark.parametrize("name", FLOWS)
def test_an_example_validates(name: str) -> None:
    flow = load_flow(EXAMPLES / name)
    assert flow.name == name
    assert any(node.kind == "agent" for node in flow.spec.nodes)  # the examples show the model at work
    assert all(node.id in mermaid(flow) for node in flow.spec.nodes)
    outcome = CliRunner().invoke(cli, ["flow", "validate", str(EXAMPLES / name)])
    assert outcome.exit_code == 0, outcome.output
    assert "no problems" in outcome.output


@pytest.mark.parametrize("name", FLOWS)
def test_an_example_s_commands_are_recorded_cases(name: str) -> None:
    """The commands of the example's README (and of the main README) run inputs whose replay is tested here."""
    flow = load_flow(EXAMPLES / name)
    recorded = [case.input for case in CASES if case.flow == name]
    own = documented_inputs((EXAMPLES / name / "README.md").read_text(encoding="utf-8"))
    main_readme = documented_inputs((ROOT / "README.md").read_text(encoding="utf-8"))
    assert {example for example, _ in own} == {name}
    assert name in {example for example, _ in main_readme}
    for example, value in own + main_readme:
        if example == name:
            assert value in recorded, f"{value} is not the input of a recorded case"
            start = flow.nodes[flow.default_start]
            assert start.input_schema and schema_errors(flow.schemas[start.input_schema], value) == []
    for node in flow.spec.nodes:  # an example reply, if a node has one, is one its schema accepts
        if node.example is not None and node.output_schema:
            assert schema_errors(flow.schemas[node.output_schema], node.example) == [], node.id


# --- replayed from the recorded runs: offline, no model (fast) ------------------------------------------------


@pytest.fixture
def no_model(monkeypatch: pytest.MonkeyPatch) -> None:
    """Loading the embedded model fails the test."""

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("replay loaded the model")

    monkeypatch.setattr("aeon_plugins.llama_cpp.LlamaCppAdapter.__init__", refuse)


@pytest.mark.usefixtures("no_model")
@pytest.mark.parametrize("case_id", sorted(BY_ID))
def test_an_example_replays_its_recorded_run(case_id: str) -> None:
    case = BY_ID[case_id]
    flow, result = run_case(case, replay=cassette(case.flow))
    check_run(flow, result)
    assert result.status == "success"
    assert [f"{record['task']}/{record['node']}" for record in result.history] == list(case.stages)
    assert next(task for task in result.tasks if task["id"] == "t1")["exit"] == case.exit
    assert result.output == case.output


@pytest.mark.usefixtures("no_model")
def test_the_agent_nodes_after_a_fork_see_what_the_flow_gives_them() -> None:
    """The decision carries the ticket on to the subtasks; the verdict reads the review back through its profile."""
    _, triage = run_case(BY_ID["ticket-triage/billing"], replay=cassette("ticket-triage"))
    facts = next(record for record in triage.history if record["node"] == "facts")
    assert facts["input"] == {"team": "billing", "ticket": BILLING}
    assert {task["id"]: task["lineage"] for task in triage.tasks} == {
        "t1": "root",
        "t1.1": "subtask",
        "t1.2": "subtask",
    }
    _, review = run_case(BY_ID["review-sentiment/broken"], replay=cassette("review-sentiment"))
    label = next(record for record in review.history if record["node"] == "label")
    assert (label["task"], label["input"]) == ("t1.1", {"review": BROKEN})
    assert [task["lineage"] for task in review.tasks] == ["root", "clone", "clone"]
    verdict = next(record for record in review.history if record["node"] == "verdict")
    assert [item["value"] for item in verdict.get("context", [])] == [{"review": BROKEN}]
    assert verdict["input"] == {"items": [{"sentiment": "negative"}, {"quote": BROKEN}]}


@pytest.mark.usefixtures("no_model")
def test_a_readme_command_replays_from_the_cli() -> None:
    case = BY_ID["ticket-triage/billing"]
    arguments = ["--input", json.dumps(case.input), "--replay", str(cassette(case.flow)), "--json"]
    outcome = CliRunner().invoke(cli, ["flow", "run", str(case.directory), *arguments])
    assert outcome.exit_code == 0, outcome.output
    result = json.loads(outcome.stdout)
    assert (result["status"], result["output"]) == ("success", case.output)
    assert f"run {result['run_id']} recorded" in outcome.stderr  # like aeon run's, by default


# --- on the embedded model --------------------------------------------------------------------------------------


@pytest.mark.model
@pytest.mark.parametrize("name", FLOWS)
def test_an_example_runs_on_the_embedded_model(name: str, tmp_path: Path) -> None:
    """Every case of the example on Gemma 3 270M: whatever it answers, each run ends well-formed at an exit."""
    pytest.importorskip("llama_cpp")
    target = cassette(name) if os.environ.get("AEON_RECORD_CASSETTES") == "1" else tmp_path / "run.jsonl"
    target.unlink(missing_ok=True)
    for case in (case for case in CASES if case.flow == name):
        flow, result = run_case(case, record=target)
        check_run(flow, result)
