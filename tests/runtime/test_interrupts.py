"""Ctrl-C is as safe as ``kill -9`` (issue 27, item 1).

A ``KeyboardInterrupt`` (or any ``BaseException`` that is not an ``Exception``) in the middle of a cycle must
never commit that cycle: before the fix, a Ctrl-C in a model call committed it as an empty, error-free cycle
(TTL spent, no plan) and the resumed run ended ``failed``. Here the interrupted run keeps only its committed
cycles, its claim is released, and resuming it ends exactly as an uninterrupted run.

The SIGINT matrix extends ``test_crash_resume.py``'s kill -9 matrix: the real ``aeon run`` / ``aeon flow run``
(a subprocess, a real SQLite store, the test plugins installed as a third party's are, through a dist-info entry
point) is stopped with SIGINT at a cycle boundary, inside a model call, inside a tool call and inside a flow
stage (``tests/support/interrupts.py``, ``tests/plugins/flow/crash_nodes.py``: each waits on a marker file, so the
test knows where the signal lands). Each must exit 130 with the command that resumes it and no traceback; that
command then ends the run equal to an uninterrupted one, each side effect in the ledger once, and a step re-run
only where it was running (with the same idempotency key).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from aeon_kernel import Engine, OrchestrationError, hookimpl
from aeon_kernel.config import AeonConfig, Choice
from aeon_plugins import in_memory, jsonl, plan_finished, schema_validator, sqlite_state, supervisor
from aeon_plugins.sqlite_state import SqliteStateStore
from tests.plugins.flow import crash_nodes
from tests.plugins.flow.test_durable import EFFECTS, INPUT, STAGES, comparable, make_flow
from tests.support import interrupts, ledger
from tests.support.interrupts import REQUEST

REPO = Path(__file__).resolve().parents[2]
TTL = 20
#: python -m aeon_cli, with SIGINT's handler put back: a child of a background job inherits SIGINT ignored
AEON = (
    "import runpy, signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
    "sys.argv = ['aeon', *sys.argv[1:]]; runpy.run_module('aeon_cli', run_name='__main__', alter_sys=True)"
)


# --- in process: KeyboardInterrupt raised inside the model call ------------------------------------------------


class CycleEnds:
    def __init__(self) -> None:
        self.numbers: list[int] = []

    @hookimpl
    def aeon_cycle_end(self, entry: Any, state: Any) -> None:
        self.numbers.append(entry.step_number)


def engine(
    root: Path, *, interrupt_at: int = 0, raises: str = "KeyboardInterrupt", extra: tuple[Any, ...] = ()
) -> Engine:
    config = (
        AeonConfig(
            ttl=TTL,
            state=Choice("sqlite", {"path": str(root / "state.db")}),
            telemetry=(Choice("jsonl", {"path": str(root / "run.jsonl")}),),
        )
        .with_choice("llm", "interrupting", interrupt_at=interrupt_at, raises=raises)
        .with_choice("planner", "model", check=False)
    )
    builtins = [in_memory, jsonl, plan_finished, schema_validator, supervisor, sqlite_state, interrupts]
    return Engine(config, plugins=[*builtins, *extra], autoload=False)


def essentials(result: dict[str, Any]) -> Any:
    steps = [(s["step_id"], s["status"], s["result"]) for s in result["plan"]["steps"]]
    calls = [(c["tool_name"], c["arguments"], c["result"]) for c in result["final_state"]["tool_history"]]
    state = result["final_state"]
    return result["status"], steps, calls, state["cycle"], state["ttl_remaining"], result["answer"]


@pytest.fixture
def files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(ledger.LEDGER_ENV, str(tmp_path / "ledger.txt"))
    monkeypatch.setenv(interrupts.DIR_ENV, str(tmp_path))
    monkeypatch.delenv(interrupts.AT_ENV, raising=False)
    return tmp_path


@pytest.mark.parametrize(
    ("call", "committed", "raises"),
    [
        (1, 0, "KeyboardInterrupt"),  # the planning call
        (2, 2, "KeyboardInterrupt"),  # the model call of step 2
        (3, 4, "KeyboardInterrupt"),  # that of step 4
        (2, 2, "SystemExit"),  # any BaseException that is not an Exception
    ],
)
def test_ctrl_c_in_a_model_call_commits_nothing_and_resume_ends_as_an_uninterrupted_run(
    files: Path, call: int, committed: int, raises: str
) -> None:
    reference_root = files / "reference"
    reference_root.mkdir()
    with pytest.MonkeyPatch.context() as patch, engine(reference_root) as plain:
        patch.setenv(ledger.LEDGER_ENV, str(reference_root / "ledger.txt"))
        reference = plain.run(REQUEST)
    assert reference["status"] == "completed"

    ends = CycleEnds()
    with engine(files, interrupt_at=call, raises=raises, extra=(ends,)) as interrupted:
        orchestrator = interrupted.orchestrator()
        with pytest.raises((KeyboardInterrupt, SystemExit)):
            orchestrator.execute(REQUEST)
        run = orchestrator.run
        assert run is not None and run.interrupted == raises and run.result is None
        run_id = run.run_id
        with pytest.raises(OrchestrationError, match="was interrupted"):
            run.next()  # its working state holds half a cycle: it goes on only from the store
        # only the committed cycles: none empty, no TTL spent on the interrupted one, nothing logged of it
        stored = SqliteStateStore(files / "state.db").load(run_id)
        assert stored.state.status == "running"
        assert stored.state.cycle == committed == len(stored.entries)
        assert stored.state.ttl_remaining == TTL - committed
        assert all(entry.llm_output or entry.tool_calls for entry in stored.entries)
        assert ends.numbers == list(range(1, committed + 1))
        # released: another engine of this process resumes it while the first is still open
        with engine(files) as other:
            result = other.resume(run_id)

    assert result["run_id"] == run_id
    assert essentials(result) == essentials(reference)
    assert interrupts.lines(files / "ledger.txt") == [f"{run_id}:1", f"{run_id}:3"]
    assert interrupts.lines(files / "executions.txt") == [f"{run_id}:1", f"{run_id}:3"]  # no tool ran twice
    logged = [json.loads(line) for line in (files / "run.jsonl").read_text().splitlines()]
    assert [line["step_number"] for line in logged if "step_number" in line] == [1, 2, 3, 4, 5]


def test_a_run_without_a_store_is_not_resumable_after_ctrl_c(files: Path) -> None:
    config = AeonConfig(ttl=TTL).with_choice("llm", "interrupting", interrupt_at=2)
    builtins = [in_memory, plan_finished, schema_validator, supervisor, interrupts]
    with Engine(
        config.with_choice("planner", "model", check=False), plugins=builtins, autoload=False
    ) as plain:
        run = plain.start(REQUEST)
        with pytest.raises(KeyboardInterrupt):
            run.execute()
        assert run.interrupted == "KeyboardInterrupt" and run.state.cycle == 2
        run.close()  # nothing to release; closing again is harmless


# --- real processes: SIGINT ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The test plugins, installed the way a third party's are: a dist-info directory with entry points."""
    site = tmp_path_factory.mktemp("site")
    info = site / "aeon_interrupt_tests-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: aeon-interrupt-tests\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        "[aeon]\naeon_interrupts = tests.support.interrupts\naeon_crash_nodes = tests.plugins.flow.crash_nodes\n"
    )
    return site


