"""Many tasks at once on a Ray cluster (spec 004 §10.8/§10.12): ``[executor] use = "ray"``.

:class:`RayExecutor` is an :class:`~aeon_kernel.runtime.executor.Executor` (``submit``, ``shutdown``, ``stats``
here; ``map``, ``asubmit``, ``amap`` from the base) whose tasks run in ``concurrency`` Ray actors: worker processes
that each build an Engine like the one given — its configuration, plugins and cassette — once (the model is loaded
once per worker, not per task), then run one task at a time with :func:`~aeon_kernel.runtime.tasks.drive`, as a
local worker thread does, so results are the same dicts. The submitter keeps the same TaskHandles: a task waits
here, in a queue of at most ``max_queued`` (``submit`` blocks or raises BackpressureError when full), until a
worker is free; a thread waiting on ``ray.wait`` resolves its handle.

Cancelling: a queued task is never sent; a running one is told to stop at its next cycle boundary through the
worker's second (control) thread. ``ray.cancel`` cannot stop a running task of a threaded actor, and its
TaskCancelledError would lose what the run did. A task whose worker process dies is an ``error`` (WorkerError);
Ray restarts the worker, which builds its Engine again, and the other tasks go on.

A worker resolves relative paths of ``aeon.toml`` from the submitter's working directory when it exists on its
machine. Runs are recorded by the workers in ``[state]``: one SQLite file serves the workers of one machine;
across machines use a shared store (``[state] use = "redis"``) so that ``aeon runs`` / ``aeon resume`` see every
run. Ray is imported only when an executor starts, never by ``import aeon_kernel``.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import os
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Final, Self

from aeon_kernel import BackpressureError, TaskHandle
from aeon_kernel.errors import ConfigError, OrchestrationError
from aeon_kernel.kit import (
    DEFAULT_CONCURRENCY,
    Executor,
    ExecutorSettings,
    FlowTasks,
    OnFull,
    RequestTasks,
    error_outcome,
)
from aeon_plugins.ray.worker import Worker, WorkerSpec, load_plugin

log = logging.getLogger("aeon")

INSTALL: Final = "pip install 'aeon-core[ray]'"
#: how long the result thread waits on ``ray.wait`` before it looks at new tasks and cancellations again
_POLL: Final = 0.01
#: how often Ray restarts a worker whose process died (it builds its Engine again each time)
_RESTARTS: Final = 3


class WorkerError(OrchestrationError):
    """A task raised in its Ray worker an exception that could not travel back as it is, or the worker's process
    was lost while it ran the task; the message names the original."""


@dataclass(frozen=True)
class RaySettings:
    """Where the Ray workers run and what each one loads: the ``[executor]`` keys of the ray executor."""

    #: ``"auto"`` (a cluster started on this machine with ``ray start --head``), ``"ray://HOST:10001"`` (a
    #: remote head's Ray Client port), a head's ``HOST:6379``; None: ``$RAY_ADDRESS``, else a local cluster
    #: started for this executor and stopped with it
    address: str | None = None
    #: CPUs of the local cluster started when there is no address (default: the machine's)
    num_cpus: int | None = None
    #: CPUs each worker reserves (default: none, Ray's default for actors; set it to the model's threads)
    worker_cpus: float | None = None
    #: plugins each worker registers besides its installed ones: ``"module"`` or ``"module:attribute"``
    plugins: tuple[str, ...] = ()
    #: Ray's ``runtime_env`` for the job (``working_dir``, ``pip``, ``env_vars``, ...)
    runtime_env: dict[str, Any] | None = None
    #: seconds to wait for every worker to build its Engine
    start_timeout: float = 300.0

    def __post_init__(self) -> None:
        if self.address is not None and (not isinstance(self.address, str) or not self.address.strip()):
            raise ConfigError(
                f'the ray executor\'s address must be "auto", "ray://HOST:PORT" or HOST:PORT, got '
                f"{self.address!r}"
            )
        if self.num_cpus is not None and (
            not isinstance(self.num_cpus, int) or isinstance(self.num_cpus, bool) or self.num_cpus < 1
        ):
            raise ConfigError(
                f"the ray executor's num_cpus must be a positive integer, got {self.num_cpus!r}"
            )
        if self.num_cpus is not None and self.address not in (None, "local"):
            raise ConfigError(
                "the ray executor's num_cpus sizes the local cluster Aeon starts when there is no address; a "
                "cluster at an address has its own size: remove num_cpus, or the address"
            )
        for key in ("worker_cpus", "start_timeout"):
            value = getattr(self, key)
            if value is not None and (
                not isinstance(value, int | float) or isinstance(value, bool) or value < 0
            ):
                raise ConfigError(f"the ray executor's {key} must be a number >= 0, got {value!r}")
        if not isinstance(self.plugins, tuple | list) or not all(
            isinstance(spec, str) and spec.strip() for spec in self.plugins
        ):
            raise ConfigError(
                'the ray executor\'s plugins must be a list of "module" or "module:attribute" names, got '
                f"{self.plugins!r}"
            )
        if self.runtime_env is not None and not isinstance(self.runtime_env, dict):
            raise ConfigError(f"the ray executor's runtime_env must be a table, got {self.runtime_env!r}")


def import_ray() -> Any:
    """The ``ray`` module, or a ConfigError saying how to install it."""
    try:
        import ray
    except ImportError as exc:
        raise ConfigError(
            f"the ray executor needs Ray, which is not installed ({exc}): {INSTALL}, or use the local executor"
        ) from None
    return ray


# --- the submitter's side ------------------------------------------------------------------------------------------


@dataclass
class _Slot:
    """A worker as the executor sees it."""

    actor: Any
    busy: TaskHandle | None = None
    key: int = -1
    #: a cancel was sent for the task it runs
    told: bool = False
    #: the worker's process died; a probe (``ready``) tells whether Ray brought it back
    lost: bool = False
    dead: bool = False
    pids: list[int] = field(default_factory=list)


class RayExecutor(Executor):
    """Tasks run by ``concurrency`` Ray workers, each building an Engine like ``source`` once.

    :param source: an Engine (tasks are requests) or a FlowEngine (tasks are its flow's inputs): each worker builds
        one of its class from its configuration, plugins (a module by its name, another object pickled),
        ``autoload`` and replayed cassette. Nothing of it is built here.
    :param concurrency: workers, hence tasks running at once.
    :param max_queued: tasks waiting here for a worker (default: twice ``concurrency``).
    :param on_full: what ``submit`` does when that many wait: ``block`` or ``raise`` (BackpressureError).
    :param address: the cluster (:attr:`RaySettings.address`); Ray already initialised in this process is used
        as it is.
    :param num_cpus: CPUs of the local cluster started when there is no address.
    :param worker_cpus: CPUs each worker reserves (the model's threads, say).
    :param plugins: import names (``"module"``, ``"module:attribute"``) of plugins the workers register besides.
    :param runtime_env: Ray's runtime_env for the job (code and packages the workers need).
    :param flow: a flow directory the workers build on an Engine source (nothing of the flow is built here).
    :param sinks: telemetry sinks each worker's engine adds, ``(name, options)``.
    :param cwd: where the workers resolve relative paths (default: this process's working directory).
    :param tasks: wraps the tasks each worker runs (and the check ``submit`` makes here): a callable taking the
        worker's :class:`~aeon_kernel.kit.Tasks` and returning the Tasks it runs instead — a class or function of a
        module the workers can import (it travels by reference), or its import name ``"module:attribute"``. How a
        submitter sends items of its own kind (``aeon batch`` sends its lines, each with the run id it chose).

    The workers start with the first task, or :meth:`start`, which waits until each has built its Engine and
    raises ConfigError naming one that could not. ``shutdown`` closes the workers' engines, ends the workers,
    and stops the local cluster if this executor started it.
    """

    def __init__(
        self,
        source: Any,
        concurrency: int = DEFAULT_CONCURRENCY,
        *,
        max_queued: int | None = None,
        on_full: OnFull = "block",
        address: str | None = None,
        num_cpus: int | None = None,
        worker_cpus: float | None = None,
        plugins: Sequence[str] = (),
        runtime_env: dict[str, Any] | None = None,
        start_timeout: float = 300.0,
        flow: str | Path | None = None,
        sinks: Sequence[tuple[str, dict[str, Any]]] = (),
        cwd: str | Path | None = None,
        tasks: Any = None,
    ) -> None:
        self.settings = ExecutorSettings(concurrency, max_queued, on_full)
        if not isinstance(plugins, (list, tuple)):  # a string is not a list of names (aeon.toml)
            raise ConfigError(
                f'the ray executor\'s plugins must be a list of "module" or "module:attribute" names, got {plugins!r}'
            )
        self.ray_settings = RaySettings(
            address, num_cpus, worker_cpus, tuple(plugins), runtime_env, start_timeout
        )
        engine = source.engine if hasattr(source, "flow") and hasattr(source, "engine") else source
        if engine is not source and flow is None:
            flow = source.flow.directory
        if getattr(engine, "record", None) is not None:
            raise ConfigError(
                "recording a cassette needs every model call in one process: record it with the local "
                "executor, then replay it on Ray"
            )
        given = (
            p.__name__ if isinstance(p, ModuleType) else p for p in getattr(engine, "_given_plugins", ())
        )
        replay = getattr(engine, "replay", None)
        self.spec = WorkerSpec(
            type(engine),
            engine.config,
            flow=str(Path(flow).resolve()) if flow is not None else None,
            plugins=(*given, *plugins),
            autoload=getattr(engine, "_autoload", None),
            replay=str(Path(replay).resolve()) if replay is not None else None,
            sinks=tuple((name, dict(options)) for name, options in sinks),
            cwd=str(cwd) if cwd is not None else os.getcwd(),
            tasks=tasks,
        )
        host: Any = None
        inner = FlowTasks(host) if flow is not None else RequestTasks(host)
        self._check = (load_plugin(tasks)(inner) if tasks is not None else inner).check
        self._cond = threading.Condition()
        self._starting = threading.Lock()
        self._queue: collections.deque[TaskHandle] = collections.deque()
        self._slots: list[_Slot] = []
        self._refs: dict[Any, _Slot] = {}  # a task's (or a probe's) object ref -> its worker
        self._next_key = 0
        self._thread: threading.Thread | None = None
        self._owns_ray = self._started = self._closed = False
        #: seconds the last ``start`` took: connecting to (or starting) the cluster, and the workers' engines
        self.startup: dict[str, float] = {}

    # --- the Executor API --------------------------------------------------------------------------------------

    def start(self) -> Self:
        """Connect to (or start) the cluster and start the workers, each building its Engine; return once all
        are ready. A ConfigError says what stopped one. Called by the first ``submit`` when not called before."""
        with self._starting:
            if self._started:
                return self
            if self._closed:
                raise OrchestrationError("the executor is shut down and takes no more tasks: make a new one")
            ray = import_ray()
            began = time.monotonic()
            self._owns_ray = _connect(ray, self.ray_settings)
            connected = time.monotonic()
            try:
                self._slots = self._start_workers(ray)
            except BaseException:
                self._stop_ray(ray)
                raise
            self.startup = {
                "connect_s": round(connected - began, 3),
                "workers_s": round(time.monotonic() - connected, 3),
            }
            self._thread = threading.Thread(target=self._loop, name="aeon-ray-results", daemon=True)
            self._thread.start()
            self._started = True
        return self

    def submit(
        self,
        item: Any,
        *,
        ttl: int | None = None,
        deadline: float | None = None,
        block: bool | None = None,
        timeout: float | None = None,
    ) -> TaskHandle:
        self._check(item)
        if not self._started:
            self.start()
        handle = TaskHandle(item, ttl=ttl, deadline=deadline)
        handle._withdraw = self._withdraw
        wait = self.settings.on_full == "block" if block is None else block
        size = self.settings.queue_size
        with self._cond:
            if wait:
                room = self._cond.wait_for(lambda: self._closed or len(self._queue) < size, timeout)
                if not room:
                    raise BackpressureError(size, self._busy())
            if self._closed:
                raise OrchestrationError("the executor is shut down and takes no more tasks: make a new one")
            if len(self._queue) >= size:
                raise BackpressureError(size, self._busy())
            self._queue.append(handle)
            self._cond.notify_all()
        return handle

    def shutdown(self, *, wait: bool = True, cancel: bool = False) -> None:
        with self._cond:
            self._closed = True
            dropped = list(self._queue) if cancel else []
            running = [slot.busy for slot in self._slots if slot.busy is not None] if cancel else []
            self._cond.notify_all()
        for handle in (*dropped, *running):
            handle.cancel()
        if not self._started:
            with self._starting:  # a start under way finishes first
                pass
            if not self._started:
                return
        if wait and self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()

    @property
    def waits_when_full(self) -> bool:
        return self.settings.on_full == "block"

    def stats(self) -> dict[str, int]:
        with self._cond:
            workers = sum(1 for slot in self._slots if not slot.dead)
            return {"queued": len(self._queue), "running": self._busy(), "workers": workers}

    def workers(self) -> list[dict[str, Any]]:
        """Each live worker's pid, how many tasks it ran, and the problem it had building its Engine (if any)."""
        ray = import_ray()
        with self._cond:
            actors = [slot.actor for slot in self._slots if not slot.dead]
        info: list[dict[str, Any]] = ray.get([actor.info.remote() for actor in actors], timeout=60)
        return info

    # --- internals ---------------------------------------------------------------------------------------------

    def _busy(self) -> int:
        return sum(1 for slot in self._slots if slot.busy is not None)

    def _start_workers(self, ray: Any) -> list[_Slot]:
        options: dict[str, Any] = {"max_concurrency": 2, "max_restarts": _RESTARTS, "max_task_retries": 0}
        if self.ray_settings.worker_cpus is not None:
            options["num_cpus"] = self.ray_settings.worker_cpus
        actor_class = ray.remote(Worker).options(**options)
        actors = [actor_class.remote(self.spec) for _ in range(self.settings.concurrency)]
        slots = [_Slot(actor) for actor in actors]
        probes = [actor.ready.remote() for actor in actors]
        try:
            _, waiting = ray.wait(probes, num_returns=len(probes), timeout=self.ray_settings.start_timeout)
            if waiting:
                raise ConfigError(
                    f"{len(waiting)} of {len(probes)} Ray workers had not started after "
                    f"{self.ray_settings.start_timeout:g} s: the cluster may lack the resources each asks for "
                    f"(worker_cpus = {self.ray_settings.worker_cpus}), or loading the model takes longer "
                    "(raise start_timeout)"
                )
            reports = ray.get(probes)
        except BaseException:
            for actor in actors:
                with contextlib.suppress(Exception):
                    ray.kill(actor, no_restart=True)
            raise
        problems = [report for report in reports if report["problem"]]
        if problems:
            for actor in actors:
                with contextlib.suppress(Exception):
                    ray.kill(actor, no_restart=True)
            first = problems[0]
            raise ConfigError(
                f"the Ray worker on {first['host']} (pid {first['pid']}) could not build its Engine: "
                f"{first['problem']}"
            )
        for slot, report in zip(slots, reports, strict=True):
            slot.pids.append(report["pid"])
        return slots

    def _withdraw(self, handle: TaskHandle) -> None:
        """A queued task was cancelled: it is never sent, and its place is free at once."""
        with self._cond:
            with contextlib.suppress(ValueError):
                self._queue.remove(handle)
            self._cond.notify_all()

    def _loop(self) -> None:
        """The result thread: send queued tasks to free workers, pass on cancellations, resolve what ended."""
        ray = import_ray()
        try:
            while True:
                orphans: list[TaskHandle] = []
                with self._cond:
                    self._dispatch()
                    if not self._refs:
                        if self._closed and not self._queue:
                            break
                        if not self._queue or not all(slot.dead for slot in self._slots):
                            self._cond.wait()  # for a task, or the shutdown
                            continue
                        orphans = list(self._queue)
                        self._queue.clear()
                        self._cond.notify_all()
                    refs = list(self._refs)
                if orphans:
                    _fail(
                        orphans,
                        WorkerError("every Ray worker died and could not be restarted; see their logs"),
                    )
                    continue
                ready, rest = ray.wait(refs, num_returns=1, timeout=_POLL)
                if ready and rest:
                    more, _ = ray.wait(rest, num_returns=len(rest), timeout=0)
                    ready += more
                for ref in ready:
                    self._settle(ray, ref)
        except BaseException as exc:  # a bug here must not leave submitters waiting for ever
            log.exception("the Ray executor's result thread failed")
            self._fail_all(exc)
        finally:
            self._stop_workers(ray)
            self._stop_ray(ray)

    def _dispatch(self) -> None:
        """Under the lock: send queued tasks to free workers, and a cancel to workers whose task was cancelled."""
        for slot in self._slots:
            if slot.busy is not None and slot.busy.cancel_requested and not slot.told:
                slot.told = True
                slot.actor.cancel.remote(slot.key)
        free = [slot for slot in self._slots if slot.busy is None and not slot.lost and not slot.dead]
        while free and self._queue:
            handle = self._queue.popleft()
            self._cond.notify_all()  # a submitter waiting for room
            if not handle._begin():
                continue  # cancelled meanwhile
            slot = free.pop()
            self._next_key += 1
            slot.busy, slot.key, slot.told = handle, self._next_key, False
            ref = slot.actor.run.remote(slot.key, handle.item, handle.ttl, handle.deadline)
            self._refs[ref] = slot

    def _settle(self, ray: Any, ref: Any) -> None:
        with self._cond:
            slot = self._refs.pop(ref)
            handle, slot.busy = slot.busy, None
            self._cond.notify_all()
        if handle is None:  # a probe: did Ray bring the worker back?
            try:
                report = ray.get(ref)
            except Exception:
                slot.dead = True
                log.warning("a Ray worker died and could not be restarted; %d left", self.stats()["workers"])
            else:
                slot.lost = False
                slot.pids.append(report["pid"])
            return
        try:
            report = ray.get(ref)
        except ray.exceptions.RayActorError as exc:
            error = WorkerError(
                f"the Ray worker running this task was lost ({type(exc).__name__}: {_first_line(exc)}); the "
                "task did not finish. Ray restarts the worker; submit the task again"
            )
            handle._finish("error", error_outcome(None, error), error)
            with self._cond:
                slot.lost = True
                self._refs[slot.actor.ready.remote()] = slot
            return
        except Exception as exc:
            error = WorkerError(f"the Ray task failed: {type(exc).__name__}: {_first_line(exc)}")
            handle._finish("error", error_outcome(None, error), error)
            return
        if report["run_id"]:
            handle._started(report["run_id"])
        error = report["error"]
        if report["status"] == "error" and error is None:
            error = WorkerError(report["outcome"]["message"])
        handle._finish(report["status"], report["outcome"], error)

    def _fail_all(self, exc: BaseException) -> None:
        with self._cond:
            self._closed = True
            handles = [*self._queue, *(slot.busy for slot in self._slots if slot.busy is not None)]
            self._queue.clear()
            self._refs.clear()
            self._cond.notify_all()
        _fail(handles, WorkerError(f"the Ray executor failed: {type(exc).__name__}: {exc}"))

    def _stop_workers(self, ray: Any) -> None:
        actors = [slot.actor for slot in self._slots if not slot.dead]
        with contextlib.suppress(Exception):  # the engines close (sinks flushed, stores released)
            ray.get([actor.close.remote() for actor in actors], timeout=30)
        for actor in actors:
            with contextlib.suppress(Exception):
                ray.kill(actor, no_restart=True)

    def _stop_ray(self, ray: Any) -> None:
        if self._owns_ray:
            self._owns_ray = False
            with contextlib.suppress(Exception):
                ray.shutdown()


def _connect(ray: Any, settings: RaySettings) -> bool:
    """Connect to the cluster ``settings`` names, or start a local one; whether this call initialised Ray (and
    so must shut it down)."""
    if ray.is_initialized():
        return False
    address = settings.address or os.environ.get("RAY_ADDRESS") or "local"
    options: dict[str, Any] = {"address": address, "log_to_driver": False}
    if settings.runtime_env is not None:
        options["runtime_env"] = settings.runtime_env
    if address == "local":
        options.update(num_cpus=settings.num_cpus, include_dashboard=False)
    try:
        ray.init(**options)
    except (ConnectionError, RuntimeError, ValueError, TimeoutError) as exc:
        where = (
            "start a local Ray cluster"
            if address == "local"
            else f"connect to the Ray cluster at {address!r}"
        )
        hint = (
            'Check that it runs (`ray start --head` here: address = "auto"; a remote head: ray://HOST:10001, '
            "its Ray Client port), or leave address unset to start a local cluster. A cluster with token "
            "authentication (Ray's default) also needs RAY_AUTH_MODE=token here and its token "
            "(~/.ray/auth_token, or $RAY_AUTH_TOKEN)"
            if address != "local"
            else "see the Ray logs under /tmp/ray/session_latest/logs"
        )
        raise ConfigError(f"cannot {where}: {type(exc).__name__}: {_first_line(exc)}. {hint}") from None
    except ImportError as exc:  # ray:// needs the Ray Client (grpcio)
        raise ConfigError(
            f"connecting to {address!r} needs the Ray Client ({exc}): {INSTALL} (it brings ray[client])"
        ) from None
    return True


def _fail(handles: Iterable[TaskHandle], error: WorkerError) -> None:
    for handle in handles:
        handle._begin()
        handle._finish("error", error_outcome(None, error), error)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
