"""Many tasks at once on one engine (spec 004 §10.8/§10.12): ``submit``, ``map``, and their asyncio faces.

:class:`Executor` is the API. ``submit`` returns a :class:`~aeon_kernel.runtime.tasks.TaskHandle`; ``map``,
``asubmit`` and ``amap`` are written once, here, on top of ``submit`` and the handle — so another executor (Ray,
say) implements ``submit``, ``shutdown`` and ``stats`` and gets the rest. :class:`LocalExecutor` is a pool of
``concurrency`` threads taking tasks from a bounded queue: ``submit`` waits while the queue is full, or raises
:class:`BackpressureError` (``on_full = "raise"``, or ``block=False``), so a producer faster than the workers
never piles up unbounded work in memory.

Threads, not processes: a run waits on its model (C code that releases the GIL, or a server) and its tools
(I/O), and every run of an engine shares that engine's components — one model loaded once. The kernel work
between those calls holds the GIL, so CPU-bound kernel work does not get faster with more threads; waiting
does. An embedded model is not thread-safe: :class:`~aeon_kernel.llm.client.ModelClient` serialises the calls to
an adapter that does not declare ``thread_safe = True``, so model calls take turns while tool calls and kernel
work overlap (bench/README.md, ``batch.py``, measures what this costs).
"""

from __future__ import annotations

import collections
import contextlib
import queue
import threading
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Iterable, Iterator
from dataclasses import dataclass
from functools import partial
from typing import Any, Final, Literal, Self

from aeon_kernel.errors import AeonError, ConfigError, OrchestrationError, ValidationError
from aeon_kernel.runtime.tasks import TaskHandle, Tasks, drive, tasks_for

OnFull = Literal["block", "raise"]
DEFAULT_CONCURRENCY: Final = 4
#: held while a run is started, by every executor of the process: the first start on an engine builds its
#: components (the model among them), which the Engine does without locks, and two executors on one engine (its
#: shared one and a ``map``'s) must not do that at once. Once they are built, a start takes microseconds.
_STARTING: Final = threading.Lock()


class BackpressureError(AeonError):
    """``submit`` found the executor's queue full and was told not to wait (or waited ``timeout`` seconds)."""

    def __init__(self, max_queued: int, running: int) -> None:
        self.max_queued, self.running = max_queued, running
        super().__init__(
            f"the executor's queue is full ({max_queued} tasks waiting, {running} running): wait for a task to "
            "end and submit again, submit with block=True, or raise max_queued"
        )

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "max_queued": self.max_queued, "running": self.running}


@dataclass(frozen=True)
class ExecutorSettings:
    """How many tasks run at once, how many may wait, and what ``submit`` does when that many wait."""

    concurrency: int = DEFAULT_CONCURRENCY
    #: tasks waiting for a worker; None: twice ``concurrency``
    max_queued: int | None = None
    #: ``block``: ``submit`` waits for room; ``raise``: it raises BackpressureError
    on_full: OnFull = "block"

    def __post_init__(self) -> None:
        for key in ("concurrency", "max_queued"):
            value = getattr(self, key)
            if value is None and key == "max_queued":
                continue
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigError(f"the executor's {key} must be a positive integer, got {value!r}")
        if self.on_full not in ("block", "raise"):
            raise ConfigError(f'the executor\'s on_full must be "block" or "raise", got {self.on_full!r}')

    @property
    def queue_size(self) -> int:
        return self.max_queued if self.max_queued is not None else 2 * self.concurrency


