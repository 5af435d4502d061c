"""What makes ``aeon batch`` once-only: the lock and the journal beside its ``--out`` file (issue 27).

* ``OUT.lock`` is held (``fcntl.flock``, exclusive) by the one ``aeon batch`` writing ``OUT`` for as long as it
  runs; the operating system lets go of it when the process ends, however it ends (``kill -9`` included). It holds
  the holder's pid, for the message that refuses a second batch on the same ``OUT``.
* ``OUT.journal`` has one JSON line ``{"id": ..., "run_id": ...}`` per task submitted. The batch chooses each
  task's run id itself and writes (one ``write``) and fsyncs its line *before* it submits the task, so that every
  run that may have done something is in it, whatever executor runs it — a thread here or a Ray worker elsewhere.
  Running the batch again resumes the run of each id the journal names and ``OUT`` lacks, through the state store
  as ``aeon resume`` does, instead of starting the task anew: completed steps are not run again, and a step that
  was running runs again with the same idempotency key (``<run_id>:<step_id>``). A journalled run the store never
  saw (nothing ran) starts with the journalled id, so one line has one run id. A last line cut short by a crash is
  dropped: its task had not been submitted.

A task is a :class:`Line` (its request or input, its run id, new or resumed), run by :class:`LineTasks` around the
executor's own tasks: in this process on the local executor, in each worker on Ray (``RayExecutor(tasks=...)``).
"""

from __future__ import annotations

import json
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from aeon_kernel.runtime.run import Run
from aeon_kernel.runtime.tasks import FlowTasks, RequestTasks, Tasks


def companion(out: Path, kind: str) -> Path:
    """``OUT.lock`` or ``OUT.journal``, beside ``out``."""
    return out.with_name(f"{out.name}.{kind}")


class Busy(Exception):
    """Another process holds the lock of ``--out``."""


def lock(out: Path) -> IO[str]:
    """Take ``OUT.lock`` for this process (close the handle to let go); Busy, saying who holds it, when another
    process does."""
    handle = companion(out, "lock").open("a+", encoding="utf-8")
    try:
        import fcntl
    except ImportError:  # no flock on this platform: nothing to hold
        return handle
    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        handle.seek(0)
        holder = handle.read().strip()
        handle.close()
        who = f" (pid {holder})" if holder.isdigit() else ""
        raise Busy(
            f"another aeon batch{who} is writing {out}: wait for it to end, or give another --out"
        ) from None
    handle.seek(0)
    handle.truncate()
    handle.write(f"{os.getpid()}\n")
    handle.flush()
    return handle


def drop_torn_line(path: Path) -> bytes:
    """The content of ``path`` without a last line cut short by a killed process (removed from the file too)."""
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        cut = data.rfind(b"\n") + 1
        with path.open("r+b") as handle:
            handle.truncate(cut)
        data = data[:cut]
    return data


class Journal:
    """``OUT.journal``: the run of each line's task, by canonical id (``json.dumps(id)``); a later line for an id
    replaces an earlier one. Thread-safe."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.runs: dict[str, str] = {}
        self._lock = threading.Lock()
        self._fd: int | None = None
        if not path.exists():
            return
        for number, line in enumerate(drop_torn_line(path).decode("utf-8", "replace").splitlines(), 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
                self.runs[json.dumps(record["id"])] = _run_id(record["run_id"])
            except (ValueError, KeyError, TypeError, RecursionError):
                raise ValueError(
                    f"line {number} of {path} is not a batch journal line; fix or remove it (a task whose run it "
                    "named would then start anew), or choose another --out"
                ) from None

    def record(self, key: Any, run_id: str) -> None:
        """Note that the task of ``key`` runs as ``run_id``: on disk (fsynced) when this returns, before the task
        is submitted."""
        line = (json.dumps({"id": key, "run_id": run_id}) + "\n").encode()
        with self._lock:
            if self._fd is None:
                self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            os.write(self._fd, line)
            os.fsync(self._fd)
            self.runs[json.dumps(key)] = run_id

    def close(self) -> None:
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None


def _run_id(value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError("not a run id")
    return value


@dataclass(frozen=True)
class Line:
    """A line of the batch as a task: its request or input, and the run id the batch chose for it (journalled
    before the task is submitted): a new run with that id, or with ``resume`` the stored run going on. Picklable,
    for Ray."""

    value: Any
    run_id: str
    resume: bool = False


class LineTasks:
    """The tasks of a batch (a :class:`~aeon_kernel.runtime.tasks.Tasks` of :class:`Line`) around an executor's
    own tasks (``inner``: requests on an Engine, or a flow's inputs): a line starts a new run with its run id, or
    resumes that run from the state store. On the local executor it wraps the batch's tasks here; on Ray each
    worker wraps its own (it travels by reference as ``RayExecutor``'s ``tasks``)."""

    def __init__(self, inner: Tasks) -> None:
        if not isinstance(inner, FlowTasks | RequestTasks):
            raise TypeError(
                f"a batch runs requests on an Engine or a flow's inputs, not {type(inner).__name__}"
            )
        self.inner, self.flow = inner, isinstance(inner, FlowTasks)
        #: the Engine (or FlowEngine) the runs start on and resume from
        self.source: Any = inner.flow_engine if isinstance(inner, FlowTasks) else inner.engine
        #: a resumed flow run's stage records from before (its result lists them all)
        self._history: dict[str, list[dict[str, Any]]] = {}
        self._lock = threading.Lock()

    def check(self, item: Line) -> None:
        self.inner.check(item.value)

    def start(self, item: Line, ttl: int | None) -> Run:
        if item.resume:
            return self._resume(item.run_id)
        run: Run = self.source.start(item.value, ttl=ttl, run_id=item.run_id)
        return run

    def _resume(self, run_id: str) -> Run:
        """The interrupted run, claimed (its TTL goes on from what was left); RunStoreError when it cannot go on."""
        if not self.flow:
            run: Run = self.source.orchestrator().start_resume(run_id)
            return run
        run, history = self.source.start_resume(run_id)
        with self._lock:
            self._history[run_id] = history
        return run

    def conclude(self, run: Run, stages: list[dict[str, Any]]) -> dict[str, Any]:
        with self._lock:
            earlier = self._history.pop(run.run_id, [])
        return self.inner.conclude(run, [*earlier, *stages])


def stored_outcome(run_id: str, stored: Any, flow: bool) -> tuple[str, dict[str, Any]]:
    """The status and outcome of a journalled run that ended without its line reaching ``OUT`` (the batch was
    killed between the two), from what the store kept: its result line is written from it, nothing is run."""
    result = dict(stored.result or {})
    status = str(result.get("status") or stored.state.status)
    outcome = {
        "run_id": run_id,
        "answer": result.get("answer"),
        "message": result.get("message") or "ended in an earlier run of the batch",
        "verification": result.get("verification"),
    }
    if flow:
        task = result.get("task") or {}
        outcome["output"] = task.get("output")
        outcome["status"] = task.get("status")
    return status, outcome
