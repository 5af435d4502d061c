"""The ``redis`` state store against a real redis-server (issue 16): runs seen across processes and machines.

What the ``sqlite`` store is held to, on Redis: a run stored as deltas and read back equal; ``aeon runs`` and
``aeon resume`` from another process; ``kill -9`` anywhere then a resume from another process giving the result of
an uninterrupted run, each side effect once; of several processes resuming one run, exactly one drives it;
ownership per claim (stale, live, another host, taken over); damaged or foreign keys a ``RunStoreError`` naming the
key, never a traceback; a server that is down named without its password; no registered secret in any value.

Every test has its own namespace on the session's server. The worker processes are this module, run with
``python -m tests.plugins.test_redis_state worker ...`` (see ``_worker``).
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from uuid import uuid4

import pytest
import redis
from pydantic import SecretStr

from aeon_kernel import ConfigError, Engine, LogEntry, RunStoreError, hookimpl
from aeon_kernel.config import AeonConfig, Choice
from aeon_kernel.kit import register_secret
from aeon_plugins.redis_state import RedisStateStore
from tests.support import ledger
from tests.support.builders import plan, tool_step
from tests.support.redis_server import _answers_ping, _free_port, redis_url  # noqa: F401 - the session fixture

ROOT = Path(__file__).resolve().parents[2]
THREE = plan(*[tool_step(str(i), "ledger", {"n": i}) for i in range(1, 4)], goal="three side effects")
CANARY = "redis-state-canary-7Hq2Zx9Lw4Pv"


@pytest.fixture
def namespace() -> str:
    return f"test-state:{uuid4().hex}:"


@pytest.fixture
def raw(redis_url: str) -> Iterator[redis.Redis]:  # noqa: F811
    client = redis.Redis.from_url(redis_url)
    yield client
    client.close()


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(ledger.LEDGER_ENV, str(tmp_path / "ledger.txt"))
    return tmp_path


@pytest.fixture
def make(redis_url: str, namespace: str, workdir: Path) -> Callable[..., Engine]:  # noqa: F811
    """An engine over this test's namespace: the ledger tool, the scripted model, a JSONL log."""

    def build(responses: list[Any] | None = None, ttl: int = 20, **options: Any) -> Engine:
        config = AeonConfig(
            ttl=ttl,
            state=Choice("redis", {"url": redis_url, "namespace": namespace, **options}),
            telemetry=(Choice("jsonl", {"path": str(workdir / "run.jsonl")}),),
        ).with_choice("llm", "scripted", responses=[THREE] if responses is None else responses)
        return Engine(config, plugins=[ledger])

    return build


def store_of(engine: Engine) -> RedisStateStore:
    store = engine.state_store
    assert isinstance(store, RedisStateStore)
    return store


def interrupted(make: Callable[..., Engine], cycles: int = 2) -> str:
    """A run stopped after ``cycles`` cycles (the plan, then steps) and released, as a closed process leaves it."""
    with make() as engine:
        run = engine.orchestrator().iter("record three things")
        run_id = [next(run).run_id for _ in range(cycles)][-1]
        run.close()  # type: ignore[attr-defined]  # a generator
    return run_id


def keys_of(namespace: str, run_id: str) -> tuple[str, str, str]:
    return f"{namespace}run:{run_id}", f"{namespace}steps:{run_id}", f"{namespace}cycles:{run_id}"


def hold(raw: redis.Redis, run_key: str, pid: int, host: str, token: str) -> None:
    """Record an owner on the run, as a process that claimed it would have."""
    raw.hset(run_key, "owner_pid", str(pid))
    raw.hset(run_key, "owner_host", host)
    raw.hset(run_key, "owner_token", token)


def text(value: Any) -> str:
    assert isinstance(value, bytes)
    return value.decode()


def ledger_lines(workdir: Path) -> list[str]:
    return (workdir / "ledger.txt").read_text().splitlines()


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


# --- a run, stored and read back ----------------------------------------------------------------------------------


