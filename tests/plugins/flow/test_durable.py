"""Flow runs that survive ``kill -9`` (docs/flows.md "History, resume, replay", docs/durable-runs.md).

A flow whose nodes have side effects (``tests/plugins/flow/crash_nodes.py``: each appends its idempotency key to a
ledger unless the key is already there) runs in a real process with ``[state] use = "sqlite"`` and is killed with
SIGKILL at every stage boundary and inside nodes (a node that waits until it is killed), then resumed. The resumed
run must end exactly as an uninterrupted run does — same status, output, tasks and history, timestamps and
durations aside — and every side effect must be in the ledger exactly once, while the raw executions show the
interrupted stage ran again with the same idempotency key.
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
from typing import Any

import pytest

from aeon_kernel import Engine, RunStoreError
from aeon_plugins.flow.engine import FlowEngine, TaskResult
from aeon_plugins.sqlite_state import SqliteStateStore
from tests.plugins.flow import crash_nodes

CHILD = Path(crash_nodes.__file__).resolve()
INPUT = {"ticket": "The invoice is wrong", "noise": 1}

FLOW_YAML = """\
name: crash-flow
version: 1
parallelism: 2
nodes:
  - {id: intake, role: start, impl: pick, options: {keys: [ticket]}}
  - {id: stamp, role: linear, impl: crash.effect, options: {label: stamp}, output_schema: ticket}
  - {id: fork, role: split}
  - {id: left, role: linear, impl: crash.effect, options: {label: left}}
  - {id: right, role: linear, impl: crash.effect, options: {label: right}}
  - {id: join, role: merge, impl: collect}
  - id: review
    role: linear
    impl: crash.effect
    options: {label: review, values: {kind: bug}}
    context: {profile: recent}
  - {id: triage, role: decision, impl: route_by, options: {key: kind, routes: {bug: fixed, idea: shelved}}}
  - {id: fixed, role: exit}
  - {id: shelved, role: exit}
edges:
  - [intake, stamp]
  - [stamp, fork]
  - [fork, left]
  - [fork, right]
  - [left, join]
  - [right, join]
  - [join, review]
  - [review, triage]
  - [triage, fixed]
  - [triage, shelved]
