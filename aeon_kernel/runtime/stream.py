"""A run as a stream of events (issue 28): ``for event in run.stream()``, ``async for event in run.astream()``.

The run goes on in a worker thread while the caller reads. The run's observer (``Run.observe``) hears every event
the run emits to its hooks and makes it one of :mod:`aeon_kernel.events` — no plugin is registered, so the other
runs of the engine pay nothing — and a text listener (:func:`~aeon_kernel.llm.client.begin_listening`) passes the
model's reply on as it is written, so the first piece of an answer reaches the reader before the model has finished
it. Events wait in a queue the reader drains; the worker wakes a waiting reader once per batch, not per event.

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
from typing import Any, Protocol

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
        self._events: dict[str, Callable[..., None]] = {
            "aeon_run_start": self._started,
            "aeon_step_status_changed": self._step,
            "aeon_tool_started": self._tool_started,
            "aeon_tool_called": lambda call, **_: push(ToolReturned(self.run_id, call)),
            "aeon_supervisor_action": lambda action, **_: push(Repair(self.run_id, action)),
            "aeon_pass_event": lambda pass_number, event, record, **_: push(
                PassEvent(self.run_id, pass_number, event, record)
            ),
            "aeon_cycle_end": self._cycle,
            "aeon_run_end": lambda result, **_: push(RunFinished(self.run_id, result)),
        }

    def observe(self, hook_name: str, kwargs: dict[str, Any]) -> None:
        if (event := self._events.get(hook_name)) is not None:
            event(**kwargs)

    def text(self, delta: str, attempt: int) -> None:
        if self.cancelled.is_set():
            raise StreamCancelled
        self.push(TextDelta(self.run_id, self.step_id, delta, attempt))

    def _started(self, request: str, manifest: dict[str, Any], **_: Any) -> None:
        self.push(RunStarted(self.run_id, request, dict(manifest), self.resumed))

    def _step(self, step: Any, **_: Any) -> None:
        if step.status is StepStatus.RUNNING:
            self.step_id = step.step_id
            self.push(StepStarted(self.run_id, step))
        elif step.status.is_terminal:
            self.push(StepFinished(self.run_id, step))

    def _tool_started(self, step_id: str, tool_name: str, arguments: dict[str, Any], **_: Any) -> None:
        self.push(ToolStarted(self.run_id, step_id, tool_name, dict(arguments)))

    def _cycle(self, entry: Any, state: Any) -> None:
        if entry.phase not in ("step", "node") and (plan := state.plan) is not None:
            shape = (plan.goal, tuple(s.step_id for s in plan.steps))
            if shape != self._plan:  # the first plan, or a new one (multi-pass)
                self._plan = shape
                self.push(PlanAccepted(self.run_id, plan))
        for stage in entry.stages:
            self.push(StageFinished(self.run_id, stage))
        self.push(CycleEnded(self.run_id, entry))


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


class _Streaming:
    """What the sync and async streams share: the worker thread that runs the run, and how it stops."""

    def __init__(self, run: Run) -> None:
        self.run = run
        self.cancelled = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def result(self) -> dict[str, Any] | None:
        """The run's result dict once it has ended (None while it runs, or when it was stopped)."""
        return None if self.run.result is None else self.run.result.to_dict()

    def _begin(self, queue: _Queue) -> None:
        collector = _Collector(self.run, queue.push, self.cancelled)
        self.run.observe(collector.observe)
        context = (
            contextvars.copy_context()
        )  # the caller's context vars (the cycle's captures are set per cycle)
        self._thread = threading.Thread(
            target=context.run,
            args=(self._drive, collector, queue),
            name=f"aeon-stream-{self.run.run_id[:8]}",
            daemon=True,
        )
        self._thread.start()

    def _drive(self, collector: _Collector, queue: _Queue) -> None:
        token = begin_listening(collector.text)
        error: BaseException | None = None
        try:
            while not self.cancelled.is_set() and self.run.next() is not None:
                pass
        except StreamCancelled:
            pass  # the run was interrupted, as by Ctrl-C: its claim is released, it resumes from the store
        except BaseException as exc:
            error = exc
        finally:
            end_listening(token)
            self.run.observe(None)
            if self.run.result is None:
                self.run.close()  # stopped between cycles: released, resumable
            queue.finish(error)

    def _stop(self) -> None:
        self.cancelled.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()


class RunStream(_Streaming):
    """A run's events, read in this thread: ``for event in stream``; ``stream.result`` once it has ended.
    ``close()`` (or leaving a ``with`` block) stops the run at the next safe point (module docstring)."""

    def __init__(self, run: Run) -> None:
        super().__init__(run)
        self._queue = _Queue()
        self._events = self._read()

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
        if self._thread is None:  # never read: a resumed run's claim is released all the same
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
        if self._thread is not None:
            await asyncio.to_thread(self._thread.join)

    async def aclose(self) -> None:
        self.cancelled.set()
        await self._joined()

    async def __aenter__(self) -> AsyncRunStream:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()
