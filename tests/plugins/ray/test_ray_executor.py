"""The Ray executor (issue 16): the same batch on Ray workers as on the local executor — same results, same
histories, every run in the same state store — with a real local Ray cluster, started once for the module.

The model plans from the request (tests/support/ray_jobs.py), so tasks may end in any order on any worker; the
workers import that plugin by name, and each construction of the model writes its pid to a file, which counts
how often a model was loaded. The tests that need Ray are skipped when it is not installed (it is in ``dev``).
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from aeon_kernel import BackpressureError, ConfigError, Engine
from aeon_kernel.config import AeonConfig, parse_config
from aeon_kernel.kit import LocalExecutor, TaskCancelledError
from aeon_kernel.testing.pytest_plugin import BUILTIN_PLUGINS
from aeon_plugins.ray.executor import RayExecutor, WorkerError, import_ray
from tests.support.ray_jobs import BUILDS_ENV, job

ROOT = Path(__file__).resolve().parents[3]
JOBS = "tests.support.ray_jobs"
#: what every engine here registers, in the driver (as modules) and in the workers (by name)
PLUGINS = [*BUILTIN_PLUGINS, "aeon_plugins.sqlite_state", "aeon_plugins.ray", JOBS]
#: keys whose values differ between two runs of the same request however they ran
VOLATILE = frozenset(
    {"run_id", "timestamp", "duration_ms", "llm_ms", "started", "updated", "seconds", "pid", "host"}
)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A local Ray cluster of 2 CPUs for the module; its workers see ``$AEON_RAY_JOBS_BUILDS``."""
    ray = pytest.importorskip("ray", reason="the ray executor's tests need Ray: pip install 'aeon-core[ray]'")
    builds = tmp_path_factory.mktemp("ray") / "builds.txt"
    previous = os.environ.get(BUILDS_ENV)
    os.environ[BUILDS_ENV] = str(builds)  # before ray.init: the cluster's processes inherit it
    sigterm = signal.getsignal(signal.SIGTERM)  # ray.init replaces it: put back for the tests after these
    started = time.monotonic()
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    seconds = time.monotonic() - started
    print(f"\nlocal Ray cluster started in {seconds:.1f} s")
    try:
        yield {"builds": builds, "address": ray.get_runtime_context().gcs_address, "startup_s": seconds}
    finally:
        ray.shutdown()
        signal.signal(signal.SIGTERM, sigterm)
        if previous is None:
            os.environ.pop(BUILDS_ENV, None)
        else:
            os.environ[BUILDS_ENV] = previous
        deadline = time.monotonic() + 10
        while ray_children(os.getpid()) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not ray.is_initialized() and not ray_children(os.getpid())