"""
CONTEXT_YAML = "profiles:\n  recent: {layers: [task], limit: 10}\n"
TICKET_SCHEMA = {"type": "object", "required": ["ticket", "trail"]}
#: (task, node) of every stage of the flow, in history order; stages 4 and 5 run in one cycle
STAGES = [
    ("t1", "intake"),
    ("t1", "stamp"),
    ("t1", "fork"),
    ("t1.1", "left"),
    ("t1.2", "right"),
    ("t1", "join"),
    ("t1", "review"),
    ("t1", "triage"),
    ("t1", "fixed"),
]
EFFECTS = ["t1/stamp", "t1.1/left", "t1.2/right", "t1/review"]


# --- helpers ---------------------------------------------------------------------------------------------------


def make_flow(root: Path, *, durable_memory: bool = True) -> Path:
    """A flow directory under ``root`` whose runs keep their state (and task memory) in ``root``."""
    flow = root / "flow"
    (flow / "schemas").mkdir(parents=True)
    (root / "files").mkdir()
    (flow / "flow.yaml").write_text(FLOW_YAML)
    (flow / "context.yaml").write_text(CONTEXT_YAML)
    (flow / "schemas" / "ticket.json").write_text(json.dumps(TICKET_SCHEMA))
    (flow / "aeon.toml").write_text(f'[state]\nuse = "sqlite"\npath = "{root / "state.db"}"\n')
    if durable_memory:  # the task layer (what the router writes after each stage) survives the kill too
        (flow / "memory.yaml").write_text(f"layers:\n  task: {{use: sqlite, path: '{root / 'memory.db'}'}}\n")
    return flow


def open_flow(flow: Path) -> FlowEngine:
    return Engine.from_config_dir(flow, plugins=[*crash_nodes.builtins(), crash_nodes], autoload=False)


def child(root: Path, *args: str, block: str | None = None) -> subprocess.Popen[str]:
    env = {**os.environ, crash_nodes.DIR_ENV: str(root / "files"), crash_nodes.BLOCK_ENV: block or ""}
    return subprocess.Popen(
        [sys.executable, str(CHILD), str(root / "flow"), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def stored_run_id(root: Path) -> str:
    with sqlite3.connect(root / "state.db") as db:
        rows = db.execute("SELECT run_id FROM runs").fetchall()
    assert len(rows) == 1, rows
    return str(rows[0][0])


def committed_stages(root: Path, run_id: str) -> list[tuple[str, str]]:
    store = SqliteStateStore(root / "state.db")
    try:
        entries = store.load(run_id).entries
    finally:
        store.close()
    return [(stage["task"], stage["node"]) for entry in entries for stage in entry.stages]


def wait_for(path: Path, proc: subprocess.Popen[str], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if proc.poll() is not None:
            _, err = proc.communicate()
            raise AssertionError(f"the child ended ({proc.returncode}) before {path.name}: {err}")
        assert time.monotonic() < deadline, f"{path.name} never appeared"
        time.sleep(0.005)


def kill(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGKILL)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL, err


def comparable(result: TaskResult | dict[str, Any]) -> dict[str, Any]:
    """What must not differ between an interrupted and an uninterrupted run: no times, no run id."""
    data = result.to_dict() if isinstance(result, TaskResult) else dict(result)
    history = [
        {k: v for k, v in stage.items() if k not in ("started", "duration_ms", "profile")}
        for stage in data["history"]
    ]
    return {
        "status": data["status"],
        "output": data["output"],
        "message": data["message"],
        "run_status": data["run_status"],
        "errors": data["errors"],
        "tasks": data["tasks"],
        "history": history,
    }


def resume(root: Path, run_id: str, monkeypatch: pytest.MonkeyPatch) -> TaskResult:
    monkeypatch.setenv(crash_nodes.DIR_ENV, str(root / "files"))
    monkeypatch.setenv(crash_nodes.BLOCK_ENV, "")
    with open_flow(root / "flow") as flow:
        return flow.resume(run_id)


def check_exactly_once(root: Path, run_id: str) -> list[str]:
    """Every side effect in the ledger exactly once; returns the raw executions (repeats included)."""
    ledger = crash_nodes.lines("ledger.txt", root / "files")
    assert sorted(ledger) == sorted(f"{run_id}:{stage}" for stage in EFFECTS)
    executions = crash_nodes.lines("executions.txt", root / "files")
    assert set(executions) == set(ledger)
    return executions


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """An uninterrupted run of the flow, in this process."""
    root = tmp_path_factory.mktemp("reference")
    make_flow(root)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(crash_nodes.DIR_ENV, str(root / "files"))
        patch.setenv(crash_nodes.BLOCK_ENV, "")
        with open_flow(root / "flow") as flow:
            result = flow.run(INPUT)
    assert result.status == "success", result.message
    assert [(stage["task"], stage["node"]) for stage in result.history] == STAGES
    # the review node saw the task layer: the outputs of the earlier stages of t1, newest first
    review = next(stage for stage in result.history if stage["node"] == "review")
    assert [item["key"] for item in review["context"]] == [
        "00000006-join",
        "00000003-fork",
        "00000002-stamp",
        "00000001-intake",
    ]
    executions = check_exactly_once(root, result.run_id)
    assert len(executions) == len(EFFECTS)
    return comparable(result)


# --- kill -9 at stage boundaries -------------------------------------------------------------------------------


def test_kill_after_every_committed_stage_then_resume_equals_the_uninterrupted_run(
    tmp_path: Path, reference: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    boundaries = range(1, len(STAGES))  # after the 1st ... 8th stage (the 9th ends the run)
    roots = []
    for n in boundaries:
        root = tmp_path / f"after-{n}"
        make_flow(root)
        roots.append(root)
    children = [
        child(root, "run", json.dumps(INPUT), str(n)) for root, n in zip(roots, boundaries, strict=True)
    ]
    for proc in children:
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == -signal.SIGKILL, (out, err)
    for root, n in zip(roots, boundaries, strict=True):
        run_id = stored_run_id(root)
        committed = committed_stages(root, run_id)
        # the kill came right after the n-th stage was committed (its cycle may hold the next one too)
        assert committed[:n] == STAGES[:n], n
        assert len(committed) == n + (n == 4)
        result = resume(root, run_id, monkeypatch)
        assert result.run_id == run_id
        assert comparable(result) == reference, f"killed after stage {n}"
        executions = check_exactly_once(root, run_id)
        assert len(executions) == len(EFFECTS), "a committed stage was executed again"


# --- kill -9 inside a node -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "blocked",
    [
        "t1/stamp",  # a stage alone in its cycle
        "t1.2/right",  # runs beside t1.1/left (parallelism 2): the whole cycle is lost, both run again
        "t1/review",  # after a merge, with a context from the task layer
    ],
)
def test_kill_inside_a_node_then_resume_runs_it_again_with_the_same_key(
    tmp_path: Path, reference: dict[str, Any], monkeypatch: pytest.MonkeyPatch, blocked: str
) -> None:
    make_flow(tmp_path)
    proc = child(tmp_path, "run", json.dumps(INPUT), block=blocked)
    marker = tmp_path / "files" / f"entered-{blocked.replace('/', '-')}"
    wait_for(marker, proc)
    kill(proc)
    run_id = stored_run_id(tmp_path)
    key = f"{run_id}:{blocked}"
    assert marker.read_text() == key
    before = crash_nodes.lines("executions.txt", tmp_path / "files")
    assert before.count(key) == 1 and key in crash_nodes.lines("ledger.txt", tmp_path / "files")
    assert (blocked.split("/")[0], blocked.split("/")[1]) not in committed_stages(tmp_path, run_id)

    result = resume(tmp_path, run_id, monkeypatch)

    assert comparable(result) == reference
    executions = check_exactly_once(tmp_path, run_id)
    assert executions.count(key) == 2, "the interrupted stage runs again, with the same idempotency key"
    repeated = sorted({k for k in executions if executions.count(k) > 1})
    allowed = {key} | ({f"{run_id}:t1.1/left"} if blocked == "t1.2/right" else set())
    assert set(repeated) <= allowed, repeated


def test_killed_again_while_resuming_then_resumed_in_another_process(
    tmp_path: Path, reference: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    make_flow(tmp_path)
    first = child(tmp_path, "run", json.dumps(INPUT), block="t1/stamp")
    wait_for(tmp_path / "files" / "entered-t1-stamp", first)
    kill(first)
    run_id = stored_run_id(tmp_path)
    second = child(tmp_path, "resume", run_id, block="t1/review")
    wait_for(tmp_path / "files" / "entered-t1-review", second)
    kill(second)
    assert committed_stages(tmp_path, run_id) == STAGES[:6]

    third = child(tmp_path, "resume", run_id)
    out, err = third.communicate(timeout=60)
    assert third.returncode == 0, err

    assert comparable(json.loads(out.splitlines()[-1])) == reference
    executions = check_exactly_once(tmp_path, run_id)
    for stage in ("t1/stamp", "t1/review"):
        assert executions.count(f"{run_id}:{stage}") == 2, stage


# --- what resume refuses ---------------------------------------------------------------------------------------


def interrupted(root: Path, monkeypatch: pytest.MonkeyPatch, cycles: int = 3) -> str:
    """A run stopped after ``cycles`` cycles (closed, so released in the store): as after a crash."""
    monkeypatch.setenv(crash_nodes.DIR_ENV, str(root / "files"))
    monkeypatch.setenv(crash_nodes.BLOCK_ENV, "")
    with open_flow(root / "flow") as flow:
        run = flow.start(INPUT)
        with run:
            for _ in range(cycles):
                assert run.next() is not None
        return run.run_id


@pytest.mark.parametrize(
    ("changed", "edit"),
    [
        ("flow.yaml", lambda flow: (flow / "flow.yaml").write_text(FLOW_YAML + "# a comment\n")),
        (
            "schemas/ticket.json",
            lambda flow: (flow / "schemas" / "ticket.json").write_text(json.dumps({"type": "object"})),
        ),
        ("context.yaml", lambda flow: (flow / "context.yaml").write_text(CONTEXT_YAML.replace("10", "9"))),
    ],
)
def test_resume_refuses_a_flow_whose_manifests_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reference: dict[str, Any], changed: str, edit: Any
) -> None:
    flow = make_flow(tmp_path)
    run_id = interrupted(tmp_path, monkeypatch)
    original = {path: path.read_bytes() for path in flow.rglob("*") if path.is_file()}
    edit(flow)
    with open_flow(flow) as engine, pytest.raises(RunStoreError) as caught:
        engine.resume(run_id)
    message = str(caught.value)
    assert "changed since run" in message and run_id in message and changed in message, message
    assert "crash-flow" in message
    # nothing ran: restoring the manifests makes the run resumable, and it ends as an uninterrupted one
    for path, data in original.items():
        path.write_bytes(data)
    with open_flow(flow) as engine:
        assert comparable(engine.resume(run_id)) == reference


def test_resume_refuses_a_run_of_another_flow(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    flow = make_flow(tmp_path)
    run_id = interrupted(tmp_path, monkeypatch)
    (flow / "flow.yaml").write_text(FLOW_YAML.replace("name: crash-flow", "name: other-flow"))
    with open_flow(flow) as engine, pytest.raises(RunStoreError, match="is not a run of flow 'other-flow'"):
        engine.resume(run_id)


def test_resume_of_an_unknown_or_finished_run_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    flow = make_flow(tmp_path)
    monkeypatch.setenv(crash_nodes.DIR_ENV, str(tmp_path / "files"))
    with open_flow(flow) as engine:
        with pytest.raises(RunStoreError, match="no run 'no-such-run'"):
            engine.resume("no-such-run")
        finished = engine.run(INPUT)
        with pytest.raises(RunStoreError, match="already finished"):
            engine.resume(finished.run_id)


def test_a_finished_run_releases_its_task_layer_in_process_memory_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 31: the ``in_memory`` task layer drops a run's stages when it ends (an engine serving many runs stays
    the same size); a durable one (sqlite) keeps them."""
    for durable, root in ((False, tmp_path / "volatile"), (True, tmp_path / "durable")):
        monkeypatch.setenv(crash_nodes.DIR_ENV, str(root / "files"))
        with open_flow(make_flow(root, durable_memory=durable)) as engine:
            task_layer = engine.setup.layers.backends["task"]
            written: list[str] = []

            def write(key: str, value: Any, keep: Any = task_layer.write, seen: list[str] = written) -> None:
                seen.append(key)
                keep(key, value)

            monkeypatch.setattr(task_layer, "write", write)
            result = engine.run(INPUT)
            assert result.status == "success" and written
            kept = [key for key, _ in task_layer.search(f"flow/{result.run_id}/")]
            assert kept == (sorted(written) if durable else [])