def test_a_run_is_stored_as_deltas_and_read_back_equal(
    make: Callable[..., Engine], raw: redis.Redis, namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    written: list[dict[str, Any]] = []
    original = RedisStateStore._write

    def spy(self: RedisStateStore, state: Any, what: str, **parts: Any) -> None:
        written.append(parts)
        original(self, state, what, **parts)

    monkeypatch.setattr(RedisStateStore, "_write", spy)
    with make() as engine:
        result = engine.run("record three things")
        stored = store_of(engine).load(result["run_id"])
        (summary,) = store_of(engine).list_runs()
    run_id = result["run_id"]
    assert result["status"] == "completed"
    assert stored.state.model_dump(mode="json") == result["final_state"]
    assert [e.step_number for e in stored.entries] == [1, 2, 3, 4]
    assert (summary.run_id, summary.status, summary.cycles, summary.request) == (
        run_id,
        "completed",
        4,
        "record three things",
    )
    # one step and one record per step cycle; the whole plan only in the planning cycle
    commits = [w for w in written if "record" in w]
    assert [(len(w["steps"]) // 2, w["replace_steps"]) for w in commits] == [
        (3, True),
        (1, False),
        (1, False),
        (1, False),
    ]
    run_key, steps_key, cycles_key = keys_of(namespace, run_id)
    assert sorted(raw.keys(f"{namespace}*")) == sorted(
        k.encode() for k in (run_key, steps_key, cycles_key, f"{namespace}runs", f"{namespace}runs:created")
    )
    assert (raw.type(run_key), raw.type(steps_key), raw.type(cycles_key)) == (b"hash", b"hash", b"list")
    assert (
        raw.hget(run_key, "owner_token") is None
        and json.loads(text(raw.hget(run_key, "result")))["status"] == "completed"
    )
    assert raw.llen(cycles_key) == 4 and raw.hlen(steps_key) == 3
    assert (
        "plan_state" not in json.loads(text(raw.lindex(cycles_key, 1)))["entry"]
    )  # rebuilt on load, not stored


def test_runs_are_listed_newest_first_and_namespaces_are_apart(
    make: Callable[..., Engine],
    redis_url: str,  # noqa: F811
) -> None:
    with make(responses=[THREE, THREE, THREE]) as engine:
        ids = [engine.run(f"run {i}")["run_id"] for i in range(3)]
        assert [s.run_id for s in store_of(engine).list_runs()] == ids[::-1]
    elsewhere = RedisStateStore(redis_url, namespace=f"other:{uuid4().hex}:")
    assert elsewhere.list_runs() == []
    with pytest.raises(RunStoreError, match="no run"):
        elsewhere.load(ids[0])
    elsewhere.close()


def test_an_interrupted_run_resumes_in_a_new_engine_without_repeating_steps(
    make: Callable[..., Engine], workdir: Path
) -> None:
    run_id = interrupted(make, cycles=3)  # the plan and two steps
    assert len(ledger_lines(workdir)) == 2
    with make(responses=[]) as engine:
        (summary,) = store_of(engine).list_runs()
        assert (summary.status, summary.cycles) == ("running", 3)
        result = engine.resume(run_id)
        with pytest.raises(RunStoreError, match="already finished"):
            engine.resume(run_id)
    assert result["status"] == "completed" and result["final_state"]["ttl_remaining"] == 20 - 4
    assert ledger_lines(workdir) == [f"{run_id}:{i}" for i in range(1, 4)]
    records = [json.loads(line) for line in (workdir / "run.jsonl").read_text().splitlines()]
    assert [r["step_number"] for r in records if "step_number" in r] == [1, 2, 3, 4]


# --- the command line, from another process ------------------------------------------------------------------------


def aeon(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "aeon_cli", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **(env or {})},
        cwd=ROOT,
    )


def test_aeon_runs_and_aeon_resume_from_another_process(
    tmp_path: Path,
    redis_url: str,  # noqa: F811
    namespace: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A run interrupted here is listed and resumed by `aeon` processes that share nothing with this one but the
    Redis server (the URL a secret reference, as it would be on another machine)."""
    echo = plan(*[tool_step(str(i), "echo", {"message": f"m{i}"}) for i in range(1, 4)], goal="echo three")
    (tmp_path / "responses.json").write_text(json.dumps([echo]))
    config = tmp_path / "aeon.toml"
    config.write_text(
        f'[llm]\nuse = "scripted"\nresponses = "{tmp_path / "responses.json"}"\n'
        f'[state]\nuse = "redis"\nurl = {{ "$env" = "AEON_TEST_REDIS_URL" }}\nnamespace = "{namespace}"\n'
    )
    monkeypatch.setenv("AEON_TEST_REDIS_URL", redis_url)
    # Built here with the URL as plain text: resolving the reference would register it as a secret in this whole
    # process, and scrub it from the messages later tests read.
    here = AeonConfig(state=Choice("redis", {"url": redis_url, "namespace": namespace}))
    with Engine(here.with_choice("llm", "scripted", responses=[echo])) as engine:
        cycles = engine.orchestrator().iter("echo m1 m2 m3")  # the request asks for the messages echoed
        run_id = [next(cycles).run_id for _ in range(2)][-1]
        cycles.close()  # type: ignore[attr-defined]  # a generator

    listed = aeon("runs", "--config", str(config), "--json")
    assert listed.returncode == 0, listed.stderr
    assert [(r["run_id"], r["status"], r["cycles"]) for r in json.loads(listed.stdout)] == [
        (run_id, "running", 2)
    ]
    resumed = aeon("resume", run_id, "--config", str(config), "--json")
    assert resumed.returncode == 0, resumed.stderr
    result = json.loads(resumed.stdout)
    assert result["status"] == "completed" and result["answer"] == {"message": "m3"}
    assert "state in the redis store" in resumed.stderr
    again = aeon("resume", run_id, "--config", str(config), "--json")
    assert again.returncode == 2 and "already finished" in again.stderr and "Traceback" not in again.stderr
    text = aeon("runs", "--config", str(config))
    assert text.returncode == 0 and run_id in text.stdout and "completed" in text.stdout
    assert aeon("stats", run_id, "--config", str(config), "--json").returncode == 0  # read back whole

    down = aeon(
        "runs", "--config", str(config), env={"AEON_TEST_REDIS_URL": f"redis://127.0.0.1:{closed_port()}/0"}
    )
    assert down.returncode == 2 and "Traceback" not in down.stderr
    assert "the state store at" in down.stderr and "cannot connect" in down.stderr


# --- kill -9, then resume from another process --------------------------------------------------------------------


def worker(
    directory: Path, url: str, namespace: str, *args: str, crash: str = "", tool_seconds: str = "0"
) -> subprocess.Popen[str]:
    env = {**os.environ, "AEON_CRASH_AT": crash, "AEON_TEST_TOOL_SECONDS": tool_seconds}
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.plugins.test_redis_state",
            "worker",
            str(directory),
            url,
            namespace,
            *args,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=ROOT,
    )


def _worker(directory: str, url: str, namespace: str, mode: str, *run_id: str) -> None:
    """The crash worker of ``tests/support/crash_worker.py`` — its plan, log sink, ledger and ``AEON_CRASH_AT`` —
    with this store: ``run`` or ``resume RUN_ID``, printing ``READY``, then the result as JSON (or, when the run
    cannot be claimed, ``{"refused": ...}`` and exit status 4)."""
    from aeon_plugins import in_memory, jsonl, plan_finished, schema_validator, scripted, supervisor
    from tests.support import crash_worker as crashing

    os.environ[ledger.LEDGER_ENV] = str(Path(directory) / "ledger.txt")

    class CrashingStore(RedisStateStore):
        def commit_cycle(self, state: Any, entry: LogEntry, llm_outputs: list[dict[str, Any]]) -> None:
            super().commit_cycle(state, entry, llm_outputs)
            if crashing.KIND == "commit" and entry.step_number == int(crashing.AT):
                crashing.die()

    class Components:
        @hookimpl
        def aeon_register_state_stores(self, register: Any) -> None:
            register("crashing_redis", CrashingStore)

        @hookimpl
        def aeon_register_telemetry_sinks(self, register: Any) -> None:
            register("crashing_jsonl", crashing.CrashingSink)

        @hookimpl
        def aeon_register_tools(self, register: Any) -> None:
            register("ledger", crashing.CrashingLedger)

    config = AeonConfig(
        ttl=40,
        state=Choice("crashing_redis", {"url": url, "namespace": namespace}),
        telemetry=(Choice("crashing_jsonl", {"path": str(Path(directory) / "run.jsonl")}),),
    ).with_choice("llm", "scripted", responses=[crashing.PLAN])
    builtins = [scripted, in_memory, schema_validator, supervisor, plan_finished, jsonl]
    with Engine(config, plugins=[*builtins, Components()], autoload=False) as engine:
        orchestrator = engine.orchestrator()
        print("READY", flush=True)
        try:
            for _ in (
                orchestrator.iter("record ten things") if mode == "run" else orchestrator.resume(run_id[0])
            ):
                pass
        except RunStoreError as exc:
            print(json.dumps({"refused": str(exc)}), flush=True)
            sys.exit(4)
        print(json.dumps(orchestrator.result), flush=True)


def stored(url: str, namespace: str) -> tuple[str | None, str | None]:
    """The scenario's run id and status, as the store has them."""
    store = RedisStateStore(url, namespace=namespace)
    try:
        runs = store.list_runs()
    finally:
        store.close()
    return (runs[0].run_id, runs[0].status) if runs else (None, None)


def essentials(result: dict[str, Any]) -> Any:
    steps = [(s["step_id"], s["status"], s["result"]) for s in result["plan"]["steps"]]
    calls = [(c["tool_name"], c["arguments"], c["result"]) for c in result["final_state"]["tool_history"]]
    return (
        steps,
        calls,
        result["final_state"]["cycle"],
        result["final_state"]["ttl_remaining"],
        result["answer"],
    )


def crash_and_resume(
    directory: Path, url: str, namespace: str, crash: str, seed: int
) -> tuple[dict[str, Any], int]:
    """``crash`` (a point of ``AEON_CRASH_AT``), or kills at random moments (``random``), then resumes in fresh
    processes until the run completes."""
    rng, kills = random.Random(seed), 0
    rounds = [crash] if crash != "random" else ["random"] * rng.randint(2, 3)
    for point in rounds:
        run_id, status = stored(url, namespace)
        if status == "completed":
            break
        args = ["resume", run_id] if run_id else ["run"]
        if point == "random":
            proc = worker(directory, url, namespace, *args, tool_seconds="0.02")
            assert proc.stdout is not None and proc.stdout.readline().strip() == "READY"
            time.sleep(rng.uniform(0.0, 0.25))
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
                kills += 1
            proc.communicate(timeout=60)
        else:
            proc = worker(directory, url, namespace, *args, crash=point)
            _, err = proc.communicate(timeout=60)
            assert proc.returncode == -signal.SIGKILL, (
                f"{point}: expected a kill, got {proc.returncode}: {err}"
            )
            kills += 1
    run_id, status = stored(url, namespace)
    assert run_id is not None
    if status == "completed":  # finished between kills: the store has the result
        store = RedisStateStore(url, namespace=namespace)
        state = store.load(run_id).state
        store.close()
        plan_dump = state.plan.model_dump(mode="json") if state.plan else None
        assert plan_dump is not None
        final = {"run_id": run_id, "status": state.status, "plan": plan_dump}
        return {
            **final,
            "final_state": state.model_dump(mode="json"),
            "answer": plan_dump["steps"][-1]["result"],
        }, kills
    proc = worker(directory, url, namespace, "resume", run_id)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    return json.loads(out.splitlines()[-1]), kills


def test_kill_9_anywhere_then_resume_from_another_process_gives_the_uninterrupted_result(
    tmp_path: Path,
    redis_url: str,  # noqa: F811
) -> None:
    scenarios = [
        "commit:1",
        "commit:6",
        "commit:11",
        "torn:4",
        "tool:3",
        "tool:10",
        "random",
        "random",
        "random",
    ]

    def uninterrupted() -> dict[str, Any]:
        directory = tmp_path / "reference"
        directory.mkdir()
        proc = worker(directory, redis_url, f"ref:{uuid4().hex}:", "run")
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        return dict(json.loads(out.splitlines()[-1]))

    def scenario(number: int) -> tuple[str, Path, dict[str, Any], int]:
        directory = tmp_path / f"s{number}"
        directory.mkdir()
        crash = scenarios[number]
        result, kills = crash_and_resume(directory, redis_url, f"crash:{uuid4().hex}:", crash, seed=number)
        return crash, directory, result, kills

    with ThreadPoolExecutor(max_workers=5) as pool:
        reference = pool.submit(uninterrupted)
        outcomes = list(pool.map(scenario, range(len(scenarios))))
    for crash, directory, result, _ in outcomes:
        run_id = result["run_id"]
        assert result["status"] == "completed", crash
        assert essentials(result) == essentials(reference.result()), crash
        assert ledger_lines(directory) == [f"{run_id}:{i}" for i in range(1, 11)], (
            crash
        )  # each side effect once
        records = [json.loads(line) for line in (directory / "run.jsonl").read_text().splitlines()]
        assert [r["step_number"] for r in records if "step_number" in r] == list(range(1, 12)), crash
    assert sum(kills for *_, kills in outcomes) >= 8


def test_of_processes_resuming_one_run_at_once_exactly_one_drives_it(
    make: Callable[..., Engine],
    raw: redis.Redis,
    redis_url: str,  # noqa: F811
    namespace: str,
    workdir: Path,
) -> None:
    """The run is left held by a process that is gone (stale, so every resumer may take it): taking it is a
    compare-and-set, so one wins and the others are refused, whenever they look."""
    run_id = interrupted(make, cycles=2)
    gone = subprocess.Popen(["true"])
    gone.wait()
    hold(raw, keys_of(namespace, run_id)[0], gone.pid, socket.gethostname(), "dead")
    procs = [worker(workdir, redis_url, namespace, "resume", run_id, tool_seconds="0.2") for _ in range(4)]
    outcomes = []
    for proc in procs:
        out, _ = proc.communicate(timeout=60)
        outcomes.append((proc.returncode, out))
    assert sorted(code for code, _ in outcomes) == [0, 4, 4, 4], outcomes
    for code, out in outcomes:
        if code == 4:
            assert re.search(r"being run by process|claimed by another run|already finished", out), out
    assert ledger_lines(workdir) == [f"{run_id}:{i}" for i in range(1, 4)]


# --- ownership per claim ------------------------------------------------------------------------------------------


def test_a_claim_taken_between_reading_the_owner_and_writing_it_is_refused(
    make: Callable[..., Engine],
    raw: redis.Redis,
    redis_url: str,  # noqa: F811
    namespace: str,
) -> None:
    """The race the processes above run, made certain: both see the same stale owner; the one that writes second
    finds the token changed and is refused, leaving the first one's claim in place."""
    run_id = interrupted(make)
    run_key = keys_of(namespace, run_id)[0]
    hold(raw, run_key, 999_999_999, socket.gethostname(), "dead")
    late, early = (
        RedisStateStore(redis_url, namespace=namespace),
        RedisStateStore(redis_url, namespace=namespace),
    )
    script = late._scripts["claim"]

    def overtaken(**kwargs: Any) -> Any:
        early.claim(run_id)  # reads the same stale owner, and writes first
        return script(**kwargs)

    late._scripts["claim"] = overtaken  # type: ignore[assignment]
    with pytest.raises(RunStoreError, match=r"claimed by another run .* while this one was claiming it"):
        late.claim(run_id)
    assert raw.hget(run_key, "owner_token") == early._claims[run_id].encode()
    late.release(run_id)  # holds nothing
    assert raw.hget(run_key, "owner_token") == early._claims[run_id].encode()
    late.close()
    early.close()


def test_a_second_claim_in_one_process_is_refused(
    make: Callable[..., Engine],
    redis_url: str,  # noqa: F811
    namespace: str,
) -> None:
    run_id = interrupted(make)
    one, two = (
        RedisStateStore(redis_url, namespace=namespace),
        RedisStateStore(redis_url, namespace=namespace),
    )
    one.claim(run_id)
    with pytest.raises(RunStoreError, match="another run of this process"):
        two.claim(run_id)
    with pytest.raises(RunStoreError, match="another run of this process"):
        one.claim(run_id)  # the same store (another thread of one Engine) too
    two.release(run_id)  # not two's claim: nothing changes
    with pytest.raises(RunStoreError, match="another run of this process"):
        two.claim(run_id)
    one.release(run_id)
    two.claim(run_id)  # released: free
    one.close()
    two.close()


def test_a_claim_left_by_an_earlier_process_with_this_pid_is_stale(
    make: Callable[..., Engine], raw: redis.Redis, namespace: str
) -> None:
    run_id = interrupted(make)
    hold(raw, keys_of(namespace, run_id)[0], os.getpid(), socket.gethostname(), "from-a-previous-life")
    with make(responses=[]) as engine:
        assert engine.resume(run_id)["status"] == "completed"


def test_a_run_held_by_a_live_process_on_this_host_is_refused_until_it_is_gone(
    make: Callable[..., Engine], raw: redis.Redis, namespace: str
) -> None:
    run_id = interrupted(make)
    holder = subprocess.Popen(["sleep", "30"])
    try:
        hold(raw, keys_of(namespace, run_id)[0], holder.pid, socket.gethostname(), "held")
        with make() as engine, pytest.raises(RunStoreError, match=f"being run by process {holder.pid}"):
            engine.resume(run_id, take_over=True)  # alive and checkable: refused even then
    finally:
        holder.kill()
        holder.wait()
    with make(responses=[]) as engine:
        assert engine.resume(run_id)["status"] == "completed"


def test_a_run_held_on_another_host_is_taken_over_only_when_asked(
    make: Callable[..., Engine], raw: redis.Redis, namespace: str, workdir: Path
) -> None:
    run_id = interrupted(make)
    hold(raw, keys_of(namespace, run_id)[0], 4242, "old-machine", "x")
    with make(responses=[]) as engine:
        with pytest.raises(RunStoreError, match=f"old-machine.*aeon resume {run_id} --take-over"):
            engine.resume(run_id)
        assert engine.resume(run_id, take_over=True)["status"] == "completed"
    assert ledger_lines(workdir) == [f"{run_id}:{i}" for i in range(1, 4)]


def test_a_run_taken_over_by_another_claim_is_not_overwritten(
    make: Callable[..., Engine], raw: redis.Redis, namespace: str
) -> None:
    """Fencing: once another claim holds the run, this one's commits are refused (writing nothing) and its run
    ends failed."""
    with make() as engine:
        run = engine.start("record three things")
        run.next()  # the plan, committed under this run's claim
        run_key, _, cycles_key = keys_of(namespace, run.run_id)
        raw.hset(run_key, "owner_token", "someone-else")  # a take-over, as another process does it
        result = run.execute()
    assert result.status == "failed"
    assert any("no longer held by this run" in error["message"] for error in result.errors)
    assert raw.hmget(run_key, "status", "cycle", "owner_token") == [b"running", b"1", b"someone-else"]
    assert raw.llen(cycles_key) == 1


def test_a_cycle_that_does_not_follow_the_stored_ones_is_refused(
    make: Callable[..., Engine], raw: redis.Redis, namespace: str
) -> None:
    """Something else appended to the run (a second driver, a hand edit): the next commit writes nothing."""
    with make() as engine:
        run = engine.start("record three things")
        run.next()
        run_key, _, cycles_key = keys_of(namespace, run.run_id)
        raw.rpush(cycles_key, "{}")
        result = run.execute()
    assert result.status == "failed"
    assert any("holds 2 cycle records, not 1" in error["message"] for error in result.errors)
    assert (
        raw.llen(cycles_key) == 2 and raw.lindex(cycles_key, 1) == b"{}"
    )  # the refused commit wrote nothing
    assert raw.hget(run_key, "status") == b"failed"  # and the end of the run is recorded


# --- damaged and foreign data ---------------------------------------------------------------------------------------

DEEP = "[" * 5000 + "]" * 5000
#: (damage, the key the message must name) — keys as (hash, steps, cycles) indexes
DAMAGES: list[tuple[str, Callable[[redis.Redis, tuple[str, str, str]], Any], int]] = [
    ("ttl not a number", lambda r, k: r.hset(k[0], "ttl_remaining", "many"), 0),
    ("negative cycle", lambda r, k: r.hset(k[0], "cycle", "-1"), 0),
    ("request not UTF-8", lambda r, k: r.hset(k[0], "request", b"\xff\x00\xfe"), 0),
    ("no status", lambda r, k: r.hdel(k[0], "status"), 0),
    ("no format", lambda r, k: r.hdel(k[0], "format"), 0),
    ("manifest too deep", lambda r, k: r.hset(k[0], "manifest", DEEP), 0),
    ("step not JSON", lambda r, k: r.hset(k[1], "0", "{not json"), 0),
    ("step not UTF-8", lambda r, k: r.hset(k[1], "0", b"\xff"), 0),
    ("steps not numbered", lambda r, k: r.hset(k[1], "7", "{}"), 0),
    ("a cycle lost", lambda r, k: r.lpop(k[2]), 0),
    ("a cycle not a record", lambda r, k: r.lset(k[2], 0, "[]"), 0),
    ("a cycle too deep", lambda r, k: r.lset(k[2], 0, DEEP), 0),
    ("manifest a list", lambda r, k: r.hset(k[0], "manifest", "[]"), 0),
    ("run hash a string", lambda r, k: (r.delete(k[0]), r.set(k[0], "x")), 0),
    ("steps a list", lambda r, k: (r.delete(k[1]), r.rpush(k[1], "x")), 1),
    ("cycles a hash", lambda r, k: (r.delete(k[2]), r.hset(k[2], "a", "b")), 2),
    ("run hash gone", lambda r, k: r.delete(k[0]), 2),
]


@pytest.mark.parametrize(("damage", "named"), [(d, n) for _, d, n in DAMAGES], ids=[i for i, _, _ in DAMAGES])
def test_damaged_keys_are_corrupt_naming_the_key_and_the_list_still_shows(
    make: Callable[..., Engine], raw: redis.Redis, namespace: str, damage: Any, named: int
) -> None:
    run_id = interrupted(make)
    keys = keys_of(namespace, run_id)
    damage(raw, keys)
    with make(responses=[]) as engine:
        with pytest.raises(
            RunStoreError, match=f"run '{run_id}' in redis://127.0.0.1:.* is corrupt"
        ) as caught:
            engine.resume(run_id)
        assert keys[named] in str(caught.value) and "start it again" in str(caught.value)
        assert "Traceback" not in str(caught.value) and caught.value.__cause__ is None
        with pytest.raises(RunStoreError, match="is corrupt"):
            store_of(engine).load(run_id)
        (summary,) = store_of(engine).list_runs()
    assert summary.run_id == run_id
    json.dumps(summary.to_dict(), ensure_ascii=False).encode("utf-8")  # what `aeon runs --json` prints
    with make(responses=[THREE]) as engine:  # other runs go on
        assert engine.run("record three things")["status"] == "completed"


def test_foreign_keys_where_the_store_writes_are_refused_and_left_alone(
    make: Callable[..., Engine], raw: redis.Redis, namespace: str
) -> None:
    raw.set(f"{namespace}runs", "not an index")
    with make() as engine:
        with pytest.raises(RunStoreError, match=f"'{namespace}runs' is a string.*namespace"):
            store_of(engine).list_runs()
        with pytest.raises(RunStoreError, match=f"the key '{namespace}runs' is a string.*namespace"):
            engine.run("record three things")
    assert raw.get(f"{namespace}runs") == b"not an index"
    assert sorted(raw.keys(f"{namespace}*")) == [f"{namespace}runs".encode()]  # nothing else was written


def test_the_command_line_reports_a_damaged_run_without_a_traceback(
    tmp_path: Path,
    make: Callable[..., Engine],
    raw: redis.Redis,
    redis_url: str,  # noqa: F811
    namespace: str,
) -> None:
    run_id = interrupted(make)
    raw.hset(keys_of(namespace, run_id)[1], "0", "{not json")
    config = tmp_path / "aeon.toml"
    config.write_text(
        '[llm]\nuse = "scripted"\nresponses = []\n'
        f'[state]\nuse = "redis"\nurl = "{redis_url}"\nnamespace = "{namespace}"\n'
    )
    listed = aeon("runs", "--config", str(config), "--json")
    assert listed.returncode == 0 and json.loads(listed.stdout)[0]["run_id"] == run_id
    refused = aeon("resume", run_id, "--config", str(config), "--json")
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert "is corrupt" in refused.stderr and keys_of(namespace, run_id)[1] in refused.stderr


# --- text, secrets, results ---------------------------------------------------------------------------------------


def everything_in(raw: redis.Redis, namespace: str) -> bytes:
    """Every key name and every value under ``namespace``, whatever its type."""
    found = []
    for key in raw.scan_iter(match=f"{namespace}*"):
        found.append(key)
        kind = raw.type(key)
        if kind == b"hash":
            found += [part for pair in raw.hgetall(key).items() for part in pair]
        elif kind == b"list":
            found += raw.lrange(key, 0, -1)
        elif kind == b"zset":
            found += raw.zrange(key, 0, -1)
        else:
            found.append(raw.get(key) or b"")
    return b"\n".join(found)


def test_no_registered_secret_reaches_redis(
    make: Callable[..., Engine], raw: redis.Redis, namespace: str
) -> None:
    register_secret(CANARY)
    echo = plan(tool_step("1", "echo", {"message": f"the key is {CANARY}"}), goal=f"echo {CANARY}")
    with make(responses=[echo]) as engine:
        result = engine.run(f"echo the key is {CANARY}")  # the message is the request's text
        stored = store_of(engine).load(result["run_id"])
    assert result["status"] == "completed"
    everything = everything_in(raw, namespace)
    assert (
        len(everything) > 1000
        and CANARY.encode() not in everything
        and CANARY[:12].encode() not in everything
    )
    assert stored.state.tool_history[0].result == {"message": "the key is ***"}


def test_text_that_is_not_utf8(make: Callable[..., Engine]) -> None:
    """A request from bytes that are not UTF-8 is stored escaped; a run id that is not UTF-8 is no run."""
    request = b"caf\xe9 \xff".decode("utf-8", "surrogateescape")
    with make() as engine:
        assert engine.run(request)["status"] == "completed"
        (summary,) = store_of(engine).list_runs()
        assert summary.request == "caf\\udce9 \\udcff"
        bad = b"\xff\xfe".decode("utf-8", "surrogateescape")
        with pytest.raises(RunStoreError, match=r"no run '\\udcff\\udcfe'"):
            engine.resume(bad)
        with pytest.raises(RunStoreError, match="no run"):
            store_of(engine).load(bad)
        store_of(engine).release(bad)  # nothing held: nothing to do


def test_a_result_that_cannot_be_stored_still_ends_the_run(
    make: Callable[..., Engine],
    raw: redis.Redis,
    redis_url: str,  # noqa: F811
    namespace: str,
) -> None:
    run_id = interrupted(make)
    deep: dict[str, Any] = {}
    for _ in range(5000):
        deep = {"a": deep}
    store = RedisStateStore(redis_url, namespace=namespace)
    store.claim(run_id)
    state = store.load(run_id).state.model_copy(update={"status": "failed"})
    store.finish_run(state, {"status": "failed", "message": "gave up", "answer": deep})
    (summary,) = store.list_runs()
    store.close()
    assert summary.status == "failed"
    assert json.loads(text(raw.hget(keys_of(namespace, run_id)[0], "result")))["message"] == "gave up"


def test_finished_runs_expire_after_ttl_days_and_leave_the_list(
    make: Callable[..., Engine],
    raw: redis.Redis,
    redis_url: str,  # noqa: F811
    namespace: str,
) -> None:
    running = interrupted(make)
    with make(ttl_days=0.5) as engine:
        finished = engine.run("record three things")["run_id"]
    assert all(40_000 < raw.ttl(key) <= 43_200 for key in keys_of(namespace, finished))
    assert all(raw.ttl(key) == -1 for key in keys_of(namespace, running))  # never while it can be resumed
    raw.delete(*keys_of(namespace, finished))  # as expiry leaves it
    store = RedisStateStore(redis_url, namespace=namespace)
    assert [s.run_id for s in store.list_runs()] == [running]
    assert raw.zscore(f"{namespace}runs", finished) is None  # dropped from the index
    with pytest.raises(RunStoreError, match=f"no run '{finished}'"):
        store.load(finished)
    store.close()


# --- connections and secrets in the URL ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "redis://user:{pw}@127.0.0.1:{port}/0",
        "redis://127.0.0.1:{port}/0?password={pw}",
    ],
)
def test_a_server_that_is_down_is_named_without_the_password(url: str) -> None:
    password = "s3cr3t-Pa55w0rd"
    started = time.monotonic()
    port = closed_port()
    with pytest.raises(RunStoreError) as caught:
        RedisStateStore(SecretStr(url.format(pw=password, port=port)), socket_timeout=0.5)
    assert time.monotonic() - started < 2
    assert f"the state store at redis://127.0.0.1:{port}/0 cannot connect" in str(caught.value)
    assert password not in str(caught.value) and caught.value.__cause__ is None
    with pytest.raises(RunStoreError) as caught:
        RedisStateStore(f"redis://127.0.0.1:{port}/0", password=SecretStr(password), socket_timeout=0.5)
    assert password not in str(caught.value)


