"""Bounded loops (docs/flows.md "Loops", decision 0019): a decision's edge with ``max_iterations`` goes back; the
load checks prove every run ends; the history numbers each iteration; an agent decision cannot choose a used-up
edge; ``kill -9`` inside a loop resumes with each iteration's side effect once."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from aeon_kernel import Engine
from aeon_kernel.config import AeonConfig
from aeon_plugins.flow.engine import FlowEngine, TaskResult
from aeon_plugins.flow.graph import dot, mermaid
from aeon_plugins.flow.loader import FlowError, load_flow
from aeon_plugins.scripted import ScriptedLLM
from tests.plugins.flow import crash_nodes
from tests.plugins.flow.test_durable import child, stored_run_id

CHILD = Path(crash_nodes.__file__).resolve()


def loop_flow(
    rounds: int = 3, bound: int = 5, otherwise: str | None = None, extra: dict[str, Any] | None = None
) -> dict[str, Any]:
    """draft -> check -> (back to draft | done): check routes to done once draft has run ``rounds`` times."""
    loop: dict[str, Any] = {"from": "check", "to": "draft", "max_iterations": bound}
    if otherwise:
        loop["otherwise"] = otherwise
    return {
        "name": "revise",
        "nodes": [
            {"id": "intake", "role": "start", "impl": "pick", "options": {"keys": ["ticket"]}},
            {
                "id": "draft",
                "role": "linear",
                "impl": "crash.effect",
                "options": {"label": "draft", "count": "n"},
            },
            {
                "id": "check",
                "role": "decision",
                "impl": "route_by",
                "options": {"key": "n", "routes": {str(rounds): "done"}, "default": "draft"},
            },
            {"id": "done", "role": "exit"},
            {"id": "gave_up", "role": "exit"},
            {"id": "late", "role": "linear"},
        ],
        "edges": [
            ["intake", "draft"],
            ["draft", "check"],
            loop,
            ["check", "done"],
            ["check", "late"],
            ["late", "gave_up"],
        ],
        **(extra or {}),
    }


def write(root: Path, flow: dict[str, Any], state: bool = False) -> Path:
    directory = root / "flow"
    directory.mkdir(parents=True, exist_ok=True)
    (root / "files").mkdir(exist_ok=True)
    (directory / "flow.yaml").write_text(yaml.safe_dump(flow, sort_keys=False))
    if state:
        (directory / "aeon.toml").write_text(f'[state]\nuse = "sqlite"\npath = "{root / "state.db"}"\n')
    return directory


def open_flow(directory: Path) -> FlowEngine:
    return Engine.from_config_dir(directory, plugins=[*crash_nodes.builtins(), crash_nodes], autoload=False)


def run(tmp_path: Path, flow: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> TaskResult:
    monkeypatch.setenv(crash_nodes.DIR_ENV, str(tmp_path / "files"))
    monkeypatch.setenv(crash_nodes.BLOCK_ENV, "")
    with open_flow(write(tmp_path, flow)) as engine:
        return engine.run({"ticket": "the invoice is wrong"})


def stages(result: TaskResult) -> list[tuple[str, str, int | None]]:
    return [(s["task"], s["node"], s.get("iteration")) for s in result.history]


# --- running ------------------------------------------------------------------------------------------------


def test_a_loop_runs_until_its_decision_goes_on_and_numbers_each_iteration(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = run(tmp_path, loop_flow(rounds=3), monkeypatch)
    assert result.status == "success", result.message
    assert result.output["trail"] == ["draft"] * 3 and result.output["n"] == 3
    assert stages(result) == [
        ("t1", "intake", None),
        ("t1", "draft", 1),
        ("t1", "check", 1),
        ("t1", "draft", 2),
        ("t1", "check", 2),
        ("t1", "draft", 3),
        ("t1", "check", 3),
        ("t1", "done", None),
    ]
    loops = [e for s in result.history for e in s.get("events", []) if e["event"] == "loop"]
    assert [(e["edge"], e["iteration"], e["of"]) for e in loops] == [
        ("check -> draft", 1, 5),
        ("check -> draft", 2, 5),
    ]
    # each iteration's side effect has its own idempotency key
    ledger = crash_nodes.lines("ledger.txt", tmp_path / "files")
    assert ledger == [
        f"{result.run_id}:t1/draft",
        f"{result.run_id}:t1/draft#2",
        f"{result.run_id}:t1/draft#3",
    ]


def test_a_used_up_loop_edge_goes_on_by_its_otherwise(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = run(tmp_path, loop_flow(rounds=99, bound=2, otherwise="late"), monkeypatch)
    assert result.status == "success" and result.tasks[0]["exit"] == "gave_up", result.message
    assert result.output["n"] == 3  # the first round and two more
    exhausted = [e for s in result.history for e in s.get("events", []) if e["event"] == "loop_exhausted"]
    assert exhausted == [
        {"event": "loop_exhausted", "task": "t1", "edge": "check -> draft", "instead": "late"}
    ]
    assert result.history[-3]["node"] == "check" and result.history[-3]["route"] == ["late"]


def test_a_used_up_loop_edge_without_otherwise_fails_the_decision(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = run(tmp_path, loop_flow(rounds=99, bound=2), monkeypatch)
    assert result.status == "failure"
    last = result.history[-1]
    assert last["node"] == "check" and last["iteration"] == 3 and last["status"] == "failure"
    assert "allows 2 iterations" in last["error"] and "otherwise" in last["error"]


def test_the_default_ttl_makes_room_for_the_loops(tmp_path: Path) -> None:
    flow = load_flow(write(tmp_path, loop_flow(bound=100)))
    assert flow.ttl == 6 * (10 + 100)
    assert flow.in_loop == {"draft", "check"}
    assert '"route = draft, at most 100 times"' in mermaid(flow)
    assert 'label="route = draft, at most 100 times"' in dot(flow)


def test_nested_loops_count_each_edge_for_the_whole_task(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The inner edge's count is not reset by the outer loop: a bound is per task, which is what proves the run
    ends (decision 0019)."""
    flow = {
        "name": "nested",
        "nodes": [
            {"id": "s", "role": "start"},
            {
                "id": "outer",
                "role": "linear",
                "impl": "crash.effect",
                "options": {"label": "o", "count": "o"},
            },
            {
                "id": "inner",
                "role": "linear",
                "impl": "crash.effect",
                "options": {"label": "i", "count": "i"},
            },
            {
                "id": "again",
                "role": "decision",
                "impl": "route_by",
                "options": {"key": "i", "routes": {"9": "next"}, "default": "inner"},
            },
            {
                "id": "next",
                "role": "decision",
                "impl": "route_by",
                "options": {"key": "o", "routes": {"9": "out"}, "default": "outer"},
            },
            {"id": "out", "role": "exit"},
        ],
        "edges": [
            ["s", "outer"],
            ["outer", "inner"],
            ["inner", "again"],
            {"from": "again", "to": "inner", "max_iterations": 3, "otherwise": "next"},
            ["again", "next"],
            {"from": "next", "to": "outer", "max_iterations": 1, "otherwise": "out"},
            ["next", "out"],
        ],
    }
    result = run(tmp_path, flow, monkeypatch)
    assert result.status == "success", result.message
    # outer round 1: inner 4 times (3 loops); outer round 2: the inner edge is used up, so inner runs once
    assert result.output["trail"] == ["o", "i", "i", "i", "i", "o", "i"]


