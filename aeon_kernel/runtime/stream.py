"""A run as a stream of events (issue 28): ``for event in run.stream()``, ``async for event in run.astream()``.

Where the model streams its text, the run goes on in a worker thread while the caller reads (an async stream always
does); a sync stream over a model that answers whole runs each cycle in the reader's thread. The run's observer
(``Run.observe``) hears every event the run emits to its hooks and makes it one of :mod:`aeon_kernel.events` — no
plugin is registered, so the other runs of the engine pay nothing — and a text listener
(:func:`~aeon_kernel.llm.client.begin_listening`) passes the model's reply on as it is written, so the first piece
of an answer reaches the reader before the model has finished it. Events wait in a queue the reader drains; the
worker wakes a waiting reader once per batch, not per event.

Closing the stream (or cancelling the task reading it) stops the run at the next safe point: the model's next piece
of text where the adapter streams, else the end of the cycle under way. A run stopped mid-cycle is interrupted as
by Ctrl-C — nothing of that cycle is committed, its claim is released — so it resumes from the store.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections import deque
from collections.abc import AsyncIterator, Callable, Generator, Iterator
from contextlib import contextmanager
from functools import partial
from queue import Empty, SimpleQueue
from typing import Any, Final, Protocol

from aeon_kernel.events import (
    CycleEnded,
    PassEvent,
    PlanAccepted,
    Repair,
    RunEvent,
    RunFinished,
    RunStarted,
    StageFinished,
    StepFinished,
    StepStarted,
    TextDelta,
    ToolReturned,
    ToolStarted,
)
from aeon_kernel.llm.client import begin_listening, end_listening
from aeon_kernel.models import StepStatus


class Run(Protocol):
    """What a stream needs of its :class:`~aeon_kernel.runtime.run.Run` (which imports this module)."""

    @property
    def run_id(self) -> str: ...

    @property
    def resumed(self) -> bool: ...

    @property
    def result(self) -> Any: ...

    def next(self) -> Any: ...

    def close(self) -> None: ...

    def observe(self, observer: Callable[[str, dict[str, Any]], None] | None) -> None: ...


class StreamCancelled(BaseException):
    """Raised in the run's thread when its reader closed the stream: the run stops as if interrupted."""


class _Collector:
    """One run's events, made from what it emits (its observer) and from its model's text, pushed as they come."""

    def __init__(self, run: Run, push: Callable[[RunEvent], None], cancelled: threading.Event) -> None:
        self.run_id, self.resumed, self.push, self.cancelled = run.run_id, run.resumed, push, cancelled
        self.step_id: str | None = None
        self._plan: tuple[str, tuple[str, ...]] | None = None

    def observe(self, hook_name: str, kwargs: dict[str, Any]) -> None:
        if (event := _EVENTS.get(hook_name)) is not None:
            event(self, kwargs)

    def text(self, delta: str, attempt: int) -> None:
        if self.cancelled.is_set():
            raise StreamCancelled
        self.push(TextDelta(self.run_id, self.step_id, delta, attempt))

    def started(self, kwargs: dict[str, Any]) -> None:
        self.push(RunStarted(self.run_id, kwargs["request"], dict(kwargs["manifest"]), self.resumed))

    def step(self, kwargs: dict[str, Any]) -> None:
        step = kwargs["step"]
        if step.status is StepStatus.RUNNING:
            self.step_id = step.step_id
            self.push(StepStarted(self.run_id, step))
        elif step.status is not StepStatus.PENDING:  # complete, failed, or invalid (blocked)
            self.push(StepFinished(self.run_id, step))

    def tool_started(self, kwargs: dict[str, Any]) -> None:
        self.push(ToolStarted(self.run_id, kwargs["step_id"], kwargs["tool_name"], kwargs["arguments"]))

    def tool_called(self, kwargs: dict[str, Any]) -> None:
        self.push(ToolReturned(self.run_id, kwargs["call"]))

    def repair(self, kwargs: dict[str, Any]) -> None:
        self.push(Repair(self.run_id, kwargs["action"]))

    def pass_event(self, kwargs: dict[str, Any]) -> None:
        self.push(PassEvent(self.run_id, kwargs["pass_number"], kwargs["event"], kwargs["record"]))

    def cycle(self, kwargs: dict[str, Any]) -> None:
        entry = kwargs["entry"]
        if entry.phase not in ("step", "node") and (plan := kwargs["state"].plan) is not None:
            shape = (plan.goal, tuple(s.step_id for s in plan.steps))
            if shape != self._plan:  # the first plan, or a new one (multi-pass)
                self._plan = shape
                self.push(PlanAccepted(self.run_id, plan))
        for stage in entry.stages:
            self.push(StageFinished(self.run_id, stage))
        self.push(CycleEnded(self.run_id, entry))

    def finished(self, kwargs: dict[str, Any]) -> None:
        self.push(RunFinished(self.run_id, kwargs["result"]))


