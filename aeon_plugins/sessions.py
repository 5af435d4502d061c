"""Sessions (issue 29): a conversation that spans runs, as durable as its runs.

Each turn is a run of the engine. Its id is derived from the session's id and the turn's number
(:func:`turn_run_id`), and its manifest names both (``session = "<id>/<n>"``). So the engine's state store
(SQLite by default, Redis too) keeps the conversation without a table of its own. Two processes cannot append the
same turn: the store refuses a second run with that id. A turn that was cut short (``kill -9``, Ctrl-C) is resumed
before the next one is asked.

The model sees the conversation through the context machinery flows use. The earlier turns are items (what was
asked, what was answered, what the last tool gave), newest first, cut to a token budget (``fitted``). The turn's
request is the new message, after the items that fit.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Final

from aeon_kernel import Engine, OrchestrationState, Run, RunStoreError, StateStore
from aeon_kernel.kit import ASKED_HEAD, GIVEN_HEAD, RunSummary, given_line
from aeon_plugins.flow import FlowEngine, ProfileSpec, TaskResult, fitted, recency

#: what the earlier turns may take of the model's prompt, in tokens (4 characters of JSON each), and how many
CONTEXT: Final = ProfileSpec(max_tokens=400, limit=6)


def turn_run_id(session_id: str, turn: int) -> str:
    """The run id of turn ``turn`` of ``session_id``: the same in every process, so the store refuses a second."""
    digest = hashlib.sha256(f"aeon-session/{session_id}/{turn}".encode()).digest()
    return uuid.UUID(bytes=digest[:16], version=4).hex


@dataclass(frozen=True)
class Turn:
    """One turn: what was asked, and how its run ended (``running`` while it runs or was cut short)."""

    number: int
    run_id: str
    message: str
    status: str
    answer: Any = None
    #: the last successful tool result of the turn, as the model is shown it
    fact: Any = None


@dataclass(frozen=True)
class SessionSummary:
    """One line of ``aeon sessions``."""

    session_id: str
    turns: int
    #: the first turn's request, as the store lists it
    started_with: str
    updated: str
    status: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "session_id": self.session_id,
            "turns": self.turns,
            "started_with": self.started_with,
            "updated": self.updated,
            "status": self.status,
        }


class Session:
    """A conversation with ``engine``'s model and tools. ``session_id`` picks one up (:func:`sessions` lists them);
    without it, a new one starts. With no state store the turns live in this object only."""

    def __init__(self, engine: Engine, session_id: str | None = None) -> None:
        self.engine = engine
        self.id = session_id or uuid.uuid4().hex
        self._kept: list[tuple[int, str, Run]] = []  # the turns' runs, where no store keeps them

    @property
    def store(self) -> StateStore | None:
        return self.engine.state_store

    def turns(self, last: int | None = None) -> list[Turn]:
        """Every turn so far (``last``: the last that many), oldest first."""
        if self.store is None:
            return [
                _turn(number, message, run.state, run.result.to_dict() if run.result else None)
                for number, message, run in self._kept[-last if last else 0 :]
            ]
        found = sorted(_mine(self.store.list_runs(), self.id))
        turns = []
        for number, run_id in found[-last if last else 0 :]:
            stored = self.store.load(run_id)
            message = stored.manifest.get("message")
            said = message if isinstance(message, str) else stored.state.request
            turns.append(_turn(number, said, stored.state, stored.result))
        return turns

    def ask(self, message: str, *, ttl: int | None = None) -> dict[str, Any]:
        """One turn, run to its end: the run's result dict (:meth:`start` says what comes first)."""
        with self.start(message, ttl=ttl) as run:
            try:
                result = run.execute().to_dict()
            except RunStoreError as exc:
                if run.state.cycle:
                    raise
                raise RunStoreError(  # it could not be stored: another process appended this turn meanwhile
                    f"session {self.id}: another process took turn {run.manifest['session']} meanwhile ({exc}); "
                    "ask again to go on after it"
                ) from None
        return result

    def start(self, message: str, *, ttl: int | None = None) -> Run:
        """The next turn's run, to step or drive (as ``Engine.start``). A turn left unfinished by a crash is
        finished first (its result is in :meth:`turns`); one another process runs, or one waiting for approval,
        is a ``RunStoreError``."""
        turns, number = self._next()
        run_id = turn_run_id(self.id, number)
        run = self.engine.orchestrator(ttl).start(conversation(turns, message), run_id=run_id)
        return self._begun(run, number, message)

    def run_flow(self, flow: FlowEngine, value: Any, *, ttl: int | None = None) -> TaskResult:
        """One turn that runs ``flow`` on ``value``: the session is the run's task layer. The earlier turns are
        written there first, as if stages before the first (``turn-<n>``: what was asked, what was answered, the
        last tool result), so a node whose context reads the task layer sees them, cut to its profile's budget
        and kept apart from other sessions' runs. Its result is the turn's."""
        turns, number = self._next()
        run_id = turn_run_id(self.id, number)
        for turn in turns:
            said = {"asked": turn.message, "answered": turn.answer, "result": turn.fact}
            flow.setup.layers.write_earlier(run_id, f"turn-{turn.number:04d}", said, turn.number)
        message = json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
        return flow.drain(self._begun(flow.start(value, ttl=ttl, run_id=run_id), number, message))

    def _next(self) -> tuple[list[Turn], int]:
        """The turns the model may be shown (no more fit its context), and the next turn's number; a turn left
        unfinished is finished first."""
        turns = self.turns(last=CONTEXT.limit)
        if turns and turns[-1].status in ("running", "waiting"):
            self._finish(turns[-1])
            turns = self.turns(last=CONTEXT.limit)
        return turns, turns[-1].number + 1 if turns else 1

    def _begun(self, run: Run, number: int, message: str) -> Run:
        """``run`` marked as this session's turn ``number`` (its manifest), kept here where no store keeps it."""
        run.manifest.update(session=f"{self.id}/{number}", message=message)
        if self.store is None:
            self._kept.append((number, message, run))
        return run

    def _finish(self, turn: Turn) -> None:
        if turn.status == "waiting":
            raise RunStoreError(
                f"turn {turn.number} of session {self.id} waits for approval: aeon approve {turn.run_id} answers "
                "it, then the conversation goes on"
            )
        try:
            self.engine.resume(turn.run_id)
        except RunStoreError as exc:
            raise RunStoreError(f"session {self.id} cannot go on: its turn {turn.number}: {exc}") from None