# --- agent decisions ------------------------------------------------------------------------------------------


class ConstrainedScript(ScriptedLLM):
    supports_json_schema = True


def test_an_agent_decision_is_not_offered_a_used_up_loop_edge(tmp_path: Path) -> None:
    flow = {
        "name": "agent-loop",
        "nodes": [
            {"id": "s", "role": "start"},
            {"id": "work", "role": "linear"},
            {"id": "judge", "role": "decision", "kind": "agent", "instruction": "Good enough?"},
            {"id": "out", "role": "exit"},
        ],
        "edges": [
            ["s", "work"],
            ["work", "judge"],
            {"from": "judge", "to": "work", "max_iterations": 1},
            ["judge", "out"],
        ],
    }
    config = (
        AeonConfig()
        .with_choice("memory", "in_memory")
        .with_choice("llm", "scripted", responses=[{"route": "work"}, {"route": "out"}])
    )
    with Engine.from_config_dir(write(tmp_path, flow), config) as engine:
        llm = engine.engine.llm.adapter
        assert isinstance(llm, ScriptedLLM)
        llm.supports_json_schema = True  # as a backend that constrains decoding
        result = engine.run({"draft": "x"})
    assert result.status == "success", result.message
    enums = [asked["json_schema"]["properties"]["route"]["enum"] for asked in llm.prompts]
    assert enums == [["work", "out"], ["out"]]


