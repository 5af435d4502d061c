"""``aeon batch`` is once-only (issue 27, item 2): a batch killed (SIGKILL) or stopped by a second Ctrl-C, then run
again, resumes each interrupted task's run from the state store instead of starting it anew, so every side effect
happens once — but for the one documented re-run of a step that was running, with the same idempotency key — and
the results equal an uninterrupted batch's. Two batches on one ``--out`` cannot both run; ``aeon runs`` says
whether a running run's owner is alive; a line of deeply nested JSON is a clear error (item 6).

Real processes (``python -m aeon_cli``), the real SQLite store in ``$AEON_DATA_DIR`` (and Redis where said), and
a plugin installed as a third-party one is: a model that plans ``steps`` calls of ``ledger`` (tests/support/
ledger.py: its side effect is the idempotency key in a ledger file, once per key), which also notes every
attempt, and can SIGKILL its own process after the K-th attempt.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from aeon_cli.batch import batch
from aeon_cli.runs import runs
from tests.support.redis_server import redis_url  # noqa: F401

ROOT = Path(__file__).resolve().parents[2]
TASKS, STEPS, CONCURRENCY = 4, 3, 2
PLUGIN = """
import json, os, re, signal, time
from pathlib import Path
from aeon_kernel import LLMAdapter, hookimpl
from aeon_kernel.kit import current_idempotency_key
from tests.support.ledger import LedgerTool

class ByRequest(LLMAdapter):
    model_id = "by-request"

    def generate(self, prompt, system_prompt=None, max_tokens=2048, temperature=0.7, *, json_schema=None):
        spec = json.loads(re.findall(r"job (\\{[^{}]*\\})", prompt)[-1])
        steps = [{"step_id": str(i), "description": "record", "tool": "ledger", "arguments": {"n": i}}
                 for i in range(1, spec["steps"] + 1)]
        return {"text": json.dumps({"goal": spec["word"], "steps": steps})}

class Counted(LedgerTool):
    def invoke(self, **kwargs):
        attempts = Path(os.environ["AEON_TEST_ATTEMPTS"])
        with attempts.open("a") as file:
            file.write(current_idempotency_key() + "\\n")
        result = super().invoke(**kwargs)  # the ledger, once per key; then AEON_TEST_TOOL_SECONDS of sleep
        kill_at = os.environ.get("AEON_TEST_KILL_AT")
        if kill_at and len(attempts.read_text().splitlines()) >= int(kill_at):
            os.kill(os.getpid(), signal.SIGKILL)  # inside the step, after its side effect
        return result

def mark():
    def run(value, context):  # a flow stage's side effect: its idempotency key, once, in the ledger
        attempts, ledger = Path(os.environ["AEON_TEST_ATTEMPTS"]), Path(os.environ["AEON_TEST_LEDGER"])
        key = context.idempotency_key
        with attempts.open("a") as file:
            file.write(key + "\\n")
        if key not in (ledger.read_text().splitlines() if ledger.exists() else []):
            with ledger.open("a") as file:
                file.write(key + "\\n")
        time.sleep(float(os.environ.get("AEON_TEST_TOOL_SECONDS", "0")))
        kill_at = os.environ.get("AEON_TEST_KILL_AT")
        if kill_at and len(attempts.read_text().splitlines()) >= int(kill_at):
            os.kill(os.getpid(), signal.SIGKILL)
        return {**value, "marks": value.get("marks", 0) + 1}
    return run

@hookimpl
def aeon_register_nodes(register):
    register("ledger.mark", mark)

@hookimpl
def aeon_register_llm_adapters(register):
    register("by_request", ByRequest)

@hookimpl
def aeon_register_tools(register):
    register("ledger", Counted)