class Executor(ABC):
    """Runs tasks — requests on an Engine, inputs of a flow — several at once, each its own Run.

    Subclasses implement :meth:`submit`, :meth:`shutdown` and :meth:`stats`; ``map``, ``asubmit`` and ``amap``
    are built on them. Use an executor as a context manager, or call ``shutdown()``.
    """

    @abstractmethod
    def submit(
        self,
        item: Any,
        *,
        ttl: int | None = None,
        deadline: float | None = None,
        block: bool | None = None,
        timeout: float | None = None,
    ) -> TaskHandle:
        """Queue ``item`` (a request; a flow's input) and return its handle at once.

        :param ttl: the run's cycles (default: the configuration's).
        :param deadline: seconds the run may take, checked between cycles.
        :param block: when the queue is full, wait for room (True) or raise BackpressureError (False); None:
            the executor's ``on_full``.
        :param timeout: wait at most this long for room, then raise BackpressureError.

        Raises ``ValidationError`` at once for an item no run can start from.
        """

    @abstractmethod
    def shutdown(self, *, wait: bool = True, cancel: bool = False) -> None:
        """Take no more tasks. ``cancel``: queued tasks never start and running ones stop at their next cycle
        boundary; otherwise every queued task still runs. ``wait``: return once the workers have stopped."""

    @abstractmethod
    def stats(self) -> dict[str, int]:
        """``queued``, ``running`` and ``workers`` now (for progress displays)."""

    @property
    def waits_when_full(self) -> bool:
        """Whether ``submit`` waits for room by default (``on_full = "block"``) rather than raising."""
        return True

    def map(
        self, items: Iterable[Any], *, ttl: int | None = None, deadline: float | None = None
    ) -> Iterator[tuple[int, dict[str, Any]]]:
        """Run every item, yielding ``(index, result)`` as each task ends (not in input order).

        ``result`` is the task's outcome dict (``TaskHandle.outcome``): one task's failure, error or TTL is its
        own result and never stops the others. ``items`` is read lazily, as the queue has room, so a long (or
        endless) iterable costs no more memory than the tasks in flight. Leaving the loop early cancels the tasks
        still queued or running.
        """
        mapping = _Mapping(self, items, ttl, deadline)
        try:
            yield from mapping
        finally:
            mapping.close()

    async def asubmit(
        self, item: Any, *, ttl: int | None = None, deadline: float | None = None
    ) -> dict[str, Any]:
        """Submit ``item`` and await its result (``TaskHandle.result``'s semantics); cancelling the awaiting
        asyncio task cancels the Aeon task. A full queue is waited for in a thread, never in the event loop."""
        import asyncio  # here: a program that never awaits a task does not load asyncio (DESIGN rule 5)

        try:
            handle = self.submit(item, ttl=ttl, deadline=deadline, block=False)
        except BackpressureError:
            if not self.waits_when_full:
                raise
            handle = await asyncio.to_thread(self.submit, item, ttl=ttl, deadline=deadline, block=True)
        loop = asyncio.get_running_loop()
        ended: asyncio.Future[None] = loop.create_future()

        def settle(_: TaskHandle) -> None:
            with contextlib.suppress(RuntimeError):  # the loop has closed: nobody awaits it any more
                loop.call_soon_threadsafe(lambda: None if ended.done() else ended.set_result(None))

        handle.add_done_callback(settle)
        try:
            await ended
        except asyncio.CancelledError:
            handle.cancel()
            raise
        return handle.result()

    async def amap(
        self, items: Iterable[Any], *, ttl: int | None = None, deadline: float | None = None
    ) -> AsyncIterator[tuple[int, dict[str, Any]]]:
        """``map`` for asyncio: ``async for index, result in executor.amap(items)``. The waiting happens in a
        thread; leaving the loop early (or cancelling it) cancels the tasks still queued or running."""
        import asyncio

        mapping = _Mapping(self, items, ttl, deadline)
        try:
            while True:
                pair = await asyncio.to_thread(next, mapping, None)
                if pair is None:
                    return
                yield pair
        finally:
            mapping.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.shutdown(wait=True, cancel=exc_info[0] is not None)


class _Mapping:
    """The state of one ``map``: the items not yet submitted, the handles in flight, the ends not yet yielded.

    ``close`` may be called from another thread while ``__next__`` waits (``amap`` does): it cancels what is in
    flight, which ends the wait.
    """

    def __init__(
        self, executor: Executor, items: Iterable[Any], ttl: int | None, deadline: float | None
    ) -> None:
        self._executor, self._ttl, self._deadline = executor, ttl, deadline
        self._items = enumerate(items)
        self._held: tuple[int, Any] | None = None
        self._exhausted = False
        self._closed = False
        self._pending: dict[int, TaskHandle] = {}
        self._ended: queue.SimpleQueue[int | None] = queue.SimpleQueue()

    def __iter__(self) -> _Mapping:
        return self

    def __next__(self) -> tuple[int, dict[str, Any]]:
        while not self._closed:
            self._fill()
            if not self._pending and self._exhausted:
                break
            index = self._ended.get()
            if index is None:
                continue  # woken by close()
            handle = self._pending.pop(index, None)
            if handle is not None:
                return index, handle.outcome()
        raise StopIteration

    def _fill(self) -> None:
        """Submit items while the queue has room; with nothing in flight, wait for room (other submitters may
        hold it) rather than spin."""
        while not self._exhausted and not self._closed:
            if self._held is None:
                try:
                    self._held = next(self._items)
                except StopIteration:
                    self._exhausted = True
                    return
            index, item = self._held
            try:
                handle = self._executor.submit(
                    item, ttl=self._ttl, deadline=self._deadline, block=not self._pending
                )
            except BackpressureError:
                return
            except ValidationError as exc:  # an item no run can start from: its own error result
                handle = TaskHandle.failed(item, exc)
            self._held = None
            self._pending[index] = handle
            handle.add_done_callback(partial(self._ended_at, index))
            if self._closed:  # closed from another thread while this one submitted
                handle.cancel()

    def _ended_at(self, index: int, _: TaskHandle) -> None:
        self._ended.put(index)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for handle in list(self._pending.values()):
            handle.cancel()
        self._ended.put(None)  # wakes a __next__ waiting in another thread