def ray_children(pid: int) -> list[str]:
    """The Ray processes (raylet, GCS, workers) below process ``pid``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            status = (entry / "status").read_text()
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        fields = dict(line.split(":\t", 1) for line in status.splitlines() if ":\t" in line)
        if fields.get("State", "").startswith("Z"):
            continue  # exited, not yet reaped
        parent = int(fields.get("PPid", "0").strip() or 0)
        while parent > 1 and parent != pid:
            try:
                parent = int(
                    next(
                        line.split()[1]
                        for line in Path(f"/proc/{parent}/status").read_text().splitlines()
                        if line.startswith("PPid:")
                    )
                )
            except (OSError, StopIteration):
                parent = 0
        if parent == pid and ("ray" in command or "raylet" in command or "gcs_server" in command):
            found.append(command[:80])
    return found


def builds(cluster: dict[str, Any]) -> list[int]:
    path: Path = cluster["builds"]
    return [int(line) for line in path.read_text().split()] if path.exists() else []


def config(tmp_path: Path, **executor: Any) -> AeonConfig:
    chosen = (
        AeonConfig()
        .with_choice("llm", "by_request")
        .with_choice("state", "sqlite", path=str(tmp_path / "runs.db"))
    )
    if executor:
        chosen = chosen.with_choice("executor", "ray", **executor)
    return chosen


def local_engine(chosen: AeonConfig, **options: Any) -> Engine:
    return Engine(
        chosen, plugins=[importlib.import_module(name) for name in PLUGINS], autoload=False, **options
    )


@contextlib.contextmanager
def on_ray(
    chosen: AeonConfig, concurrency: int = 2, replay: Path | None = None, **options: Any
) -> Iterator[RayExecutor]:
    """Ray workers building an engine like ``local_engine(chosen)`` (its plugins go by name)."""
    with (
        local_engine(chosen, replay=replay) as template,
        RayExecutor(template, concurrency, **options) as executor,
    ):
        yield executor


def stable(value: Any) -> Any:
    """``value`` without what differs between two runs of one request (ids, times)."""
    if isinstance(value, dict):
        return {key: stable(item) for key, item in value.items() if key not in VOLATILE}
    if isinstance(value, list):
        return [stable(item) for item in value]
    return value


def the_batch() -> list[str]:
    """20 requests: most complete, one fails at a tool that raises, one asks the model something it chokes on."""
    requests = [job(f"w{i}", steps=1 + i % 3, nap=0.01 * (i % 2)) for i in range(18)]
    return [*requests, job("bad", boom=True), "job {not json"]


def stored(engine: Engine, run_id: str) -> dict[str, Any]:
    run = engine.state_store.load(run_id)
    return {
        "state": stable(run.state.model_dump(mode="json")),
        "entries": [stable(entry.model_dump(mode="json")) for entry in run.entries],
        "model": run.manifest.get("model"),
        "config": run.manifest.get("config_fingerprint"),
    }


# --- configuration, and no Ray --------------------------------------------------------------------------------------


def executor_for(table: dict[str, Any]) -> Any:
    """The executor ``[executor]`` = ``table`` makes (nothing started: Ray is not even imported)."""
    with Engine(parse_config({"executor": table})) as engine:
        return engine.make_executor()


def test_the_executor_table_holds_the_chosen_executors_options() -> None:
    """``[executor]`` chooses a component of the executor kind: ``use`` by registered name, the rest its options,
    checked by its factory when it is made (and by ``aeon plugins --check``)."""
    executor = executor_for({"use": "ray", "address": "auto", "concurrency": 8, "plugins": ["m"]})
    assert isinstance(executor, RayExecutor)
    assert (executor.settings.concurrency, executor.ray_settings.address, executor.ray_settings.plugins) == (
        8,
        "auto",
        ("m",),
    )
    local = executor_for({"max_queued": 3})
    assert isinstance(local, LocalExecutor) and local.settings.max_queued == 3
    for table, message in (
        ({"use": "ray", "address": "auto", "num_cpus": 2}, "num_cpus sizes the local cluster"),
        ({"use": "dask"}, r"no executor named 'dask'.*'local' \(from aeon.kernel\).*'ray'"),
        (
            {"use": "local", "address": "auto"},
            r"'local' .* cannot be built .* unexpected keyword argument 'address'",
        ),
        ({"use": "ray", "workers": 2}, r"the executor 'ray' .* cannot be built with the options"),
        ({"use": "ray", "concurrency": 0}, "concurrency must be a positive integer"),
        ({"use": "ray", "plugins": "m"}, "plugins must be a list"),
    ):
        with pytest.raises(ConfigError, match=message):
            executor_for(table)
    with Engine(parse_config({"executor": {"use": "local", "address": "auto"}})) as engine:
        (problem,) = [p for p in engine.check_components() if p["kind"] == "executors"]
        assert problem["name"] == "local" and "argument 'address'" in problem["error"]


def test_without_ray_installed_the_error_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray now raises ImportError
    with pytest.raises(ConfigError, match=r"pip install 'aeon-core\[ray\]'"):
        import_ray()
    with pytest.raises(ConfigError, match=r"pip install 'aeon-core\[ray\]'"):
        RayExecutor(Engine(AeonConfig()), 1).submit("hello")


def test_importing_aeon_never_imports_ray() -> None:
    code = (
        "import sys, aeon_kernel, aeon_plugins.ray.executor, aeon_cli.batch, aeon_kernel.config\n"
        "aeon_kernel.config.parse_config({'executor': {'use': 'ray'}})\n"
        "print('ray' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "False"


# --- the same batch, local and on Ray ------------------------------------------------------------------------------


def test_the_same_batch_gives_the_same_results_histories_and_runs(
    cluster: dict[str, Any], tmp_path: Path
) -> None:
    chosen = config(tmp_path)
    requests = the_batch()
    with local_engine(chosen) as engine:
        local = dict(engine.map(requests, concurrency=2))
    before = len(builds(cluster))
    with on_ray(chosen) as executor:
        ran = dict(executor.map(requests))
        workers = executor.workers()
    assert sorted(ran) == sorted(local) == list(range(len(requests)))
    statuses = [local[i]["status"] for i in range(len(requests))]
    assert statuses.count("completed") == 18 and statuses[18] == "failed"
    for index in range(len(requests)):
        assert stable(ran[index]) == stable(local[index]), requests[index]  # answers, plans, tool history
    # one model per worker, however many tasks each ran
    pids = builds(cluster)[before:]
    assert sorted(pids) == sorted(worker["pid"] for worker in workers) and len(pids) == 2
    assert sum(worker["tasks"] for worker in workers) == len(requests) and os.getpid() not in pids

    with local_engine(chosen) as reader:  # aeon runs: every run, wherever it ran, with the same history
        listed = {summary.run_id: summary for summary in reader.state_store.list_runs()}
        for index in range(len(requests)):
            local_id, ray_id = local[index]["run_id"], ran[index]["run_id"]
            assert local_id in listed and ray_id in listed and local_id != ray_id
            assert listed[ray_id].status == listed[local_id].status
            assert stored(reader, ray_id) == stored(reader, local_id)
    assert len(listed) == 2 * len(requests)

    # a cassette recorded locally, replayed by the workers: no model is loaded at all (the last request is left
    # out: the model raised on it, so no cassette holds an answer)
    with local_engine(chosen, record=tmp_path / "batch.cassette") as engine:
        list(engine.map(requests[:-1], concurrency=2))
    before = len(builds(cluster))
    with on_ray(chosen, replay=tmp_path / "batch.cassette") as executor:
        replayed = dict(executor.map(requests[:-1]))
    assert builds(cluster)[before:] == []
    for index in range(len(requests) - 1):
        assert stable(replayed[index]) == stable(local[index])


def test_engine_submit_and_map_follow_the_executor_table(cluster: dict[str, Any], tmp_path: Path) -> None:
    before = len(builds(cluster))
    with local_engine(config(tmp_path, concurrency=2)) as engine:
        handle = engine.submit(job("one"))
        assert handle.result(timeout=60)["answer"] == {"value": "one-2"}
        assert isinstance(engine._executor, RayExecutor) and engine._executor.stats()["workers"] == 2
        mapped = dict(engine.map([job(f"m{i}") for i in range(4)]))
        assert {i: r["answer"] for i, r in mapped.items()} == {i: {"value": f"m{i}-2"} for i in range(4)}
    # the driver never loaded the model: the shared executor's 2 workers and map's 2 did
    new = builds(cluster)[before:]
    assert len(new) == 4 and os.getpid() not in new


def test_a_flow_runs_on_ray_workers_as_on_local_threads(cluster: dict[str, Any], tmp_path: Path) -> None:
    from aeon_kernel.kit import LocalExecutor
    from tests.plugins.flow.test_engine import chain, write_flow

    directory = write_flow(
        tmp_path / "flow", chain({"id": "in", "role": "start"}, {"id": "out", "role": "exit"}, name="pass")
    )
    chosen = AeonConfig().with_choice("memory", "in_memory")
    inputs = [{"n": i} for i in range(6)]
    with Engine.from_config_dir(directory, chosen) as flow, LocalExecutor(flow, 2) as local:
        expected = dict(local.map(inputs))
    with Engine(chosen) as template, RayExecutor(template, 2, flow=directory) as executor:
        ran = dict(executor.map(inputs))
        with pytest.raises(Exception, match="must be JSON"):
            executor.submit({"n": float("nan")})  # checked here, before anything is sent
    assert {i: r["output"] for i, r in ran.items()} == {i: {"n": i} for i in range(6)}
    assert {i: stable(r) for i, r in ran.items()} == {i: stable(r) for i, r in expected.items()}


# --- failures, cancelling, backpressure ----------------------------------------------------------------------------


def test_a_task_that_fails_raises_or_kills_its_worker_leaves_the_others_alone(
    cluster: dict[str, Any], tmp_path: Path
) -> None:
    with on_ray(config(tmp_path)) as executor:
        fine = [executor.submit(job(f"f{i}", nap=0.05)) for i in range(4)]
        failed = executor.submit(job("x", boom=True))
        crashed = executor.submit(job("c", crash=True))
        more = [executor.submit(job(f"g{i}")) for i in range(4)]
        assert failed.outcome(timeout=60)["status"] == "failed"
        assert "boom on x-2" in json.dumps(failed.outcome()["errors"])
        assert crashed.outcome(timeout=60)["status"] == "error" and crashed.status == "error"
        with pytest.raises(WorkerError, match="worker running this task was lost"):
            crashed.result()
        for handle in (*fine, *more):
            assert handle.result(timeout=60)["status"] == "completed"
        assert executor.submit(job("after")).result(timeout=60)["status"] == "completed"
        assert executor.stats()["workers"] == 2  # Ray restarted the lost one


def test_cancel_a_queued_task_is_never_sent_and_a_running_one_stops_at_a_cycle_boundary(
    cluster: dict[str, Any], tmp_path: Path
) -> None:
    with on_ray(config(tmp_path), concurrency=1) as executor:
        running = executor.submit(job("long", steps=40, nap=0.02))
        queued = executor.submit(job("never"))
        while running.status != "running":
            time.sleep(0.005)
        time.sleep(0.2)
        assert queued.cancel() and queued.status == "cancelled"
        assert running.cancel()
        outcome = running.outcome(timeout=30)
        assert running.status == "cancelled" and "can be resumed" in outcome["message"]
        assert running.run_id is not None and outcome["run_id"] == running.run_id
        with pytest.raises(TaskCancelledError, match="before it started"):
            queued.result()
        assert [w["tasks"] for w in executor.workers()] == [1]  # the queued task never reached the worker
    with local_engine(config(tmp_path)) as reader:
        assert reader.state_store.load(running.run_id).state.cycle < 40


def test_a_full_queue_blocks_or_raises_as_configured(cluster: dict[str, Any], tmp_path: Path) -> None:
    with on_ray(config(tmp_path), concurrency=1, max_queued=1, on_full="raise") as executor:
        first = executor.submit(job("a", steps=1, nap=0.3))
        while first.status != "running":
            time.sleep(0.005)
        second = executor.submit(job("b", steps=1))
        with pytest.raises(BackpressureError, match="queue is full"):
            executor.submit(job("c"))
        assert executor.stats() == {"queued": 1, "running": 1, "workers": 1}
        started = time.monotonic()
        third = executor.submit(job("c", steps=1), block=True)  # waits for the worker to take "b"
        assert time.monotonic() - started > 0.1
        assert [h.result(timeout=30)["status"] for h in (first, second, third)] == ["completed"] * 3
    with pytest.raises(Exception, match="shut down"):
        executor.submit(job("late"))


def test_a_worker_that_cannot_build_its_engine_stops_the_start(
    cluster: dict[str, Any], tmp_path: Path
) -> None:
    with local_engine(config(tmp_path)) as template:
        executor = RayExecutor(template, 1, plugins=["tests.support.no_such_module"])
        with pytest.raises(ConfigError, match=r"could not build its Engine: .*no_such_module.*PYTHONPATH"):
            executor.start()
        executor.shutdown()


# --- aeon batch --executor ray -------------------------------------------------------------------------------------


def test_aeon_batch_on_ray_writes_what_the_local_executor_writes(
    cluster: dict[str, Any], tmp_path: Path
) -> None:
    """The CLI end to end, in subprocesses: the same batch with --executor local and with --executor ray
    --address (the module's cluster), the workers getting the plugin through [executor] runtime_env."""
    site = tmp_path / "site"
    info = site / "ray_jobs-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: ray-jobs\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[aeon]\nray_jobs = {JOBS}\n")
    path = os.pathsep.join([str(site), str(ROOT)])
    (tmp_path / "aeon.toml").write_text(
        '[llm]\nuse = "by_request"\n[state]\nuse = "sqlite"\npath = "runs.db"\n'
        f'[executor]\nuse = "ray"\nconcurrency = 2\nruntime_env = {{ env_vars = {{ PYTHONPATH = "{path}" }} }}\n'
    )
    lines = [{"id": f"r{i}", "request": job(f"w{i}", steps=1 + i % 2)} for i in range(10)]
    lines.append({"id": "bad", "request": job("bad", boom=True)})
    (tmp_path / "requests.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    env = {**os.environ, "PYTHONPATH": path, "AEON_DATA_DIR": str(tmp_path / "data")}
    env.pop("AEON_CONFIG", None)

    def aeon(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "aeon_cli", *args],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )

    local = aeon("batch", "requests.jsonl", "--out", "local.jsonl", "--executor", "local")
    remote = aeon("batch", "requests.jsonl", "--out", "ray.jsonl", "--address", cluster["address"])
    for proc in (local, remote):
        assert proc.returncode == 1, proc.stderr  # the one that fails
        assert "batch done: 10 completed, 1 failed" in proc.stderr and "Traceback" not in proc.stderr
        assert "runs recorded: state in runs.db" in proc.stderr

    def written(name: str) -> dict[str, dict[str, Any]]:
        rows = [json.loads(line) for line in (tmp_path / name).read_text().splitlines()]
        return {row["id"]: row for row in rows}

    local_rows, ray_rows = written("local.jsonl"), written("ray.jsonl")
    assert {k: stable(v) for k, v in ray_rows.items()} == {k: stable(v) for k, v in local_rows.items()}
    runs = aeon("runs", "--json")
    assert runs.returncode == 0, runs.stderr
    listed = {run["run_id"] for run in json.loads(runs.stdout)}
    assert listed == {row["run_id"] for row in (*local_rows.values(), *ray_rows.values())}
    records = [json.loads(line) for line in (tmp_path / "data" / "runs.jsonl").read_text().splitlines()]
    logged = {record["run_id"] for record in records if "step_number" in record}
    assert logged == listed  # the workers appended their cycles to the batch's log too


