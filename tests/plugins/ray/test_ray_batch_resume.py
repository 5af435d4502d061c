"""``aeon batch --executor ray`` is once-only too (issue 27, item 2): the batch chooses each task's run id and
journals it before it submits the task, so a batch killed (SIGKILL) or stopped by a second Ctrl-C while Ray
workers run its tasks, run again on Ray, resumes each interrupted run from the state store: every side effect once,
the results of an uninterrupted batch, no run left ``running``, one run id per line in the journal.

Real processes: ``python -m aeon_cli batch`` connected to a local Ray cluster started once for the module (the
fixture of test_ray_executor.py), its workers recording into one SQLite store, and the ledger plugin of
tests/cli/test_batch_resume.py (a model planning ``steps`` calls of the ``ledger`` tool, whose side effect is its
idempotency key in a ledger file, once per key; every attempt is noted too), which the workers find through
``[executor] runtime_env``.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cli.test_batch_resume import (
    CONCURRENCY,
    ROOT,
    STEPS,
    TASKS,
    Project,
    check_once_only,
    comparable,
    write_marks_flow,
)
from tests.plugins.ray.test_ray_executor import cluster  # noqa: F401 - the module's Ray cluster


def on_ray(root: Path, address: str) -> Project:
    """A project whose batches run on the cluster at ``address``: the workers get the plugin and the ledger's files
    through the job's runtime_env."""
    made = Project(root)
    with (root / "aeon.toml").open("a") as toml:
        toml.write(executor_table(made, address))
    return made


def executor_table(made: Project, address: str) -> str:
    variables = {
        key: value
        for key, value in made.env.items()
        if key in ("AEON_TEST_LEDGER", "AEON_TEST_ATTEMPTS", "AEON_TEST_TOOL_SECONDS")
    }
    variables["PYTHONPATH"] = os.pathsep.join([str(made.root / "site"), str(ROOT)])
    table = ", ".join(f"{key} = {json.dumps(value)}" for key, value in variables.items())
    return (
        f'[executor]\nuse = "ray"\naddress = "{address}"\nconcurrency = {CONCURRENCY}\n'
        f"runtime_env = {{ env_vars = {{ {table} }} }}\n"
    )


def owners_gone(made: Project, timeout: float = 30) -> None:
    """Wait until no process of a killed batch's workers still holds a run (Ray ends a dead driver's workers
    within moments; a re-run before then would find a run held by a live process, and end its task in error)."""
    deadline = time.monotonic() + timeout
    while True:
        with sqlite3.connect(made.root / "data" / "runs.db") as db:
            pids = [pid for (pid,) in db.execute("SELECT owner_pid FROM runs WHERE status = 'running'")]
        alive = [pid for pid in pids if pid and Path(f"/proc/{pid}").exists()]
        alive += [pid for pid in workers() if pid not in alive]
        if not alive:
            return
        assert time.monotonic() < deadline, f"the killed batch's Ray workers are still alive: {alive}"
        time.sleep(0.05)


def workers() -> list[int]:
    """The Ray actor processes of Aeon's executor (``ray::Worker``) on this machine."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "cmdline").read_bytes()
            status = (entry / "status").read_text()
        except OSError:
            continue
        if command.startswith(b"ray::Worker") and "State:\tZ" not in status:
            found.append(int(entry.name))
    return found


def journal_has_one_run_per_line(made: Project) -> None:
    records = [json.loads(line) for line in (made.root / "out.jsonl.journal").read_text().splitlines()]
    assert Counter(record["id"] for record in records) == Counter(f"t{i}" for i in range(TASKS))
    assert {record["id"]: record["run_id"] for record in records} == {
        line["id"]: line["run_id"] for line in made.results()
    }


@pytest.fixture
def project(cluster: dict[str, Any], tmp_path: Path) -> Iterator[Project]:  # noqa: F811
    made = on_ray(tmp_path, cluster["address"])
    try:
        yield made
    finally:
        made.kill_all()  # every batch this test started, however it failed
        owners_gone(made)  # and the cluster as the module fixture expects it: no worker of a killed batch


@pytest.fixture(scope="module")
def uninterrupted(cluster: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:  # noqa: F811
    """What an uninterrupted batch on Ray writes, by id (without run ids and times)."""
    made = on_ray(tmp_path_factory.mktemp("uninterrupted"), cluster["address"])
    try:
        code, stderr = made.batch()
        assert code == 0, stderr
        return {line["id"]: comparable(line) for line in made.results()}
    finally:
        made.kill_all()


@pytest.mark.parametrize("after", [2, 7])
def test_a_batch_on_ray_killed_while_its_tasks_run_resumes_their_runs(
    project: Project, uninterrupted: dict[str, Any], after: int
) -> None:
    proc = project.start("--concurrency", str(CONCURRENCY))
    project.wait_for_attempts(proc, after)
    assert workers(), "the workers' processes are seen (owners_gone waits for them)"
    proc.kill()  # the submitter: its journal, not its workers, says which run is whose
    proc.communicate()
    assert proc.returncode == -signal.SIGKILL
    owners_gone(project)
    code, stderr = project.batch()
    assert code == 0, stderr
    check_once_only(project, uninterrupted)
    journal_has_one_run_per_line(project)
    assert "go on from their runs" in stderr and "Traceback" not in stderr


def test_a_batch_on_ray_stopped_by_a_second_ctrl_c_resumes_its_runs(
    project: Project, uninterrupted: dict[str, Any]
) -> None:
    proc = project.start("--concurrency", str(CONCURRENCY))
    project.wait_for_attempts(proc, 3)
    proc.send_signal(signal.SIGINT)
    time.sleep(0.02)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr
    assert len(project.ledger()) < TASKS * STEPS  # it stopped before the end: something is left to resume
    code, stderr = project.batch()
    assert code == 0, stderr
    check_once_only(project, uninterrupted)
    journal_has_one_run_per_line(project)


def test_a_flow_batch_on_ray_killed_while_its_stages_run_resumes_their_runs(
    cluster: dict[str, Any],  # noqa: F811
    tmp_path: Path,
) -> None:
    """A resumed flow run goes on at the stage after its last committed one, in a worker of the new batch."""
    made = Project(tmp_path)
    write_marks_flow(tmp_path, executor_table(made, cluster["address"]))
    lines = [{"id": i, "input": {"n": i}} for i in range(TASKS)]
    (tmp_path / "requests.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    try:
        proc = made.start("--flow", "flow")
        made.wait_for_attempts(proc, 5)
        proc.kill()
        proc.communicate()
        owners_gone(made)
        code, stderr = made.batch("--flow", "flow")
        assert code == 0, stderr
        written = sorted(made.results(), key=lambda line: line["id"])
        assert [(line["id"], line["answer"], line["task_status"]) for line in written] == [
            (i, {"n": i, "marks": STEPS}, "success") for i in range(TASKS)
        ]
        keys = {f"{line['run_id']}:t1/m{step}" for line in written for step in range(1, STEPS + 1)}
        assert sorted(made.ledger()) == sorted(keys)  # each stage's side effect once, under its run's key
        assert set(made.attempts()) == keys and len(made.attempts()) <= len(keys) + CONCURRENCY
        assert made.stored() == sorted((line["run_id"], "completed") for line in written)
    finally:
        made.kill_all()
        owners_gone(made)