"""


def job(word: str, steps: int = STEPS) -> str:
    return "job " + json.dumps({"word": word, "steps": steps})


class Project:
    """A working directory with the plugin, a requests file, its own data directory, ledger and attempts."""

    def __init__(self, root: Path, state: str = "") -> None:
        self.root = root
        site = root / "site"
        (site / "ledger_jobs-1.0.dist-info").mkdir(parents=True)
        (site / "ledger_jobs-1.0.dist-info" / "METADATA").write_text(
            "Metadata-Version: 2.1\nName: ledger-jobs\nVersion: 1.0\n"
        )
        (site / "ledger_jobs-1.0.dist-info" / "entry_points.txt").write_text(
            "[aeon]\nledger_jobs = ledger_jobs\n"
        )
        (site / "ledger_jobs.py").write_text(PLUGIN)
        (root / "aeon.toml").write_text('[llm]\nuse = "by_request"\n' + state)
        lines = [{"id": f"t{i}", "request": job(f"w{i}")} for i in range(TASKS)]
        (root / "requests.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
        self.processes: list[subprocess.Popen[str]] = []

    @property
    def env(self) -> dict[str, str]:
        return {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(self.root / "site"), str(ROOT), *sys.path]),
            "AEON_DATA_DIR": str(self.root / "data"),
            "AEON_TEST_LEDGER": str(self.root / "ledger"),
            "AEON_TEST_ATTEMPTS": str(self.root / "attempts"),
            "AEON_TEST_TOOL_SECONDS": "0.15",
        }

    def start(self, *args: str, **env: str) -> subprocess.Popen[str]:
        proc = subprocess.Popen(
            [sys.executable, "-m", "aeon_cli", "batch", "requests.jsonl", "--out", "out.jsonl", *args],
            cwd=self.root,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**self.env, **env},
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
        self.processes.append(proc)
        return proc

    def batch(self, *args: str, **env: str) -> tuple[int, str]:
        proc = self.start("--concurrency", str(CONCURRENCY), *args, **env)
        _, stderr = proc.communicate(timeout=120)
        return proc.returncode, stderr

    def attempts(self) -> list[str]:
        path = self.root / "attempts"
        return path.read_text().splitlines() if path.exists() else []

    def ledger(self) -> list[str]:
        path = self.root / "ledger"
        return path.read_text().splitlines() if path.exists() else []

    def results(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in (self.root / "out.jsonl").read_text().splitlines()]

    def stored(self) -> list[tuple[str, str]]:
        """(run_id, status) of every run in the default SQLite store."""
        with sqlite3.connect(self.root / "data" / "runs.db") as db:
            return sorted(db.execute("SELECT run_id, status FROM runs").fetchall())

    def wait_for_attempts(self, proc: subprocess.Popen[str], count: int) -> None:
        deadline = time.monotonic() + 60
        while len(self.attempts()) < count:
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the batch made no progress"
            time.sleep(0.01)

    def kill_all(self) -> None:
        for proc in self.processes:
            if proc.poll() is None:
                proc.kill()
            proc.communicate()


@pytest.fixture
def project(tmp_path: Path) -> Iterator[Project]:
    made = Project(tmp_path)
    try:
        yield made
    finally:
        made.kill_all()


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Any, ...]]:
    """What an uninterrupted batch writes, by id (without run ids and times)."""
    made = Project(tmp_path_factory.mktemp("uninterrupted"))
    try:
        code, stderr = made.batch()
        assert code == 0, stderr
        return {line["id"]: comparable(line) for line in made.results()}
    finally:
        made.kill_all()


def comparable(line: dict[str, Any]) -> tuple[Any, ...]:
    return line["status"], line["answer"], line["message"]


def check_once_only(made: Project, uninterrupted: dict[str, tuple[Any, ...]], stops: int = 1) -> None:
    """Every task once in --out, as uninterrupted; each side effect once, under its run's keys only (no abandoned
    run's); a step repeated only with its own key, and only the steps running at each of the ``stops``; no run left
    behind."""
    written = made.results()
    assert sorted(line["id"] for line in written) == sorted(uninterrupted)
    assert {line["id"]: comparable(line) for line in written} == uninterrupted
    keys = {f"{line['run_id']}:{step}" for line in written for step in range(1, STEPS + 1)}
    assert sorted(made.ledger()) == sorted(keys)  # no key of a run started anew
    attempts = Counter(made.attempts())
    assert set(attempts) == keys
    assert sum(times - 1 for times in attempts.values()) <= stops * CONCURRENCY, attempts
    assert made.stored() == sorted((line["run_id"], "completed") for line in written)


@pytest.mark.parametrize("kill_at", [1, 4, 6, 11])
def test_a_batch_killed_inside_a_step_resumes_its_runs(
    project: Project, uninterrupted: dict[str, tuple[Any, ...]], kill_at: int
) -> None:
    code, stderr = project.batch(AEON_TEST_KILL_AT=str(kill_at))
    assert code == -signal.SIGKILL, stderr
    journal = (project.root / "out.jsonl.journal").read_text().splitlines()
    assert journal, "every started task's run id is in the journal"
    code, stderr = project.batch()
    assert code == 0, stderr
    assert "go on from their runs" in stderr and "Traceback" not in stderr
    check_once_only(project, uninterrupted)


@pytest.mark.parametrize("after", [1, 3, 5, 8, 10])
def test_a_batch_stopped_by_a_second_ctrl_c_resumes_its_runs(
    project: Project, uninterrupted: dict[str, tuple[Any, ...]], after: int
) -> None:
    proc = project.start("--concurrency", str(CONCURRENCY))
    project.wait_for_attempts(proc, after)
    proc.send_signal(signal.SIGINT)
    time.sleep(0.02)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr
    code, stderr = project.batch()
    assert code == 0, stderr
    check_once_only(project, uninterrupted)


@pytest.mark.parametrize("after", [2, 7])
def test_a_batch_killed_from_outside_then_again_while_resuming(
    project: Project, uninterrupted: dict[str, tuple[Any, ...]], after: int
) -> None:
    """SIGKILL at whatever moment the K-th attempt leaves (a commit, a model call, a tool), twice over."""
    for count in (after, after + 2):
        proc = project.start("--concurrency", str(CONCURRENCY))
        project.wait_for_attempts(proc, count)
        proc.kill()
        proc.communicate()
    code, stderr = project.batch()
    assert code == 0, stderr
    check_once_only(project, uninterrupted, stops=2)


def test_a_batch_on_redis_resumes_its_runs(tmp_path: Path, redis_url: str) -> None:  # noqa: F811
    namespace = f"batch{os.getpid()}{time.monotonic_ns()}:"
    made = Project(tmp_path, f'\n[state]\nuse = "redis"\nurl = "{redis_url}"\nnamespace = "{namespace}"\n')
    try:
        code, stderr = made.batch(AEON_TEST_KILL_AT="5")
        assert code == -signal.SIGKILL, stderr
        code, stderr = made.batch()
        assert code == 0, stderr
        written = made.results()
        keys = {f"{line['run_id']}:{step}" for line in written for step in range(1, STEPS + 1)}
        assert len(written) == TASKS and sorted(made.ledger()) == sorted(keys)
        assert set(made.attempts()) == keys
        import redis

        client = redis.Redis.from_url(redis_url)
        assert {m.decode() for m in client.zrange(f"{namespace}runs", 0, -1)} == {
            w["run_id"] for w in written
        }
        client.close()
    finally:
        made.kill_all()


def write_marks_flow(root: Path, tables: str = "") -> None:
    """``root/flow``: STEPS ``ledger.mark`` nodes in a row, its aeon.toml in-memory memory plus ``tables``."""
    import yaml

    nodes = [{"id": "in", "role": "start"}]
    nodes += [{"id": f"m{i}", "role": "linear", "impl": "ledger.mark"} for i in range(1, STEPS + 1)]
    nodes += [{"id": "out", "role": "exit"}]
    flow = {
        "name": "marks",
        "nodes": nodes,
        "edges": [[a["id"], b["id"]] for a, b in itertools.pairwise(nodes)],
    }
    (root / "flow").mkdir()
    (root / "flow" / "flow.yaml").write_text(yaml.safe_dump(flow, sort_keys=False))
    (root / "flow" / "aeon.toml").write_text('[memory]\nuse = "in_memory"\n' + tables)


def test_a_flow_batch_killed_inside_a_stage_resumes_its_runs(tmp_path: Path) -> None:
    made = Project(tmp_path)
    write_marks_flow(tmp_path)
    lines = [{"id": i, "input": {"n": i}} for i in range(TASKS)]
    (tmp_path / "requests.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    try:
        code, stderr = made.batch("--flow", "flow", AEON_TEST_KILL_AT="5")
        assert code == -signal.SIGKILL, stderr
        code, stderr = made.batch("--flow", "flow")
        assert code == 0, stderr
        written = sorted(made.results(), key=lambda line: line["id"])
        assert [(line["id"], line["answer"], line["task_status"]) for line in written] == [
            (i, {"n": i, "marks": STEPS}, "success") for i in range(TASKS)
        ]
        keys = {f"{line['run_id']}:t1/m{step}" for line in written for step in range(1, STEPS + 1)}
        assert sorted(made.ledger()) == sorted(keys)  # each stage's side effect once, under its run's key
        assert set(made.attempts()) == keys and len(made.attempts()) <= len(keys) + CONCURRENCY
    finally:
        made.kill_all()


def test_a_run_that_ended_before_its_line_was_written_is_not_run_again(project: Project) -> None:
    code, stderr = project.batch()
    assert code == 0, stderr
    lines = (project.root / "out.jsonl").read_text().splitlines(keepends=True)
    (project.root / "out.jsonl").write_text("".join(lines[:-1]))  # killed between the end and the line
    before = project.attempts()
    code, stderr = project.batch()
    assert code == 0, stderr
    assert project.attempts() == before  # nothing ran
    restored, expected = project.results()[-1], json.loads(lines[-1])
    assert {**restored, "seconds": 0} == {**expected, "seconds": 0}  # the same run, status, answer, message


def test_a_journalled_run_the_store_never_saw_starts_anew(project: Project) -> None:
    """Killed between the journal line and the run's first commit: nothing ran, so the task starts anew."""
    (project.root / "out.jsonl.journal").write_text(json.dumps({"id": "t0", "run_id": "f" * 32}) + "\n")
    code, stderr = project.batch()
    assert code == 0, stderr
    assert "f" * 32 not in {line["run_id"] for line in project.results()}
    assert len(project.ledger()) == TASKS * STEPS