#: the hooks whose calls become events, and how
_EVENTS: dict[str, Callable[[_Collector, dict[str, Any]], None]] = {
    "aeon_run_start": _Collector.started,
    "aeon_step_status_changed": _Collector.step,
    "aeon_tool_started": _Collector.tool_started,
    "aeon_tool_called": _Collector.tool_called,
    "aeon_supervisor_action": _Collector.repair,
    "aeon_pass_event": _Collector.pass_event,
    "aeon_cycle_end": _Collector.cycle,
    "aeon_run_end": _Collector.finished,
}


@contextmanager
def watching(
    run: Run, on_event: Callable[[RunEvent], None], cancelled: threading.Event | None = None
) -> Iterator[None]:
    """Give ``on_event`` each event of ``run`` as it happens, the model's text included, while the caller steps the
    run in this thread: how a face that drives a run itself (``aeon run``'s live view) sees what a stream yields.
    Once ``cancelled`` is set, the model's next piece of text raises :class:`StreamCancelled`."""
    collector = _Collector(run, on_event, cancelled or threading.Event())
    run.observe(collector.observe)
    token = begin_listening(collector.text)
    try:
        yield
    finally:
        end_listening(token)
        run.observe(None)


class _Queue:
    """Events from the run's thread to the reader, which is woken once per batch (a thread or an event loop)."""

    def __init__(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        self._lock = threading.Lock()
        self._items: deque[RunEvent] = deque()
        self._loop = loop
        self.ready: threading.Event | asyncio.Event = threading.Event() if loop is None else asyncio.Event()
        self._woken = False
        self.done = False
        self.error: BaseException | None = None

    def push(self, event: RunEvent) -> None:
        with self._lock:
            self._items.append(event)
            if self._woken:
                return
            self._woken = True
        self._wake()

    def finish(self, error: BaseException | None = None) -> None:
        with self._lock:
            self.done, self.error, self._woken = True, error, True
        self._wake()

    def _wake(self) -> None:
        if self._loop is None:
            self.ready.set()
        else:
            self._loop.call_soon_threadsafe(self.ready.set)

    def empty(self) -> bool:
        with self._lock:
            return not self._items

    def take(self) -> list[RunEvent]:
        with self._lock:
            items = list(self._items)
            self._items.clear()
            if not self.done:
                self._woken = False
                self.ready.clear()
        return items


class _Workers:
    """Daemon threads that run streamed runs, kept for the next one: starting a thread per run cost 20 µs a cycle
    on W2, a kept one 7. (``ThreadPoolExecutor`` cannot make daemon threads, and a stream the reader abandoned must
    not keep the interpreter from exiting, as a killed process would not wait.) There is always a thread for a new
    run: one waiting is reserved for it, or one is started; a thread idle for a minute ends."""

    IDLE_SECONDS = 60.0

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._jobs: SimpleQueue[Callable[[], None]] = SimpleQueue()
        self._waiting = 0  # threads waiting for a job that no job has been reserved for

    def run(self, job: Callable[[], None]) -> None:
        with self._lock:
            if self._waiting:
                self._waiting -= 1
                self._jobs.put(job)
                return
        threading.Thread(target=self._work, args=(job,), name="aeon-stream", daemon=True).start()

    def _work(self, job: Callable[[], None]) -> None:
        while True:
            job()
            with self._lock:
                self._waiting += 1
            try:
                job = self._jobs.get(timeout=self.IDLE_SECONDS)
            except Empty:
                with self._lock:
                    try:  # a job reserved for a waiting thread just as this one gave up: it is this one's
                        job = self._jobs.get_nowait()
                    except Empty:
                        self._waiting -= 1
                        return


_WORKERS: Final = _Workers()


class _Streaming:
    """What the sync and async streams share: the worker thread that runs the run, and how it stops."""

    def __init__(self, run: Run) -> None:
        self.run = run
        self.cancelled = threading.Event()
        #: set once the run's worker has let go of it (None: never started)
        self._ended: threading.Event | None = None

    @property
    def result(self) -> dict[str, Any] | None:
        """The run's result dict once it has ended (None while it runs, or when it was stopped)."""
        return None if self.run.result is None else self.run.result.to_dict()

    def _begin(self, queue: _Queue) -> None:
        self._ended = threading.Event()
        context = contextvars.copy_context()  # the caller's context variables go with the run
        _WORKERS.run(partial(context.run, self._drive, queue, self._ended))

    def _drive(self, queue: _Queue, ended: threading.Event) -> None:
        error: BaseException | None = None
        try:
            with watching(self.run, queue.push, self.cancelled):
                while not self.cancelled.is_set() and self.run.next() is not None:
                    pass
        except StreamCancelled:
            pass  # the run was interrupted, as by Ctrl-C: its claim is released, it resumes from the store
        except BaseException as exc:
            error = exc
        finally:
            if self.run.result is None:
                self.run.close()  # stopped between cycles: released, resumable
            ended.set()
            queue.finish(error)

    def _stop(self) -> None:
        self.cancelled.set()
        if self._ended is not None:
            self._ended.wait()


class RunStream(_Streaming):
    """A run's events, read in this thread: ``for event in stream``; ``stream.result`` once it has ended.
    ``close()`` (or leaving a ``with`` block) stops the run at the next safe point (module docstring).

    ``threaded``: the run goes on in a worker thread, so that the model's text reaches the reader as it is written
    (the default where the run's model streams). Otherwise each cycle runs in the reader's thread as it asks for the
    next event, and the events of a cycle come when it ends: nothing would arrive sooner from a model that answers
    whole, and no thread is handed the run (on W2, the handing cost as much as the events)."""

    def __init__(self, run: Run, *, threaded: bool = True) -> None:
        super().__init__(run)
        self._queue = _Queue()
        self._events = self._read() if threaded else self._cycles()

    def _cycles(self) -> Generator[RunEvent, None, None]:
        events: list[RunEvent] = []
        self.run.observe(_Collector(self.run, events.append, self.cancelled).observe)
        try:
            while not self.cancelled.is_set():
                entry = self.run.next()
                batch, events[:] = events[:], []
                yield from batch
                if entry is None:
                    break
        finally:
            self.run.observe(None)
            if self.run.result is None:
                self.run.close()  # stopped between cycles (or interrupted in one): released, resumable

    def _read(self) -> Generator[RunEvent, None, None]:
        self._begin(self._queue)
        try:
            while True:
                self._queue.ready.wait()
                yield from self._queue.take()
                if self._queue.done and self._queue.empty():
                    break
        finally:
            self._stop()
        if self._queue.error is not None:
            raise self._queue.error

    def __iter__(self) -> Iterator[RunEvent]:
        return self._events

    def __next__(self) -> RunEvent:
        return next(self._events)

    def close(self) -> None:
        self.cancelled.set()
        self._events.close()
        self._stop()
        if self.run.result is None:  # never read, or read in this thread: released all the same
            self.run.close()

    def __enter__(self) -> RunStream:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class AsyncRunStream(_Streaming):
    """A run's events for asyncio: ``async for event in stream``; the run goes on in a worker thread, never on the
    event loop. ``aclose()``, or cancelling the task that reads, stops it at the next safe point."""

    def __init__(self, run: Run) -> None:
        super().__init__(run)
        self._queue: _Queue | None = None
        self._pending: deque[RunEvent] = deque()

    def __aiter__(self) -> AsyncIterator[RunEvent]:
        return self

    async def __anext__(self) -> RunEvent:
        if self._queue is None:
            self._queue = _Queue(asyncio.get_running_loop())
            self._begin(self._queue)
        queue = self._queue
        try:
            while not self._pending:
                await queue.ready.wait()  # type: ignore[misc]  # an asyncio.Event here
                self._pending.extend(queue.take())
                if not self._pending and queue.done:
                    await self._joined()
                    if queue.error is not None:
                        raise queue.error
                    raise StopAsyncIteration
        except asyncio.CancelledError:
            self.cancelled.set()  # the reader is gone: the run stops at its next safe point
            raise
        return self._pending.popleft()

    async def _joined(self) -> None:
        if self._ended is not None:
            await asyncio.to_thread(self._ended.wait)

    async def aclose(self) -> None:
        self.cancelled.set()
        await self._joined()

    async def __aenter__(self) -> AsyncRunStream:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()