class Child:
    """``aeon ARGS`` in ``root``, stopping where ``at`` (interrupts.py) or ``block`` (crash_nodes.py) says."""

    def __init__(self, site: Path, root: Path, *args: str, at: str = "", block: str = "") -> None:
        self.root, self.files = root, root / "files"
        self.files.mkdir(exist_ok=True)
        (self.files / "release").unlink(missing_ok=True)
        for old in self.files.glob("entered-*"):
            old.unlink()
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(site), str(REPO), *sys.path]),
            "AEON_DATA_DIR": str(root / "data"),
            ledger.LEDGER_ENV: str(self.files / "ledger.txt"),
            interrupts.DIR_ENV: str(self.files),
            interrupts.AT_ENV: at,
            crash_nodes.DIR_ENV: str(self.files),
            crash_nodes.BLOCK_ENV: block,
        }
        env.pop("AEON_CONFIG", None)
        self.out_path, self.err_path = root / "out.txt", root / "err.txt"
        with self.out_path.open("w") as out, self.err_path.open("w") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", AEON, *args], cwd=root, stdout=out, stderr=err, env=env
            )

    def interrupt(self, marker: str) -> None:
        """Wait for ``marker`` (the child is at its point), send SIGINT; once the child has said so, let go of a
        node still running in another thread (so that the process can end), and wait for it to end."""
        deadline = time.monotonic() + 60
        while not (self.files / marker).exists():
            assert self.proc.poll() is None, (
                f"the child ended ({self.proc.returncode}) before {marker}: {self.err}"
            )
            assert time.monotonic() < deadline, f"{marker} never appeared"
            time.sleep(0.005)
        self.proc.send_signal(signal.SIGINT)
        while self.proc.poll() is None and "Interrupted" not in self.err and time.monotonic() < deadline:
            time.sleep(0.01)
        (self.files / "release").write_text("")
        self.proc.wait(timeout=60)

    def finish(self) -> int:
        return self.proc.wait(timeout=120)

    @property
    def err(self) -> str:
        return self.err_path.read_text()

    @property
    def out(self) -> str:
        return self.out_path.read_text()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=30)