# --- load checks --------------------------------------------------------------------------------------------


def problems_of(tmp_path: Path, flow: dict[str, Any]) -> list[str]:
    with pytest.raises(FlowError) as caught:
        load_flow(write(tmp_path, flow))
    return [f"{p.key} {p.message}" for p in caught.value.problems]


def edited(change: Any) -> dict[str, Any]:
    flow = loop_flow()
    change(flow)
    return flow


BAD = {
    "an unbounded cycle": (
        lambda f: f["edges"].__setitem__(2, ["check", "draft"]),
        "is on a cycle: draft -> check -> draft; a flow's only cycles are loops: give the edge that goes back "
        "max_iterations",
    ),
    "a bound on a linear node's edge": (
        lambda f: f["edges"].__setitem__(1, {"from": "draft", "to": "check", "max_iterations": 2}),
        "max_iterations is for an edge a decision chooses; 'draft' is a linear node",
    ),
    "a bound on an edge going forward": (
        lambda f: f["edges"].__setitem__(3, {"from": "check", "to": "done", "max_iterations": 2}),
        "goes forward ('done' does not lead back to 'check')",
    ),
    "otherwise on an ordinary edge": (
        lambda f: f["edges"].__setitem__(3, {"from": "check", "to": "done", "otherwise": "late"}),
        "only a loop edge (max_iterations) takes otherwise",
    ),
    "otherwise naming no edge of the decision": (
        lambda f: f["edges"][2].__setitem__("otherwise", "gave_up"),
        "names 'gave_up'; otherwise is another, forward edge of 'check'",
    ),
    "otherwise naming the loop's own target": (
        lambda f: f["edges"][2].__setitem__("otherwise", "draft"),
        "names 'draft'; otherwise is another, forward edge of 'check'",
    ),
    "a loop around a split": (
        lambda f: (
            f["nodes"].__setitem__(1, {"id": "draft", "role": "split"}),
            f["edges"].append(["draft", "gave_up"]),
        ),
        "encloses split node 'draft'; a loop holds only linear and decision nodes",
    ),
    "a bound of zero": (
        lambda f: f["edges"][2].__setitem__("max_iterations", 0),
        "greater than or equal to 1",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_loop_that_breaks_a_rule_is_refused(tmp_path: Path, case: str) -> None:
    change, expected = BAD[case]
    listed = problems_of(tmp_path, edited(change))
    assert any(expected in problem for problem in listed), listed


def test_a_loop_edge_does_not_count_as_its_targets_way_in(tmp_path: Path) -> None:
    """draft is linear (one inbound edge) although check's loop edge also leads to it."""
    flow = load_flow(write(tmp_path, loop_flow()))
    assert flow.predecessors["draft"] == ("intake", "check") and flow.forward["check"] == ("done", "late")


# --- kill -9 inside a loop ------------------------------------------------------------------------------------

#: (task, node, iteration) of the uninterrupted run of loop_flow(rounds=3)
LOOP_STAGES = 8


def comparable(result: TaskResult | dict[str, Any]) -> dict[str, Any]:
    data = result.to_dict() if isinstance(result, TaskResult) else dict(result)
    history = [
        {k: v for k, v in s.items() if k not in ("started", "duration_ms", "profile")}
        for s in data["history"]
    ]
    return {"status": data["status"], "output": data["output"], "tasks": data["tasks"], "history": history}


def resume(root: Path, run_id: str, monkeypatch: pytest.MonkeyPatch) -> TaskResult:
    monkeypatch.setenv(crash_nodes.DIR_ENV, str(root / "files"))
    monkeypatch.setenv(crash_nodes.BLOCK_ENV, "")
    with open_flow(root / "flow") as engine:
        return engine.resume(run_id)


def test_kill_at_every_stage_of_a_loop_then_resume_equals_the_uninterrupted_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    flow = loop_flow(rounds=3)
    reference_root = tmp_path / "reference"
    write(reference_root, flow, state=True)
    reference = run(reference_root, flow, monkeypatch)
    assert len(reference.history) == LOOP_STAGES
    roots = [tmp_path / f"after-{n}" for n in range(1, LOOP_STAGES)]
    for root in roots:
        write(root, flow, state=True)
    children = [
        child(root, "run", json.dumps({"ticket": "the invoice is wrong"}), str(n))
        for n, root in enumerate(roots, 1)
    ]
    for proc in children:
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == -signal.SIGKILL, (out, err)
    for root in roots:
        run_id = stored_run_id(root)
        result = resume(root, run_id, monkeypatch)
        expected = comparable(reference)
        assert comparable(result) == expected, root.name
        ledger = crash_nodes.lines("ledger.txt", root / "files")
        assert ledger == [f"{run_id}:t1/draft", f"{run_id}:t1/draft#2", f"{run_id}:t1/draft#3"], root.name
        executions = crash_nodes.lines("executions.txt", root / "files")
        assert executions == ledger, f"{root.name}: a committed iteration ran again"


def test_kill_inside_a_loops_second_iteration_runs_that_iteration_again_with_its_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(tmp_path, loop_flow(rounds=3), state=True)
    proc = child(tmp_path, "run", json.dumps({"ticket": "the invoice is wrong"}), block="t1/draft#2")
    marker = tmp_path / "files" / "entered-t1-draft#2"
    deadline = time.monotonic() + 30
    while not marker.exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    run_id = stored_run_id(tmp_path)
    result = resume(tmp_path, run_id, monkeypatch)
    assert result.status == "success" and result.output["n"] == 3
    executions = crash_nodes.lines("executions.txt", tmp_path / "files")
    assert executions == [
        f"{run_id}:t1/draft",
        f"{run_id}:t1/draft#2",
        f"{run_id}:t1/draft#2",
        f"{run_id}:t1/draft#3",
    ]
    assert crash_nodes.lines("ledger.txt", tmp_path / "files") == [
        f"{run_id}:t1/draft",
        f"{run_id}:t1/draft#2",
        f"{run_id}:t1/draft#3",
    ]


def test_a_recorded_agent_loop_replays_offline_to_a_byte_identical_history(tmp_path: Path) -> None:
    """write -> judge (an agent decision) goes round twice; the cassette replays it with no model."""
    flow = {
        "name": "agent-rewrite",
        "nodes": [
            {"id": "s", "role": "start"},
            {
                "id": "write",
                "role": "linear",
                "kind": "agent",
                "instruction": "Write a title for the ticket.",
            },
            {"id": "judge", "role": "decision", "kind": "agent", "instruction": "Is the title good enough?"},
            {"id": "out", "role": "exit"},
        ],
        "edges": [
            ["s", "write"],
            ["write", "judge"],
            {"from": "judge", "to": "write", "max_iterations": 2, "otherwise": "out"},
            ["judge", "out"],
        ],
    }
    replies = [{"title": "a"}, {"route": "write"}, {"title": "a better one"}, {"route": "out"}]
    (tmp_path / "replies.json").write_text(json.dumps(replies))
    directory = write(tmp_path, flow)
    (directory / "aeon.toml").write_text(
        f'[llm]\nuse = "scripted"\nresponses = "{tmp_path / "replies.json"}"\n'
    )
    cassette = tmp_path / "loop.cassette.jsonl"
    with Engine.from_config_dir(directory, record=cassette) as engine:
        recorded = engine.run({"ticket": "refund"})
    assert recorded.status == "success" and recorded.output == {"route": "out"}, recorded.message
    assert [(s["node"], s.get("iteration")) for s in recorded.history] == [
        ("s", None),
        ("write", 1),
        ("judge", 1),
        ("write", 2),
        ("judge", 2),
        ("out", None),
    ]
    (tmp_path / "replies.json").unlink()  # a replay that asked the model would fail
    with Engine.from_config_dir(directory, replay=cassette) as engine:
        replayed = engine.run({"ticket": "refund"})

    def without_times(result: TaskResult) -> bytes:
        return json.dumps(
            [
                {k: v for k, v in s.items() if k not in ("started", "duration_ms", "profile")}
                for s in result.history
            ]
        ).encode()

    assert without_times(replayed) == without_times(recorded)
