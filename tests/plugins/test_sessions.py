"""Sessions (issue 29): a conversation whose turns are runs in the state store; later turns see earlier results
through the context budget; a turn cut short by kill -9 is finished before the next; two appends of one turn
cannot both land."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any, ClassVar

import pytest
import yaml

from aeon_kernel import Engine, RunStoreError, hookimpl, tool
from aeon_kernel.config import AeonConfig, Choice, parse_config
from aeon_kernel.kit import request_parts
from aeon_plugins.sessions import Session, Turn, conversation, sessions, turn_run_id
from tests.support.builders import answer, llm_step, plan, tool_step

ROOT = Path(__file__).resolve().parents[2]
THREE_TURNS = [
    ("add 2 and 3", "2 + 3", "5"),
    ("now double that", "5 * 2", "10"),
    ("subtract 4 from it", "10 - 4", "6"),
]


def engine_for(tmp_path: Path, turns: list[tuple[str, str, str]], store: bool = True) -> Engine:
    replies = []
    for _, expression, said in turns:
        replies += [
            json.dumps(plan(tool_step("1", "calculator", {"expression": expression}), llm_step("2"))),
            answer(said),
        ]
    (tmp_path / "responses.json").write_text(json.dumps(replies))
    data: dict[str, Any] = {"llm": {"use": "scripted", "responses": str(tmp_path / "responses.json")}}
    if store:
        data["state"] = {"use": "sqlite", "path": str(tmp_path / "state.db")}
    return Engine(parse_config(data))


@pytest.mark.parametrize("store", [True, False], ids=["stored", "in-memory"])
def test_three_turns_where_later_turns_use_earlier_results(tmp_path: Path, store: bool) -> None:
    with engine_for(tmp_path, THREE_TURNS, store) as engine:
        session = Session(engine)
        results = [session.ask(message) for message, _, _ in THREE_TURNS]
        turns = session.turns()
    assert [r["status"] for r in results] == ["completed"] * 3
    assert [r["verification"]["verdict"] for r in results] == ["verified"] * 3  # earlier results are given
    assert [(t.number, t.message, t.answer) for t in turns] == [
        (1, "add 2 and 3", "5"),
        (2, "now double that", "10"),
        (3, "subtract 4 from it", "6"),
    ]
    third = results[2]["final_state"]["request"]
    given, asked = request_parts(third)
    assert asked == "subtract 4 from it"
    assert 'asked "add 2 and 3"; answered: 5' in given and 'asked "now double that"; answered: 10' in given
    assert [t.run_id for t in turns] == [turn_run_id(session.id, n) for n in (1, 2, 3)]


def test_a_session_is_picked_up_by_its_id_and_listed(tmp_path: Path) -> None:
    with engine_for(tmp_path, THREE_TURNS) as engine:
        first = Session(engine)
        first.ask("add 2 and 3")
        later = Session(engine, first.id)  # as `aeon chat --session ID` in another process would
        assert later.ask("now double that")["answer"] == "10"
        (listed,) = sessions(engine.state_store)
    assert (listed.session_id, listed.turns, listed.started_with, listed.status) == (
        first.id,
        2,
        "add 2 and 3",
        "completed",
    )


def test_the_context_keeps_the_newest_turns_that_fit_the_budget() -> None:
    turns = [Turn(n, f"r{n}", f"question {n} " + "x" * 300, "completed", str(n)) for n in range(1, 9)]
    given, asked = request_parts(conversation(turns, "and now?"))
    assert asked == "and now?"
    shown = [n for n in range(1, 9) if f"question {n} " in given]
    assert shown and shown == list(range(9 - len(shown), 9)) and len(shown) < 8  # the newest, oldest first
    assert conversation([], "hello") == "hello"


def test_two_appends_of_one_turn_cannot_both_land(tmp_path: Path) -> None:
    with engine_for(tmp_path, THREE_TURNS * 2) as engine, engine_for(tmp_path, THREE_TURNS * 2) as other:
        mine = Session(engine)
        mine.ask("add 2 and 3")
        theirs = Session(other, mine.id)
        first, second = mine.start("now double that"), theirs.start("now triple that")  # both turn 2
        first.next()  # stored, and held
        with pytest.raises(RunStoreError, match="it is there already"):
            second.next()
        with pytest.raises(RunStoreError, match=r"cannot go on: its turn 2.*being run"):
            theirs.start("and then?")  # the turn is live in another claim
        first.execute()
        first.close()
        second.close()
        assert [t.message for t in theirs.turns()] == ["add 2 and 3", "now double that"]


def worker(
    directory: Path, session_id: str, message: str, crash: str = ""
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            str(ROOT / "tests" / "support" / "session_worker.py"),
            str(directory),
            session_id,
            message,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "AEON_CRASH_AT": crash},
    )


def test_a_turn_cut_short_by_kill_9_is_finished_before_the_next(tmp_path: Path) -> None:
    session_id = "a" * 32
    assert worker(tmp_path, session_id, "record 1").returncode == 0
    killed = worker(tmp_path, session_id, "record 2", crash="tool:2")
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    done = worker(tmp_path, session_id, "record 3")
    assert done.returncode == 0, done.stderr
    turns = json.loads(done.stdout.splitlines()[-1])
    assert turns == [
        [1, "record 1", "completed", {"n": 1}],
        [2, "record 2", "completed", {"n": 2}],
        [3, "record 3", "completed", {"n": 3}],
    ]
    ledger = (tmp_path / "ledger.txt").read_text().splitlines()
    assert ledger == [f"{turn_run_id(session_id, n)}:1" for n in (1, 2, 3)]  # each side effect once


def aeon(directory: Path, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "aeon_cli", *args, "--config", str(directory / "aeon.toml")],
        capture_output=True,
        text=True,
        timeout=120,
        input=stdin,
        cwd=directory,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


def test_aeon_chat_reads_turns_and_continue_goes_on(tmp_path: Path) -> None:
    replies = []
    for _, expression, said in THREE_TURNS:
        replies += [
            json.dumps(plan(tool_step("1", "calculator", {"expression": expression}), llm_step("2"))),
            answer(said),
        ]
    (tmp_path / "first.json").write_text(json.dumps(replies[:4]))
    (tmp_path / "later.json").write_text(json.dumps(replies[4:]))
    toml = '[llm]\nuse = "scripted"\nresponses = "{}"\n[state]\nuse = "sqlite"\npath = "state.db"\n'
    (tmp_path / "aeon.toml").write_text(toml.format("first.json"))
    typed = aeon(tmp_path, "chat", "--json", stdin="add 2 and 3\nnow double that\nexit\n")
    assert typed.returncode == 0, typed.stderr
    assert [json.loads(line)["answer"] for line in typed.stdout.splitlines() if line.startswith("{")] == [
        "5",
        "10",
    ]
    (tmp_path / "aeon.toml").write_text(toml.format("later.json"))  # a new process: the script starts again
    later = aeon(tmp_path, "chat", "--continue", "-m", "subtract 4 from it", "--json")
    assert later.returncode == 0, later.stderr
    assert json.loads(later.stdout)["answer"] == "6"
    (listed,) = json.loads(aeon(tmp_path, "sessions", "--json").stdout)
    assert (listed["turns"], listed["status"], listed["started_with"]) == (3, "completed", "add 2 and 3")
    unknown = aeon(tmp_path, "chat", "--session", "nope", "-m", "hi")
    assert unknown.returncode == 2 and "no conversation 'nope'" in unknown.stderr


class Recall:
    """A node that answers with what the earlier turns of its session answered, as its context shows them."""

    @hookimpl
    def aeon_register_nodes(self, register: Any) -> None:
        def recall() -> Any:
            return lambda value, context: {
                "said": value["say"],
                "earlier": [item["value"]["answered"] for item in reversed(context.context)],
            }

        register("test.recall", recall)


def test_a_flow_runs_inside_a_session_whose_turns_are_its_task_layer(tmp_path: Path) -> None:
    flow = {
        "name": "recall",
        "nodes": [
            {"id": "in", "role": "start"},
            {"id": "recall", "role": "linear", "impl": "test.recall", "context": {"profile": "conversation"}},
            {"id": "out", "role": "exit"},
        ],
        "edges": [["in", "recall"], ["recall", "out"]],
    }
    directory = tmp_path / "flow"
    directory.mkdir()
    (directory / "flow.yaml").write_text(yaml.safe_dump(flow, sort_keys=False))
    profile = {"layers": ["task"], "prefix": "turn", "policy": "recency"}
    (directory / "context.yaml").write_text(yaml.safe_dump({"profiles": {"conversation": profile}}))
    config = AeonConfig(state=Choice("sqlite", {"path": str(tmp_path / "state.db")})).with_choice(
        "memory", "in_memory"
    )
    with Engine.from_config_dir(directory, config, plugins=[Recall()]) as engine:
        session = Session(engine.engine)
        first = session.run_flow(engine, {"say": "one"})
        second = session.run_flow(engine, {"say": "two"})
        apart = Session(engine.engine).run_flow(engine, {"say": "elsewhere"})  # another conversation
    assert first.output == {"said": "one", "earlier": []}
    assert second.output == {"said": "two", "earlier": [{"said": "one", "earlier": []}]}
    assert apart.output == {"said": "elsewhere", "earlier": []}
    with Engine.from_config_dir(directory, config, plugins=[Recall()]) as engine:  # another process, say
        third = Session(engine.engine, session.id).run_flow(engine, {"say": "three"})
        assert [t.number for t in Session(engine.engine, session.id).turns()] == [1, 2, 3]
    assert [said["said"] for said in third.output["earlier"]] == ["one", "two"]


class Interrupting:
    """A tool that is Ctrl-C'd the first time it is called for ``n = 2`` (after its side effect)."""

    calls: ClassVar[list[int]] = []

    @hookimpl
    def aeon_register_tools(self, register: Any) -> None:
        @tool
        def tally(n: int) -> dict[str, int]:
            """Count n."""
            Interrupting.calls.append(n)
            if n == 2 and Interrupting.calls.count(2) == 1:
                raise KeyboardInterrupt
            return {"n": n}

        register("tally", lambda: tally)


def test_a_turn_cut_short_by_ctrl_c_is_finished_before_the_next(tmp_path: Path) -> None:
    Interrupting.calls.clear()
    replies = [plan(tool_step("1", "tally", {"n": n})) for n in (1, 2, 3)]
    (tmp_path / "responses.json").write_text(json.dumps([json.dumps(r) for r in replies]))
    data = {
        "llm": {"use": "scripted", "responses": str(tmp_path / "responses.json")},
        "state": {"use": "sqlite", "path": str(tmp_path / "state.db")},
        "tools": {"enabled": ["tally"]},
    }
    with Engine(parse_config(data), plugins=[Interrupting()]) as engine:
        session = Session(engine)
        session.ask("count 1")
        with pytest.raises(KeyboardInterrupt):
            session.ask("count 2")
        assert [t.status for t in session.turns()] == ["completed", "running"]  # kept, released
        session.ask("count 3")  # turn 2 is finished first (its plan is stored), then turn 3
        assert [(t.number, t.status, t.answer) for t in session.turns()] == [
            (1, "completed", {"n": 1}),
            (2, "completed", {"n": 2}),
            (3, "completed", {"n": 3}),
        ]
    assert Interrupting.calls == [1, 2, 2, 3]  # the interrupted step ran again, once