def interrupted(child: Child, marker: str, command: str) -> str:
    """Interrupt ``child`` at ``marker``: exit 130, no traceback, and the command that resumes it (returned)."""
    try:
        child.interrupt(marker)
    finally:
        child.kill()
    assert child.proc.returncode == 130, child.err
    assert "Traceback" not in child.err, child.err
    said = re.search(r"Resume it with: (.+)$", child.err, re.MULTILINE)
    assert said is not None, child.err
    resume = said.group(1).strip()
    assert resume.startswith(command) and resume.split()[-1] == stored_run_id(child.root), resume
    report = json.loads(child.out.splitlines()[-1])
    assert report["status"] == "interrupted" and report["resumable"] is True
    return resume


def stored_run_id(root: Path) -> str:
    with sqlite3.connect(root / "state.db") as db:
        rows = db.execute("SELECT run_id FROM runs").fetchall()
    assert len(rows) == 1, rows
    return str(rows[0][0])


def resumed(site: Path, root: Path, command: str, *extra: str) -> dict[str, Any]:
    child = Child(site, root, *shlex.split(command)[1:], "--json", *extra)
    try:
        assert child.finish() == 0, child.err
    finally:
        child.kill()
    assert "Traceback" not in child.err
    return dict(json.loads(child.out))


def executions(root: Path) -> dict[str, int]:
    keys = interrupts.lines(root / "files" / "executions.txt")
    return {key: keys.count(key) for key in keys}


# --- aeon run / aeon resume ------------------------------------------------------------------------------------


def project(root: Path, site: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "aeon.toml").write_text(
        f'[llm]\nuse = "interrupting"\n[planner]\nuse = "model"\ncheck = false\n[run]\nttl = {TTL}\n'
        '[state]\nuse = "sqlite"\npath = "state.db"\n'
    )
    return root