def conversation(turns: list[Turn], message: str) -> str:
    """The request of a new turn: the earlier turns that fit the context budget, oldest first, then ``message``."""
    items = [
        {
            "layer": "session",
            "key": f"turn {t.number}",
            "value": given_line(t.message, t.answer, t.fact),
            "seq": t.number,
        }
        for t in turns
        if t.answer is not None or t.fact is not None
    ]
    chosen, _ = fitted(recency(items, CONTEXT)[: CONTEXT.limit], CONTEXT.max_tokens - 1)
    if not chosen:
        return message
    lines = [item["value"] for item in sorted(chosen, key=lambda item: item["seq"])]
    return GIVEN_HEAD + "\n".join(lines) + ASKED_HEAD + message


def sessions(store: StateStore) -> list[SessionSummary]:
    """Every session the store holds, most recently updated first."""
    by_session: dict[str, list[tuple[int, RunSummary]]] = {}
    for summary in store.list_runs():
        if summary.session and "/" in summary.session:
            session_id, _, number = summary.session.rpartition("/")
            by_session.setdefault(session_id, []).append((int(number) if number.isdigit() else 0, summary))
    found = []
    for session_id, turns in by_session.items():
        turns.sort(key=lambda pair: pair[0])
        last = max((summary for _, summary in turns), key=lambda summary: summary.updated)
        found.append(
            SessionSummary(session_id, len(turns), turns[0][1].request, last.updated, turns[-1][1].status)
        )
    return sorted(found, key=lambda session: session.updated, reverse=True)


def _mine(summaries: list[RunSummary], session_id: str) -> Iterator[tuple[int, str]]:
    """``(turn, run id)`` of each turn of ``session_id`` the store lists."""
    for summary in summaries:
        owner, _, number = (summary.session or "").rpartition("/")
        if owner == session_id and number.isdigit():
            yield int(number), summary.run_id


def _turn(number: int, message: str, state: OrchestrationState, result: dict[str, Any] | None) -> Turn:
    answer = (result or {}).get("answer")
    fact = next((call.result for call in reversed(state.tool_history) if call.result is not None), None)
    return Turn(number, state.run_id, message, state.status, answer, fact)