def test_the_password_option_and_wrong_credentials(
    raw: redis.Redis,
    redis_url: str,  # noqa: F811
    namespace: str,
    workdir: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    user, password = f"aeon-{uuid4().hex[:8]}", "right-Pa55w0rd"
    raw.acl_setuser(user, enabled=True, passwords=[f"+{password}"], keys=["*"], commands=["+@all"])
    try:
        monkeypatch.setenv("AEON_TEST_REDIS_PASSWORD", password)
        url = redis_url.replace("redis://", f"redis://{user}@")
        config = AeonConfig(
            state=Choice(
                "redis",
                {"url": url, "password": {"$env": "AEON_TEST_REDIS_PASSWORD"}, "namespace": namespace},
            )
        ).with_choice("llm", "scripted", responses=[THREE])
        with Engine(config, plugins=[ledger]) as engine:
            assert engine.run("record three things")["status"] == "completed"
            assert password not in repr(store_of(engine))
        with pytest.raises(RunStoreError) as caught:
            RedisStateStore(url, password=SecretStr("wrong-Pa55w0rd"), socket_timeout=1)
        assert "wrong-Pa55w0rd" not in str(caught.value) and "the state store at redis://127.0.0.1:" in str(
            caught.value
        )
    finally:
        raw.acl_deluser(user)


@pytest.mark.parametrize("when", ["before", "after"])
@pytest.mark.parametrize("script", ["create", "write", "claim", "finish"])
def test_a_connection_dropped_around_a_write_is_retried_once_and_never_doubles_it(
    make: Callable[..., Engine], raw: redis.Redis, namespace: str, workdir: Path, script: str, when: str
) -> None:
    """The connection drops before the script is sent, or after it ran (its reply lost): the retry writes it, or
    sees the first attempt's work there; the run goes on as if nothing happened, every cycle stored once."""
    run_id = interrupted(make) if script == "claim" else None
    dropped: list[str] = []
    with make(responses=[] if run_id else None) as engine:
        store = store_of(engine)
        name = "write" if script == "finish" else script
        real = store._scripts[name]

        def flaky(**kwargs: Any) -> Any:
            finishing = kwargs["args"][1] == ""  # a write with no cycle record: the end of the run
            if not dropped and (script != "finish" or finishing):
                dropped.append(when)
                if when == "after":
                    real(**kwargs)
                raise redis.ConnectionError("Connection closed by server.")
            return real(**kwargs)

        store._scripts[name] = flaky  # type: ignore[assignment]
        result = engine.resume(run_id) if run_id else engine.run("record three things")
    assert dropped == [when] and result["status"] == "completed", result.get("errors")
    assert not [e for e in result["errors"] if e.get("phase") == "state_store"], result["errors"]
    _, _, cycles_key = keys_of(namespace, result["run_id"])
    assert raw.llen(cycles_key) == result["final_state"]["cycle"] == 4
    assert raw.hget(keys_of(namespace, result["run_id"])[0], "status") == b"completed"
    assert ledger_lines(workdir) == [f"{result['run_id']}:{i}" for i in range(1, 4)]


def test_a_connection_dropped_twice_is_a_run_store_error(make: Callable[..., Engine]) -> None:
    with make() as engine:
        store = store_of(engine)

        def dropped(**kwargs: Any) -> Any:
            raise redis.ConnectionError("Connection closed by server.")

        store._scripts["create"] = dropped  # type: ignore[assignment]
        with pytest.raises(
            RunStoreError, match=r"cannot record run .*Connection closed by server\. Is the server"
        ):
            engine.run("record three things")


def test_a_server_lost_mid_run_ends_the_run_failed_and_names_it(
    make: Callable[..., Engine], workdir: Path
) -> None:
    binary = shutil.which("redis-server")
    assert binary is not None
    port = _free_port()
    with tempfile.TemporaryDirectory() as scratch:
        server = subprocess.Popen(
            [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--dir", scratch],
            stdout=subprocess.DEVNULL,
        )
        try:
            while not _answers_ping(port):
                time.sleep(0.02)
            config = AeonConfig(
                state=Choice("redis", {"url": f"redis://127.0.0.1:{port}/0", "socket_timeout": 1})
            ).with_choice("llm", "scripted", responses=[THREE])
            with Engine(config, plugins=[ledger]) as engine:
                run = engine.start("record three things")
                run.next()
                server.terminate()
                server.wait()
                result = run.execute()
        finally:
            server.kill()
            server.wait()
    assert result.status == "failed"
    assert any(
        # the URL may show partly as *** when another test in this process registered a secret URL on this host
        "the state store at " in error["message"] and "/0 cannot store cycle 2 of run" in error["message"]
        for error in result.errors
    ), result.errors


# --- configuration ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "options",
    [
        {"namespace": ""},
        {"namespace": 3},
        {"socket_timeout": 0},
        {"ttl_days": 0},
        {"ttl_days": True},
        {"url": 5},
    ],
)
def test_bad_options_are_config_errors(options: dict[str, Any]) -> None:
    with pytest.raises(ConfigError, match="redis state store"):
        RedisStateStore(**options)


def test_a_missing_client_library_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "redis", None)
    with pytest.raises(ConfigError, match=r"pip install 'aeon-core\[redis\]'"):
        RedisStateStore()