@pytest.fixture(scope="module")
def plain_reference(site: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = project(tmp_path_factory.mktemp("plain-reference"), site)
    child = Child(site, root, "run", REQUEST, "--json")
    try:
        assert child.finish() == 0, child.err
    finally:
        child.kill()
    return dict(json.loads(child.out))


#: where `aeon run` is interrupted, the cycles the store keeps then, and the step that runs again on resume
PLAIN_POINTS = [
    ("model:plan", 0, None),  # inside the planning call (the case)
    ("cycle:1", 1, None),  # at the boundary after the plan's cycle
    ("tool:1", 1, "1"),  # inside step 1's tool, after its side effect
    ("model:2", 2, None),  # inside the model call of step 2
    ("cycle:3", 3, None),  # at the boundary after step 2
    ("tool:3", 3, "3"),  # inside step 3's tool
]


def check_plain(root: Path, result: dict[str, Any], reference: dict[str, Any], again: set[str]) -> None:
    run_id = result["run_id"]
    assert essentials(result) == essentials(reference)
    assert interrupts.lines(root / "files" / "ledger.txt") == [f"{run_id}:1", f"{run_id}:3"]
    assert executions(root) == {f"{run_id}:{n}": 2 if n in again else 1 for n in ("1", "3")}
    with sqlite3.connect(root / "state.db") as db:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    logged = [json.loads(line) for line in (root / "data" / "runs.jsonl").read_text().splitlines()]
    assert [line["step_number"] for line in logged if "step_number" in line] == [1, 2, 3, 4, 5]


@pytest.mark.parametrize(("point", "committed", "again"), PLAIN_POINTS, ids=[p[0] for p in PLAIN_POINTS])
def test_sigint_in_aeon_run_then_aeon_resume_equals_the_uninterrupted_run(
    site: Path,
    tmp_path: Path,
    plain_reference: dict[str, Any],
    point: str,
    committed: int,
    again: str | None,
) -> None:
    root = project(tmp_path, site)
    command = interrupted(
        Child(site, root, "run", REQUEST, "--json", at=point),
        interrupts.marker(point, Path("x")).name,
        "aeon resume",
    )
    run_id = stored_run_id(root)
    stored = SqliteStateStore(root / "state.db").load(run_id).state
    assert (stored.status, stored.cycle, stored.ttl_remaining) == ("running", committed, TTL - committed)

    result = resumed(site, root, command)

    assert result["run_id"] == run_id
    check_plain(root, result, plain_reference, {again} if again else set())


def test_sigint_in_aeon_run_then_in_aeon_resume_then_resumed(
    site: Path, tmp_path: Path, plain_reference: dict[str, Any]
) -> None:
    root = project(tmp_path, site)
    first = interrupted(
        Child(site, root, "run", REQUEST, "--json", at="tool:1"), "entered-tool-1", "aeon resume"
    )
    second = interrupted(
        Child(site, root, *shlex.split(first)[1:], "--json", at="model:2"), "entered-model-2", "aeon resume"
    )
    assert second == first
    check_plain(root, resumed(site, root, second), plain_reference, {"1"})


def test_sigint_without_a_store_says_the_run_cannot_be_resumed(site: Path, tmp_path: Path) -> None:
    root = project(tmp_path, site)
    (root / "aeon.toml").write_text('[llm]\nuse = "interrupting"\n[planner]\nuse = "model"\ncheck = false\n')
    child = Child(site, root, "run", REQUEST, "--no-log", at="model:plan")
    try:
        child.interrupt("entered-model-plan")
    finally:
        child.kill()
    assert child.proc.returncode == 130 and "Traceback" not in child.err
    assert "cannot be resumed" in child.err and "aeon resume" not in child.err, child.err


# --- aeon flow run / aeon flow resume --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def flow_reference(site: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("flow-reference")
    make_flow(root)
    child = Child(site, root, "flow", "run", str(root / "flow"), "--input", json.dumps(INPUT), "--json")
    try:
        assert child.finish() == 0, child.err
    finally:
        child.kill()
    result = dict(json.loads(child.out))
    assert [(stage["task"], stage["node"]) for stage in result["history"]] == STAGES
    return comparable(result)


#: where `aeon flow run` is interrupted: (at, block) as the children read them, the marker, the stages run again
FLOW_POINTS = [
    ("", "t1/stamp", "entered-t1-stamp", {"t1/stamp"}),  # a stage alone in its cycle
    ("", "t1.2/right", "entered-t1.2-right", {"t1.2/right", "t1.1/left"}),  # beside t1.1/left: both again
    ("cycle:3", "", "entered-cycle-3", set()),  # the boundary after the 3rd cycle (intake, stamp, fork)
]


def check_flow(root: Path, result: dict[str, Any], reference: dict[str, Any], again: set[str]) -> None:
    run_id = result["run_id"]
    assert comparable(result) == reference
    effects = sorted(f"{run_id}:{stage}" for stage in EFFECTS)
    assert sorted(crash_nodes.lines("ledger.txt", root / "files")) == effects
    runs = crash_nodes.lines("executions.txt", root / "files")
    assert {key: runs.count(key) for key in runs} == {
        key: 2 if key.split(":", 1)[1] in again else 1 for key in effects
    }


@pytest.mark.parametrize(("at", "block", "marker", "again"), FLOW_POINTS, ids=[p[2] for p in FLOW_POINTS])
def test_sigint_in_aeon_flow_run_then_aeon_flow_resume_equals_the_uninterrupted_run(
    site: Path,
    tmp_path: Path,
    flow_reference: dict[str, Any],
    at: str,
    block: str,
    marker: str,
    again: set[str],
) -> None:
    flow = make_flow(tmp_path)
    child = Child(
        site, tmp_path, "flow", "run", str(flow), "--input", json.dumps(INPUT), "--json", at=at, block=block
    )
    command = interrupted(child, marker, "aeon flow resume")
    assert f"--config {flow / 'aeon.toml'}" in command  # where the flow's state store is named

    result = resumed(site, tmp_path, command)

    assert result["run_id"] == stored_run_id(tmp_path)
    check_flow(tmp_path, result, flow_reference, again)


def test_sigint_in_aeon_flow_run_then_in_aeon_flow_resume_then_resumed(
    site: Path, tmp_path: Path, flow_reference: dict[str, Any]
) -> None:
    flow = make_flow(tmp_path)
    child = Child(
        site, tmp_path, "flow", "run", str(flow), "--input", json.dumps(INPUT), "--json", block="t1/stamp"
    )
    first = interrupted(child, "entered-t1-stamp", "aeon flow resume")
    again = Child(site, tmp_path, *shlex.split(first)[1:], "--json", block="t1/review")
    assert interrupted(again, "entered-t1-review", "aeon flow resume") == first
    check_flow(tmp_path, resumed(site, tmp_path, first), flow_reference, {"t1/stamp", "t1/review"})