# --- starting and stopping a cluster of its own --------------------------------------------------------------------

OWN_CLUSTER = """
import json, os, sys, time
sys.path[:0] = [sys.argv[1]]
from aeon_kernel.config import AeonConfig
from aeon_plugins.ray.executor import RayExecutor
from aeon_kernel.testing.pytest_plugin import BUILTIN_PLUGINS
from tests.plugins.ray.test_ray_executor import ray_children
from tests.support.ray_jobs import job
import ray

import importlib
from aeon_kernel import Engine
plugins = [importlib.import_module(name) for name in [*BUILTIN_PLUGINS, "tests.support.ray_jobs"]]
template = Engine(AeonConfig().with_choice("llm", "by_request"), plugins=plugins, autoload=False)
executor = RayExecutor(template, 2, num_cpus=1)
answers = [r["answer"] for _, r in sorted(executor.map([job("a"), job("b"), job("c")]))]
during = ray_children(os.getpid())
executor.shutdown()
deadline = time.monotonic() + 10
while ray_children(os.getpid()) and time.monotonic() < deadline:
    time.sleep(0.1)
print(json.dumps({"answers": answers, "during": len(during), "initialized": ray.is_initialized(),
                  "after": ray_children(os.getpid()), "startup": executor.startup}))
"""


def test_without_an_address_the_executor_starts_a_local_cluster_and_stops_it(
    cluster: dict[str, Any], tmp_path: Path
) -> None:
    """In a process of its own (this one is connected to the module's cluster): shutdown leaves no Ray process."""
    proc = subprocess.run(
        [sys.executable, "-c", OWN_CLUSTER, str(ROOT)],
        cwd=ROOT,
        env={k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", BUILDS_ENV)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["answers"] == [{"value": f"{w}-2"} for w in "abc"]
    assert report["during"] > 0 and not report["initialized"] and report["after"] == []
    print(f"own cluster: {report['startup']}")
