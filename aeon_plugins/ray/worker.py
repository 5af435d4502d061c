"""What runs in a Ray worker (:mod:`aeon_plugins.ray.executor`): the :class:`Worker` actor, which builds
an Engine like the submitter's once — from a :class:`WorkerSpec` sent as it starts — then runs one task at a
time, a second thread reaching the running task to cancel it.

Kept apart from the submitter's side so that what a worker process imports and does can be read on its own: it
never imports Ray (Ray imports it, by reference, when it starts the actor).
"""

from __future__ import annotations

import copy
import importlib
import os
import socket
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from aeon_kernel import TaskHandle
from aeon_kernel.errors import ConfigError
from aeon_kernel.kit import drive, error_outcome, tasks_for

if TYPE_CHECKING:
    from aeon_kernel import AeonConfig


@dataclass(frozen=True)
class WorkerSpec:
    """What a worker builds its Engine from: sent to every worker once, as it starts."""

    #: the Engine class (sent by reference: the workers import it)
    factory: Any
    config: AeonConfig
    #: a flow directory: the worker builds ``factory.from_config_dir(flow, config)`` and runs the flow's inputs
    flow: str | None = None
    #: import names (``"module"``, ``"module:attribute"``) or picklable plugin objects
    plugins: tuple[Any, ...] = ()
    autoload: bool | None = None
    #: a cassette the workers replay instead of loading the configured model
    replay: str | None = None
    #: telemetry sinks added to each worker's engine: ``(name, options)``
    sinks: tuple[tuple[str, dict[str, Any]], ...] = ()
    #: the submitter's working directory: a worker starts there when it exists on its machine
    cwd: str | None = None
    #: wraps the worker's tasks (``RayExecutor``'s ``tasks``): a callable, or its import name
    tasks: Any = None


def load_plugin(spec: Any) -> Any:
    """A plugin object from an import name (``"module"`` or ``"module:attribute"``); any other object as it is."""
    if not isinstance(spec, str):
        return spec
    module_name, _, attribute = spec.partition(":")
    try:
        value: Any = importlib.import_module(module_name)
        for part in filter(None, attribute.split(".")):
            value = getattr(value, part)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(
            f"the plugin {spec!r} cannot be loaded in the Ray worker on {socket.gethostname()}: {exc}. Install "
            "it there, or put its directory on the workers' PYTHONPATH (runtime_env)"
        ) from None
    return value


def build_source(spec: WorkerSpec) -> Any:
    """The Engine (or FlowEngine) a worker runs its tasks on, every component built now."""
    plugins = [load_plugin(plugin) for plugin in spec.plugins]
    if spec.flow is not None:
        flow = spec.factory.from_config_dir(
            spec.flow, spec.config, plugins=plugins, autoload=spec.autoload, replay=spec.replay
        )
        for name, options in spec.sinks:
            flow.engine.add_sink(name, **options)
        return flow
    engine = spec.factory(spec.config, plugins=plugins, autoload=spec.autoload, replay=spec.replay)
    try:
        engine.check_choices()
        for name, options in spec.sinks:
            engine.add_sink(name, **options)
        engine.build_selected()  # the model is loaded here, once for this worker
    except BaseException:
        engine.close()
        raise
    return engine


class Worker:
    """One worker slot (a Ray actor): its Engine built once, then one task at a time.

    The actor has two threads: ``run`` executes in one, and ``cancel`` can reach the running task from the other.
    A problem building the Engine does not kill the actor: ``ready`` reports it, and the executor raises it.
    """

    def __init__(self, spec: WorkerSpec) -> None:
        self.pid = os.getpid()
        self.tasks_run = 0
        self.problem: str | None = None
        self._lock = threading.Lock()
        self._running: dict[int, TaskHandle] = {}
        self._cancelled: set[int] = set()
        self.source: Any = None
        if spec.cwd and os.path.isdir(spec.cwd):
            os.chdir(spec.cwd)
        try:
            self.source = build_source(spec)
            self.tasks = tasks_for(self.source)
            if spec.tasks is not None:
                self.tasks = load_plugin(spec.tasks)(self.tasks)
        except Exception as exc:
            from aeon_kernel.kit import scrub_secrets

            self.problem = scrub_secrets(f"{type(exc).__name__}: {exc}")

    def ready(self) -> dict[str, Any]:
        return {"pid": self.pid, "host": socket.gethostname(), "problem": self.problem}

    def run(self, key: int, item: Any, ttl: int | None, deadline: float | None) -> dict[str, Any]:
        """Run one task to its end; its status, outcome, run id, and exception (when it raised)."""
        handle = TaskHandle(item, ttl=ttl, deadline=deadline)
        with self._lock:
            self._running[key] = handle
            cancelled = key in self._cancelled
            self._cancelled.discard(key)
        if cancelled:
            handle.cancel()
        if self.problem is not None:
            handle._begin()
            handle._finish("error", error_outcome(None, ConfigError(self.problem)), ConfigError(self.problem))
        else:
            try:
                drive(handle, self.tasks)
            finally:
                with self._lock:
                    self._running.pop(key, None)
            self.tasks_run += 1
        error = handle._error
        return {
            "status": handle.status,
            "outcome": handle.outcome(),
            "run_id": handle.run_id,
            "error": error if error is None or _travels(error) else None,
            "pid": self.pid,
        }

    def cancel(self, key: int) -> bool:
        """Stop task ``key`` at its next cycle boundary (before it starts, if it has not yet)."""
        with self._lock:
            handle = self._running.get(key)
            if handle is None:
                self._cancelled.add(key)
                return False
        return handle.cancel()

    def info(self) -> dict[str, Any]:
        return {"pid": self.pid, "tasks": self.tasks_run, "problem": self.problem}

    def close(self) -> None:
        if self.source is not None:
            self.source.close()
            self.source = None


def _travels(error: BaseException) -> bool:
    """Whether an exception can be rebuilt from its parts, as it must be to travel back and be raised again by
    ``result()`` (a copy rebuilds it the way Ray's serialisation does: an exception whose ``__init__`` takes
    other arguments than its message cannot be)."""
    try:
        copy.deepcopy(error)
    except Exception:
        return False
    return True