def test_listing_plugins_does_not_import_the_client_library() -> None:
    probe = "import sys, aeon_plugins.redis_state; print('redis' in sys.modules)"
    assert (
        subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True).stdout.strip()
        == "False"
    )


if __name__ == "__main__" and sys.argv[1:2] == ["worker"]:
    _worker(*sys.argv[2:])


def test_a_run_waiting_for_approval_is_answered_from_another_engine(
    redis_url: str,  # noqa: F811
    namespace: str,
    workdir: Path,
) -> None:
    """Decision 0021 on the shared store: one engine's run waits; another (another machine's, say) answers it and
    finishes it; the approved call runs once; a second answer finds nothing waiting."""
    ask = Choice("rules", {"ask": [{"name": "two", "tool": "ledger", "arguments": {"n": "^2$"}}]})

    def engine() -> Engine:
        config = AeonConfig(
            ttl=20,
            state=Choice("redis", {"url": redis_url, "namespace": namespace}),
            policies=(ask,),
        ).with_choice("llm", "scripted", responses=[THREE])
        return Engine(config, plugins=[ledger])

    with engine() as first:
        waiting = first.run("record three things")
        assert waiting["status"] == "waiting"
        assert [s.status for s in store_of(first).list_runs()] == ["waiting"]
    run_id = waiting["run_id"]
    assert ledger_lines(workdir) == [f"{run_id}:1"]
    with engine() as second:
        done = second.approve(run_id, by="ops")
        with pytest.raises(RunStoreError, match="already finished"):
            second.approve(run_id)
    assert done["status"] == "completed"
    assert ledger_lines(workdir) == [f"{run_id}:{i}" for i in range(1, 4)]
    decided = [e for e in done["errors"] if e["type"] == "ApprovalDecided"]
    assert [(e["decision"], e["by"]) for e in decided] == [("approved", "ops")]


def test_a_session_goes_on_from_another_engine_on_the_shared_store(
    make: Callable[..., Engine], workdir: Path
) -> None:
    """Issue 29 on Redis: a conversation's turns are runs in the shared store, listed by session, picked up by
    id from another engine (another machine, say)."""
    from aeon_plugins.sessions import Session, sessions, turn_run_id

    with make() as first:
        session = Session(first)
        assert session.ask("record three things")["status"] == "completed"
    with make() as second:
        again = Session(second, session.id)
        assert again.ask("and three more")["status"] == "completed"
        turns = again.turns()
        (listed,) = sessions(store_of(second))
    assert [(t.number, t.message, t.status) for t in turns] == [
        (1, "record three things", "completed"),
        (2, "and three more", "completed"),
    ]
    assert (listed.session_id, listed.turns) == (session.id, 2)
    assert [line.split(":")[0] for line in ledger_lines(workdir)] == [turn_run_id(session.id, 1)] * 3 + [
        turn_run_id(session.id, 2)
    ] * 3