def test_a_journalled_run_the_store_never_saw_starts_with_its_journalled_id(project: Project) -> None:
    """Submitted (its id journalled first) but stopped before its first cycle: nothing ran, so the task starts, as
    the run the journal names — one run id per line, however often the batch is run again."""
    from aeon_kernel.orchestrator import new_run_id

    chosen = new_run_id()
    journal = project.root / "out.jsonl.journal"
    journal.write_text(json.dumps({"id": "t0", "run_id": chosen}) + "\n")
    code, stderr = project.batch()
    assert code == 0, stderr
    assert {line["id"]: line["run_id"] for line in project.results()}["t0"] == chosen
    records = [json.loads(line) for line in journal.read_text().splitlines()]
    assert sorted(record["id"] for record in records) == [f"t{i}" for i in range(TASKS)]
    assert len(project.ledger()) == TASKS * STEPS
    assert project.stored() == sorted((line["run_id"], "completed") for line in project.results())


def test_a_torn_journal_line_is_dropped_and_a_bad_one_stops_the_batch(project: Project) -> None:
    journal = project.root / "out.jsonl.journal"
    journal.write_text('{"id": "t0", "run_id": "abc')  # cut short by a kill: its run had not begun
    code, stderr = project.batch()
    assert code == 0, stderr
    assert journal.read_text().count("\n") == TASKS
    journal.write_text("garbage\n")
    code, stderr = project.batch()
    assert code == 2 and "line 1 of" in stderr and "not a batch journal line" in stderr


