"""The StateStore contract: durable runs (spec 000 FR-013, issue: durable runs).

A store commits every cycle in one transaction — the run's counters, the step that changed (its status and
result) and the cycle's record — *before* the cycle's JSONL line is written, so after a crash the store is the
truth and the log can be repaired from it. Stores keep deltas: a cycle writes the one step it touched and its
own record, never the whole history again.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

from aeon_kernel.errors import RunStoreError
from aeon_kernel.models import LogEntry, OrchestrationState
from aeon_kernel.runtime.durable import Liveness, claim_liveness


@dataclass(frozen=True)
class RunOwner:
    """Who holds a run, as its store records it: the claim's process and host (both None: no claim holds it)."""

    pid: int | None
    host: str | None


@dataclass(frozen=True)
class RunSummary:
    """One line of ``aeon runs``."""

    run_id: str
    request: str
    status: str
    cycles: int
    started: str
    updated: str
    #: the run's claim; None where the store does not say
    owner: RunOwner | None = None
    #: ``<session id>/<turn>`` for a turn of a conversation (its manifest's ``session``), else None
    session: str | None = None

    def liveness(self) -> Liveness | None:
        """For a ``running`` run whose store reports its owner: ``live`` (its process runs on this host),
        ``stale`` (it is gone), ``unchecked`` (on another host), ``released`` (no claim: interrupted); else None."""
        if self.status != "running" or self.owner is None:
            return None
        return claim_liveness(self.owner.pid, self.owner.host)

    def to_dict(self) -> dict[str, Any]:
        owner = self.owner
        return {
            "run_id": self.run_id,
            "request": self.request,
            "status": self.status,
            "cycles": self.cycles,
            "started": self.started,
            "updated": self.updated,
            "owner": None if owner is None else {"pid": owner.pid, "host": owner.host},
            "liveness": self.liveness(),
            "session": self.session,
        }


@dataclass(frozen=True)
class StoredRun:
    """A run as the store has it: the rebuilt state, its manifest, and every committed cycle record."""

    state: OrchestrationState
    manifest: dict[str, Any]
    entries: tuple[LogEntry, ...]
    #: a finished run's result as the store kept it (without ``final_state``); None while it runs
    result: dict[str, Any] | None = None


class StateStore(ABC):
    """Where runs survive a crash. Implementations must make ``commit_cycle`` atomic."""

    @abstractmethod
    def create_run(self, state: OrchestrationState, manifest: dict[str, Any]) -> None:
        """Record a new run (and its plan, if it has one), claimed by this run."""

    @abstractmethod
    def commit_cycle(
        self, state: OrchestrationState, entry: LogEntry, llm_outputs: list[dict[str, Any]]
    ) -> None:
        """Atomically store one finished cycle: counters, the step it changed, and its record."""

    @abstractmethod
    def finish_run(self, state: OrchestrationState, result: dict[str, Any]) -> None:
        """Mark the run finished with ``result`` and release it."""

    @abstractmethod
    def load(self, run_id: str) -> StoredRun:
        """The stored run; raises RunStoreError when it is unknown or cannot be read back."""

    @abstractmethod
    def claim(self, run_id: str, *, take_over: bool = False) -> None:
        """Take the run for a new claim; raises RunStoreError while another live claim holds it — in another
        process, or another thread or Engine of this one. Ownership is per claim, not per process.

        ``take_over``: also take a run whose recorded owner cannot be checked (another host: a container that was
        recreated under a new name); still refused while the owner is verifiably alive. Stores that cannot tell
        may refuse it."""

    @abstractmethod
    def release(self, run_id: str) -> None:
        """Let go of this store's claim on a run without finishing it (an interrupted run stays resumable);
        another claim's hold is left alone."""

    @abstractmethod
    def list_runs(self) -> list[RunSummary]:
        """Every run, newest first."""

    def delete_run(self, run_id: str) -> bool:
        """Delete every record of the run (``aeon runs prune``); False when there is none. Raises RunStoreError,
        deleting nothing, while a live claim holds it or one on another host that cannot be checked."""
        raise RunStoreError(f"the {type(self).__name__} state store cannot delete runs (no delete_run)")

    def close(self) -> None:  # noqa: B027 - optional hook with nothing to do by default
        """Release resources."""