class LocalExecutor(Executor):
    """``concurrency`` worker threads in this process, fed from a queue of at most ``max_queued`` tasks.

    :param source: an Engine (tasks are requests), a FlowEngine (tasks are the flow's inputs), or a
        :class:`~aeon_kernel.runtime.tasks.Tasks`.
    :param concurrency: runs in progress at once.
    :param max_queued: tasks waiting for a worker (default: twice ``concurrency``).
    :param on_full: what ``submit`` does when that many wait: ``block`` (wait for room) or ``raise``.

    Workers start with the first task. Every run shares the source's components; runs are started one at a time
    (starting the first builds them; see ``_STARTING``), then cycle freely.
    """

    def __init__(
        self,
        source: Any,
        concurrency: int = DEFAULT_CONCURRENCY,
        *,
        max_queued: int | None = None,
        on_full: OnFull = "block",
    ) -> None:
        self.settings = ExecutorSettings(concurrency, max_queued, on_full)
        self.tasks: Tasks = tasks_for(source)
        self._cond = threading.Condition()
        self._queue: collections.deque[TaskHandle] = collections.deque()
        self._running: set[TaskHandle] = set()
        self._workers: list[threading.Thread] = []
        self._closed = False

    def submit(
        self,
        item: Any,
        *,
        ttl: int | None = None,
        deadline: float | None = None,
        block: bool | None = None,
        timeout: float | None = None,
    ) -> TaskHandle:
        self.tasks.check(item)
        handle = TaskHandle(item, ttl=ttl, deadline=deadline)
        handle._withdraw = self._withdraw
        wait = self.settings.on_full == "block" if block is None else block
        size = self.settings.queue_size
        with self._cond:
            if not self._workers and not self._closed:
                self._start_workers()
            if wait:
                room = self._cond.wait_for(lambda: self._closed or len(self._queue) < size, timeout)
                if not room:
                    raise BackpressureError(size, len(self._running))
            if self._closed:
                raise OrchestrationError("the executor is shut down and takes no more tasks: make a new one")
            if len(self._queue) >= size:
                raise BackpressureError(size, len(self._running))
            self._queue.append(handle)
            self._cond.notify_all()
        return handle

    def shutdown(self, *, wait: bool = True, cancel: bool = False) -> None:
        with self._cond:
            self._closed = True
            dropped = list(self._queue) if cancel else []
            running = list(self._running) if cancel else []
            self._cond.notify_all()
        for handle in (*dropped, *running):
            handle.cancel()
        if wait:
            for worker in self._workers:
                if worker is not threading.current_thread():  # a done callback may shut its own executor
                    worker.join()

    @property
    def waits_when_full(self) -> bool:
        return self.settings.on_full == "block"

    def stats(self) -> dict[str, int]:
        with self._cond:
            return {"queued": len(self._queue), "running": len(self._running), "workers": len(self._workers)}

    # --- internals -----------------------------------------------------------------------------------------------

    def _start_workers(self) -> None:
        for number in range(self.settings.concurrency):
            worker = threading.Thread(target=self._work, name=f"aeon-executor-{number}", daemon=True)
            worker.start()
            self._workers.append(worker)

    def _work(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._closed or bool(self._queue))
                if not self._queue:
                    return  # shut down, and nothing left to run
                handle = self._queue.popleft()
                self._running.add(handle)
                self._cond.notify_all()  # a submitter waiting for room
            try:
                drive(handle, self.tasks, _STARTING)
            finally:
                with self._cond:
                    self._running.discard(handle)

    def _withdraw(self, handle: TaskHandle) -> None:
        """A queued task was cancelled: its place in the queue is free at once."""
        with self._cond:
            try:
                self._queue.remove(handle)
            except ValueError:
                return  # a worker took it meanwhile (and will skip it)
            self._cond.notify_all()


def map_on(
    executor: Executor, items: Iterable[Any], *, ttl: int | None = None, deadline: float | None = None
) -> Iterator[tuple[int, dict[str, Any]]]:
    """``executor.map``, the executor shut down when the iteration ends or is left (``Engine.map``)."""
    try:
        yield from executor.map(items, ttl=ttl, deadline=deadline)
    finally:
        executor.shutdown(wait=True, cancel=True)


async def amap_on(
    executor: Executor, items: Iterable[Any], *, ttl: int | None = None, deadline: float | None = None
) -> AsyncIterator[tuple[int, dict[str, Any]]]:
    """``executor.amap``, the executor shut down when the iteration ends or is left (``Engine.amap``)."""
    import asyncio

    try:
        async for pair in executor.amap(items, ttl=ttl, deadline=deadline):
            yield pair
    finally:
        await asyncio.to_thread(executor.shutdown, wait=True, cancel=True)