def test_a_second_batch_on_the_same_out_is_refused(project: Project) -> None:
    first = project.start("--concurrency", "1", AEON_TEST_TOOL_SECONDS="0.3")
    project.wait_for_attempts(first, 1)
    code, stderr = project.batch()
    assert code == 2, stderr
    assert f"another aeon batch (pid {first.pid}) is writing out.jsonl" in stderr
    _, first_err = first.communicate(timeout=60)
    assert first.returncode == 0, first_err
    assert len(project.results()) == TASKS and len(project.attempts()) == TASKS * STEPS  # each task once
    code, stderr = project.batch()  # the lock went with its process
    assert code == 0 and "0 task(s) to run" in stderr, stderr


def test_aeon_runs_shows_a_live_owner_then_a_stale_one(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(project.root)
    monkeypatch.setenv("AEON_DATA_DIR", str(project.root / "data"))
    monkeypatch.syspath_prepend(str(project.root / "site"))
    proc = project.start("--concurrency", "1", AEON_TEST_TOOL_SECONDS="30")
    project.wait_for_attempts(proc, 1)
    listed = CliRunner().invoke(runs, [])
    assert listed.exit_code == 0, listed.output
    assert f"running (live, pid {proc.pid})" in listed.output
    proc.kill()
    proc.communicate()
    listed = CliRunner().invoke(runs, [])
    assert f"running (stale: owner pid {proc.pid} on this host is gone)" in listed.output
    (run,) = json.loads(CliRunner().invoke(runs, ["--json"]).output)
    assert (run["status"], run["liveness"], run["owner"]["pid"]) == ("running", "stale", proc.pid)
    code, stderr = project.batch()
    assert code == 0, stderr
    assert {run["liveness"] for run in json.loads(CliRunner().invoke(runs, ["--json"]).output)} == {None}


def test_a_deeply_nested_json_line_is_a_bad_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Item 6: 100,000 brackets on a line are reported with its number before anything runs (exit 2)."""
    monkeypatch.chdir(tmp_path)
    deep = "[" * 100_000 + "]" * 100_000
    (tmp_path / "requests.jsonl").write_text(json.dumps("a request") + "\n" + deep + "\n")
    result = CliRunner().invoke(batch, ["requests.jsonl", "--out", "out.jsonl", "--no-log"])
    assert result.exit_code == 2, result.output
    assert "line 2: JSON nested too deeply to read" in result.output
    assert "Traceback" not in result.output and not (tmp_path / "out.jsonl").exists()
    (tmp_path / "out.jsonl").write_text(deep + "\n")  # and as a line of --out
    result = CliRunner().invoke(batch, ["requests.jsonl", "--out", "out.jsonl", "--no-log"])
    assert result.exit_code == 2 and "line 1 of out.jsonl is not a batch result" in result.output
