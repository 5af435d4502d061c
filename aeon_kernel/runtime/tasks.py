"""A task: one request (or one flow input) handed to an executor, and the handle its submitter keeps (spec 004
§10.8/§10.12).

Each task is its own :class:`~aeon_kernel.runtime.run.Run` — its own plan, state, history, telemetry records
and artifacts, keyed by its run id — so nothing one task does reaches another. The handle is the submitter's
view of it: ``status``, ``run_id`` once started, ``result()``, ``cancel()``. It knows nothing of threads: the
local executor drives it in a worker thread, and another executor (Ray, say) can drive it elsewhere and report
back through the same three calls (``_begin``, ``_started``, ``_finish``).

What a task *is* — how to start its run and what its result looks like — is a :class:`Tasks`: requests on an
:class:`~aeon_kernel.engine.Engine`, or inputs of a flow on a ``FlowEngine``. Both are reached through the small
protocols below, so this module imports neither (runtime/ knows no plan or flow code).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from typing import Any, Final, Literal, Protocol

from aeon_kernel.errors import AeonError, ValidationError
from aeon_kernel.runtime.context import error_record
from aeon_kernel.runtime.run import Run

log = logging.getLogger("aeon")

#: ``queued`` → ``running`` → how it ended: the run's own status (``completed``, ``failed``, ``ttl_expired``, or
#: ``waiting``: it stopped for a person's approval, its worker freed, and ``Engine.approve`` goes on),
#: ``cancelled`` (never started, or stopped at a cycle boundary), or ``error`` (it raised instead of ending:
#: the run could not be started, say)
TaskStatus = Literal[
    "queued", "running", "waiting", "completed", "failed", "ttl_expired", "cancelled", "error"
]
FINISHED: Final[frozenset[str]] = frozenset(
    {"waiting", "completed", "failed", "ttl_expired", "cancelled", "error"}
)


class TaskCancelledError(AeonError):
    """``result()`` of a task that was cancelled: it never started, or stopped at a cycle boundary."""

    def __init__(self, message: str, run_id: str | None = None) -> None:
        self.run_id = run_id
        super().__init__(message)

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "run_id": self.run_id}


class Tasks(Protocol):
    """A kind of task an executor runs: how to check one early, start its run, and turn the ended run into a
    result dict."""

    def check(self, item: Any) -> None:
        """Raise ``ValidationError`` now, in the submitting thread, for an item no run can start from."""

    def start(self, item: Any, ttl: int | None) -> Run:
        """A new run of ``item`` (nothing runs until it is stepped)."""

    def conclude(self, run: Run, stages: list[dict[str, Any]]) -> dict[str, Any]:
        """The result dict of an ended run; ``stages`` are the stage records of its cycles (flows)."""


class _RequestHost(Protocol):
    def start(self, request: str, ttl: int | None = None) -> Run: ...


class _FlowHost(Protocol):
    def start(self, value: Any, *, ttl: int | None = None) -> Run: ...

    def _result(self, run: Run, history: list[dict[str, Any]]) -> Any: ...


class RequestTasks:
    """Requests on an Engine: the same run ``engine.run(request)`` makes; the result is its result dict."""

    def __init__(self, engine: _RequestHost) -> None:
        self.engine = engine

    def check(self, item: Any) -> None:
        if not isinstance(item, str) or not item.strip():
            raise ValidationError(f"a task's request must be a non-empty string, got {_short(item)}")

    def start(self, item: Any, ttl: int | None) -> Run:
        return self.engine.start(item, ttl)

    def conclude(self, run: Run, stages: list[dict[str, Any]]) -> dict[str, Any]:
        assert run.result is not None
        return run.result.to_dict()


class FlowTasks:
    """Inputs of a flow on a FlowEngine: the run ``flow_engine.run(value)`` makes; the result is its Task result
    as a dict (``status`` is then the task's: success, failure or partial)."""

    def __init__(self, flow_engine: _FlowHost) -> None:
        self.flow_engine = flow_engine

    def check(self, item: Any) -> None:
        try:
            json.dumps(item, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise ValidationError(f"a flow task's input must be JSON: {exc}") from None

    def start(self, item: Any, ttl: int | None) -> Run:
        return self.flow_engine.start(item, ttl=ttl)

    def conclude(self, run: Run, stages: list[dict[str, Any]]) -> dict[str, Any]:
        result: dict[str, Any] = self.flow_engine._result(run, stages).to_dict()
        return result


def tasks_for(source: Any) -> Tasks:
    """The tasks ``source`` runs: a :class:`Tasks` as it is, a FlowEngine's flow inputs, an Engine's requests."""
    if all(callable(getattr(source, name, None)) for name in ("check", "start", "conclude")):
        tasks: Tasks = source
        return tasks
    if hasattr(source, "flow") and callable(getattr(source, "_result", None)):
        return FlowTasks(source)
    if callable(getattr(source, "start", None)):
        return RequestTasks(source)
    raise TypeError(f"cannot run tasks on {type(source).__name__}: give an Engine, a FlowEngine or a Tasks")


class TaskHandle:
    """One submitted task: its status, its run id once started, its result once ended.

    Thread-safe: any thread may read it, wait on it, or cancel it while a worker drives it.
    """

    def __init__(self, item: Any, *, ttl: int | None = None, deadline: float | None = None) -> None:
        self.item = item
        self.ttl = ttl
        #: seconds the run may take, checked between cycles (``Run.deadline``)
        self.deadline = deadline
        #: the run's id, once it has started
        self.run_id: str | None = None
        self._status: TaskStatus = "queued"
        self._outcome: dict[str, Any] | None = None
        self._error: BaseException | None = None
        self._cancel = False
        self._began: float | None = None
        self._ended: float | None = None
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._callbacks: list[Callable[[TaskHandle], None]] = []
        #: called once when a queued task is cancelled: the executor drops it from its queue
        self._withdraw: Callable[[TaskHandle], None] | None = None

    def __repr__(self) -> str:
        return f"<TaskHandle {self._status} run_id={self.run_id}>"

    @classmethod
    def failed(cls, item: Any, error: BaseException) -> TaskHandle:
        """A task that ended in ``error`` before it was queued (an item no run can start from)."""
        handle = cls(item)
        handle._finish("error", error_outcome(None, error), error)
        return handle

    @property
    def status(self) -> TaskStatus:
        return self._status

    @property
    def cancel_requested(self) -> bool:
        """Whether ``cancel()`` was called: the driver stops the run at its next cycle boundary."""
        return self._cancel

    @property
    def seconds(self) -> float:
        """How long the task has been running (or ran): 0 while queued."""
        if self._began is None:
            return 0.0
        return (self._ended if self._ended is not None else time.monotonic()) - self._began

    def done(self) -> bool:
        return self._done.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the task has ended (True), or ``timeout`` seconds passed (False)."""
        return self._done.wait(timeout)

    def outcome(self, timeout: float | None = None) -> dict[str, Any]:
        """The result dict whatever the ending: the run's result, or for ``cancelled`` and ``error`` a dict with
        ``run_id``, ``status``, ``answer`` (None), ``message`` and ``errors``. Never raises for the task's own
        failure (``map`` yields these); ``TimeoutError`` when it has not ended within ``timeout``."""
        if not self._done.wait(timeout):
            raise TimeoutError(f"the task has not ended within {timeout} s (status: {self._status})")
        assert self._outcome is not None
        return self._outcome

    def result(self, timeout: float | None = None) -> dict[str, Any]:
        """The run's result dict (as ``engine.run`` returns it), once the run ended ``completed``, ``failed`` or
        ``ttl_expired``. Raises ``TaskCancelledError`` for a cancelled task, the exception itself for one that
        raised, and ``TimeoutError`` when it has not ended within ``timeout`` seconds."""
        outcome = self.outcome(timeout)
        if self._status == "cancelled":
            raise TaskCancelledError(outcome["message"], self.run_id)
        if self._error is not None:
            raise self._error
        return outcome

    def cancel(self) -> bool:
        """Stop the task: a queued one never starts; a running one stops at its next cycle boundary (a cycle in
        progress — a model or tool call — is not interrupted), and its run stays resumable when a state store
        keeps it. False when it had already ended."""
        with self._lock:
            if self._status in FINISHED:
                return False
            self._cancel = True
            queued = self._status == "queued"
        if queued:
            self._finish("cancelled", _cancelled_outcome(None, "cancelled before it started"))
            if self._withdraw is not None:
                self._withdraw(self)
        return True

    def add_done_callback(self, callback: Callable[[TaskHandle], None]) -> None:
        """Call ``callback(handle)`` when the task ends (at once if it has): in the thread that ends it."""
        with self._lock:
            if not self._done.is_set():
                self._callbacks.append(callback)
                return
        _call(callback, self)

    # --- what a driver reports ---------------------------------------------------------------------------------

    def _begin(self) -> bool:
        """queued → running; False when the task was cancelled meanwhile (the driver then skips it)."""
        with self._lock:
            if self._status != "queued":
                return False
            self._status, self._began = "running", time.monotonic()
            return True

    def _started(self, run_id: str) -> None:
        self.run_id = run_id

    def _finish(
        self, status: TaskStatus, outcome: dict[str, Any], error: BaseException | None = None
    ) -> None:
        with self._lock:
            if self._status in FINISHED:
                return
            self._status, self._outcome, self._error = status, outcome, error
            self._ended = time.monotonic()
            callbacks, self._callbacks = self._callbacks, []
            self._done.set()
        for callback in callbacks:
            _call(callback, self)


def drive(handle: TaskHandle, tasks: Tasks, start_lock: threading.Lock | None = None) -> None:
    """Run ``handle``'s task to its end in this thread, stopping at a cycle boundary once it is cancelled.

    Runs are started under ``start_lock``: starting one may build the engine's components (the model among them)
    on first use, which must happen once, not once per worker. The cycles themselves run unlocked.
    """
    if not handle._begin():
        return
    try:
        if start_lock is None:
            run = tasks.start(handle.item, handle.ttl)
        else:
            with start_lock:
                run = tasks.start(handle.item, handle.ttl)
        if handle.deadline is not None:
            run.deadline = handle.deadline
        handle._started(run.run_id)
        stages: list[dict[str, Any]] = []
        with run:  # a run left unfinished is released in its store, and stays resumable
            while not handle.cancel_requested:
                entry = run.next()
                if entry is None:
                    break
                stages.extend(entry.stages)
        if run.result is None:
            cycles = run.state.cycle
            message = (
                f"cancelled after {cycles} cycle{'s' if cycles != 1 else ''}, at a cycle boundary; a state store "
                f"keeps run {run.run_id}, and it can be resumed from there"
                if cycles
                else "cancelled before its first cycle"
            )
            handle._finish("cancelled", _cancelled_outcome(run.run_id, message))
        else:
            handle._finish(run.result.status, tasks.conclude(run, stages))
    except BaseException as exc:  # one task's failure, whatever it is, must not end its worker
        if not isinstance(exc, AeonError):
            log.exception("a task raised instead of ending its run")
        handle._finish("error", error_outcome(handle.run_id, exc), exc)


def _cancelled_outcome(run_id: str | None, message: str) -> dict[str, Any]:
    return {"run_id": run_id, "status": "cancelled", "answer": None, "message": message, "errors": []}


def error_outcome(run_id: str | None, exc: BaseException) -> dict[str, Any]:
    record = error_record(exc)
    return {
        "run_id": run_id,
        "status": "error",
        "answer": None,
        "message": f"the task raised {record['type']}: {record['message']}",
        "errors": [record],
    }


def _call(callback: Callable[[TaskHandle], None], handle: TaskHandle) -> None:
    try:
        callback(handle)
    except Exception:  # a broken callback must not take the task's worker (or the others' results) with it
        log.exception("a task's done callback raised")


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:59] + "…"