def test_resume_needs_a_state_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    flow = make_flow(tmp_path)
    (flow / "aeon.toml").write_text("")
    from aeon_kernel.errors import OrchestrationError

    with open_flow(flow) as engine, pytest.raises(OrchestrationError, match=r"\[state\] use = \"sqlite\""):
        engine.resume("anything")


def test_cli_resume_after_kill_equals_the_uninterrupted_cli_run(tmp_path: Path) -> None:
    """``aeon flow resume RUN_ID`` (a real process) after a SIGKILL; a flow of kernel nodes only."""
    flow = tmp_path / "flow"
    flow.mkdir()
    (tmp_path / "files").mkdir()
    (flow / "flow.yaml").write_text(
        "name: kernel-only\nnodes:\n"
        "  - {id: in, role: start, impl: pick, options: {keys: [text]}}\n"
        "  - {id: tidy, role: linear, impl: assign, options: {values: {lang: en}}}\n"
        "  - {id: parts, role: split}\n"
        "  - {id: a, role: linear, impl: assign, options: {values: {a: 1}}}\n"
        "  - {id: b, role: linear, impl: assign, options: {values: {b: 2}}}\n"
        "  - {id: join, role: merge, impl: collect}\n"
        "  - {id: done, role: exit}\n"
        "edges: [[in, tidy], [tidy, parts], [parts, a], [parts, b], [a, join], [b, join], [join, done]]\n"
    )
    config = flow / "aeon.toml"
    config.write_text(f'[state]\nuse = "sqlite"\npath = "{tmp_path / "state.db"}"\n')
    value = json.dumps({"text": "hello", "extra": True})

    def aeon(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "aeon_cli", "flow", *args],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
        )

    killed = child(tmp_path, "run", value, "3")
    out, err = killed.communicate(timeout=60)
    assert killed.returncode == -signal.SIGKILL, (out, err)
    run_id = stored_run_id(tmp_path)

    resumed = aeon("resume", run_id, "--config", str(config), "--json", "--log", "resumed.jsonl")
    assert resumed.returncode == 0, resumed.stderr
    assert "Traceback" not in resumed.stderr
    fresh = aeon("run", str(flow), "--input", value, "--json")
    assert fresh.returncode == 0, fresh.stderr
    result, reference = json.loads(resumed.stdout), json.loads(fresh.stdout)
    assert result["run_id"] == run_id != reference["run_id"]
    assert comparable(result) == comparable(reference)
    assert [stage["node"] for stage in result["history"]] == ["in", "tidy", "parts", "a", "b", "join", "done"]
    # the log of the resumed process holds every cycle once: the committed ones repaired, then the new ones
    lines = [json.loads(line) for line in (tmp_path / "resumed.jsonl").read_text().splitlines()]
    logged = [stage["seq"] for line in lines for stage in line.get("stages", ())]
    assert logged == list(range(1, 8))

    again = aeon("resume", run_id, "--config", str(config))
    assert again.returncode == 2 and "already finished" in again.stderr and "Traceback" not in again.stderr


# --- a task layer kept only in process memory ------------------------------------------------------------------


def test_resume_restores_the_task_layer_when_memory_is_not_durable(
    tmp_path: Path, reference: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    make_flow(tmp_path, durable_memory=False)
    run_id = interrupted(
        tmp_path, monkeypatch, cycles=4
    )  # intake, stamp, fork, left+right; then a new engine
    result = resume(tmp_path, run_id, monkeypatch)
    assert result.status == "success"
    review = next(stage for stage in result.history if stage["node"] == "review")
    assert [item["key"] for item in review["context"]] == [
        "00000006-join",
        "00000003-fork",
        "00000002-stamp",
        "00000001-intake",
    ]
    assert comparable(result) == reference
