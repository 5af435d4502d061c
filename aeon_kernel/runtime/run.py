"""A Run: one request driven cycle by cycle to a typed result (spec 000 FR-034…039, FR-049; pydantic-graph's GraphRun).

The run owns the cycle; its :class:`~aeon_kernel.runtime.scheduler.Scheduler` decides what each cycle does. Every
cycle spends one unit of TTL (FR-035) and ends with exactly one log record, built whether or not its work raised,
so failing cycles are logged too (FR-039); with a state store the cycle is committed before the record is handed
to the sinks. Nothing raised inside a cycle escapes as a bare exception: it becomes an error in the record and,
when the model stays unavailable (FR-049) or the store fails, a structured failed result. A ``BaseException``
that is not an ``Exception`` (Ctrl-C) is the exception: it stops the run as ``kill -9`` would — the cycle it cuts
short is never committed, logged or charged to the TTL — and propagates (``Run.interrupted`` says which).

Iterate a run (``for entry in run``), step it (``run.next()``), or drain it (``run.execute()``); ``run.state``
is an immutable snapshot at any time and ``run.result`` the :class:`RunResult` once it has ended. A run holds no
state on the components it shares, so several runs of one engine can be active at once.
This is the primary kernel module; spec SC-008 caps it at 800 lines.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from aeon_kernel.approvals import Approval, decided, deciding, decisions, waiting_on
from aeon_kernel.errors import (
    AeonError,
    ApprovalRequired,
    DeadlineError,
    LLMError,
    OrchestrationError,
    RunStoreError,
)
from aeon_kernel.llm.client import REQUEST, STARTED, begin_capture, end_capture, total_usage
from aeon_kernel.models import ConvergenceAssessment, LogEntry, OrchestrationState, RunStatus, utc_now
from aeon_kernel.runtime.context import Components, Cycle, Deferred, Hooks, RunContext, error_record
from aeon_kernel.runtime.scheduler import Conclusion, Preview, Scheduler, Verdict, Work
from aeon_kernel.runtime.state import RunState
from aeon_kernel.runtime.store import StateStore, StoredRun
from aeon_kernel.verification import UNVERIFIED, VERIFIED, Verification, reviews, verify

if TYPE_CHECKING:
    from aeon_kernel.runtime.stream import AsyncRunStream, RunStream

log = logging.getLogger("aeon")


@dataclass(frozen=True)
class RunResult:
    """How a run ended. ``to_dict()`` is the JSON form ``Orchestrator.execute`` returns and sinks receive."""

    run_id: str
    #: ``completed``, ``failed`` or ``ttl_expired`` (decision 0006)
    status: RunStatus
    #: the result of the last step that completed, or None
    answer: Any
    #: why the run ended as it did, and what to do next when it did not complete
    message: str
    errors: tuple[dict[str, Any], ...]
    convergence: ConvergenceAssessment | None
    #: the final state; kept on ``ttl_expired`` too (FR-036)
    state: OrchestrationState
    #: ``state`` as JSON, dumped once
    final_state: dict[str, Any]
    #: what the scheduler adds to the result (``Conclusion.details``), by key
    details: dict[str, Any] = field(default_factory=dict)
    #: how the result was checked, and the verdict the checks allow (decision 0018)
    verification: Verification | None = None
    _dict: dict[str, Any] | None = field(default=None, init=False, repr=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        """The JSON form, built once: every caller and the ``aeon_run_end`` sinks share it (read it, don't edit it)."""
        if self._dict is None:
            object.__setattr__(self, "_dict", self._build_dict())
        assert self._dict is not None
        return self._dict

    def _build_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "status": self.status,
            "plan": self.final_state["plan"],
            "answer": self.answer,
            "errors": list(self.errors),
            "message": self.message,
            "convergence": self.convergence.model_dump(mode="json") if self.convergence else None,
            "verification": self.verification.model_dump(mode="json") if self.verification else None,
            "final_state": self.final_state,
            **self.details,
        }


class Run:
    """One run of one request.

    :param state: where the run starts: a new state, or the one a store gave back (with ``resumed``).
    :param scheduler: decides each cycle's work; belongs to this run only.
    :param components: the model, memory, tools, ... (shared with other runs).
    :param hooks: where events go and where ``aeon_execute_step``/``aeon_invoke_tool`` are called.
    :param store: when given, every cycle is committed before it is logged, and the run can be resumed (FR-013).
    :param manifest: what produced the run; ``run_id`` and ``started`` are added.
    :param resumed: the stored run this one continues (claimed by the caller).
    :param deadline: seconds the run may take, counted from its first cycle: past it, the run ends ``failed``
        with a ``DeadlineError`` at the next cycle boundary (a cycle in progress is not interrupted).
    """

    def __init__(
        self,
        state: OrchestrationState,
        scheduler: Scheduler,
        components: Components,
        hooks: Hooks,
        *,
        store: StateStore | None = None,
        manifest: dict[str, Any] | None = None,
        resumed: StoredRun | None = None,
        deadline: float | None = None,
    ) -> None:
        self._scheduler = scheduler
        if manifest and manifest.get("output_schema") and not scheduler.writes_typed_output:
            raise OrchestrationError(
                f"the {type(scheduler).__name__} cannot write a typed output (output_type, --schema): run the "
                "request on the linear scheduler (the default), or ask for the text answer"
            )
        #: seconds the run may take from its first cycle; checked between cycles (one in progress runs to its end)
        self.deadline = deadline
        self._began = 0.0
        self.store = store
        self.manifest = {**(manifest or {}), "run_id": state.run_id, "started": utc_now()}
        self._resumed = resumed
        self._context = RunContext(
            RunState(state), components, hooks, output_schema=self.manifest.get("output_schema")
        )
        self._started = False
        self._fatal = False
        self._closed = False
        self.result: RunResult | None = None
        #: the name of the ``BaseException`` that is not an ``Exception`` (``KeyboardInterrupt``, ``SystemExit``)
        #: that stopped the run mid-way, or None: nothing of the cycle it cut short was committed (see ``next``)
        self.interrupted: str | None = None
        #: a person's answers to the calls that needed approval, by step (:mod:`aeon_kernel.approvals`)
        self._decisions = decisions(state.errors)

    # --- public API ----------------------------------------------------------------------------------------------

    @property
    def run_id(self) -> str:
        return self._context.run_id

    @property
    def resumed(self) -> bool:
        """Whether the run goes on from a state store."""
        return self._resumed is not None

    def observe(self, observer: Callable[[str, dict[str, Any]], None] | None) -> None:
        """Give every event this run emits to ``observer`` too, as ``(hook name, arguments)``, after the hooks (None:
        no more): how :meth:`stream` sees its run, and only it."""
        if observer is not None and self._context.observer is not None:
            raise OrchestrationError(f"run {self.run_id} is observed already (streamed twice?)")
        self._context.observer = observer

    def stream(self) -> RunStream:
        """Run it to the end, yielding its events as they happen (:mod:`aeon_kernel.events`): in a worker thread
        when its model streams its text, else cycle by cycle in this thread (``RunStream``)."""
        from aeon_kernel.runtime.stream import RunStream

        return RunStream(self, threaded=self._context.components.llm.adapter.supports_streaming())

    def astream(self) -> AsyncRunStream:
        """:meth:`stream` for asyncio: ``async for event in run.astream()``."""
        from aeon_kernel.runtime.stream import AsyncRunStream

        return AsyncRunStream(self)

    @property
    def scheduler(self) -> Scheduler:
        """The scheduler that decides this run's cycles (it belongs to this run only)."""
        return self._scheduler

    @property
    def state(self) -> OrchestrationState:
        """The state now, as an immutable snapshot (safe to keep)."""
        return self._context.state.snapshot()

    @property
    def done(self) -> bool:
        return self.result is not None

    @property
    def telemetry_errors(self) -> list[dict[str, Any]]:
        """Event hooks that raised during this run (the run went on)."""
        return self._context.telemetry_errors

    def next(self) -> LogEntry | None:
        """Run one cycle and return its log record; None once the run has ended (``result`` is then set)."""
        if self.result is not None:
            return None
        if self._closed:
            how = f"was interrupted ({self.interrupted})" if self.interrupted else "was closed"
            raise OrchestrationError(
                f"run {self.run_id} {how}; resume it to go on (Orchestrator.start_resume)"
            )
        try:
            if not self._started:
                self._start()
            if self._context.state.status == "waiting":
                self._wait()
                return None
            verdict = self._verdict()
            if verdict is not None:
                self._finish(verdict)
                return None
            return self._cycle()
        except Exception:
            raise
        except BaseException as exc:  # Ctrl-C, SystemExit, ...: the run stops here, as after kill -9
            self._interrupt(exc)
            raise

    def preview(self) -> Preview | None:
        """What the next cycle will do (:meth:`Scheduler.preview`), told without doing any of it; None when the run
        ends at its next step instead: it has ended or was closed, its TTL is spent, or its model or store failed."""
        if self.result is not None or self._closed or self._fatal or self._context.state.ttl_remaining <= 0:
            return None
        return self._scheduler.preview(self._context)

    def __iter__(self) -> Run:
        return self

    def __next__(self) -> LogEntry:
        entry = self.next()
        if entry is None:
            raise StopIteration
        return entry

    def execute(self) -> RunResult:
        """Run to the end and return the result."""
        while self.next() is not None:
            pass
        assert self.result is not None
        return self.result

    def approve(self, arguments: dict[str, Any] | None = None, *, by: str = "") -> None:
        """Approve the call this ``waiting`` run waits on (``arguments``: edited, checked against the tool's input
        schema), recorded — and committed, with a store — before the run goes on at the next ``next()``. Raises
        ``RunStoreError`` when it is not waiting. From another process: ``aeon approve RUN_ID``."""
        self.answer(Approval(arguments=arguments, by=by))

    def deny(self, reason: str, *, by: str = "") -> None:
        """Refuse the call this ``waiting`` run waits on: it fails with ``reason``, and the run goes on."""
        self.answer(Approval.deny(reason, by))

    def answer(self, approval: Approval) -> None:
        """:meth:`approve` or :meth:`deny`, given as one :class:`~aeon_kernel.kit.Approval`."""
        if self.result is None or self.result.status != "waiting" or self._closed:
            raise RunStoreError(f"run {self.run_id} is not waiting for approval")
        state, entry = decided(self.state, approval, self._context.components.tools)
        if self.store is not None:
            commit_record(self.store, state, entry, "answer it")
            self.store.claim(self.run_id)
        self._context.state.restore(state)
        self._decisions = decisions(state.errors)
        self.result = None
        if self._context.hooks.listens("aeon_cycle_end"):
            self._context.emit("aeon_cycle_end", entry=entry, state=state)

    def close(self) -> None:
        """Stop here: an unfinished run is released in its store and stays resumable."""
        if self.result is None and self._claimed and not self._closed and self.store is not None:
            self.store.release(self.run_id)
        self._closed = True

    @property
    def _claimed(self) -> bool:
        """Whether this run holds a claim in its store: a new one from its first cycle, a resumed one from the start."""
        return self._started or self._resumed is not None

    def __enter__(self) -> Run:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # --- the run's life ------------------------------------------------------------------------------------------

    def _start(self) -> None:
        self._started = True
        self._began = time.monotonic()
        context, resumed = self._context, self._resumed
        state = context.state.snapshot()
        if resumed is None:
            if self.store is not None:
                self.store.create_run(state, self.manifest)
        else:
            self.manifest["resumed_at_cycle"] = state.cycle
        if resumed is not None:
            context.emit("aeon_run_resumed", run_id=self.run_id, state=state, entries=resumed.entries)
        context.emit(
            "aeon_run_start", run_id=self.run_id, request=state.request, state=state, manifest=self.manifest
        )
        try:  # after the run's own events, so that whatever the scheduler reports follows them
            self._scheduler.start(context, resumed=resumed is not None)
        except Exception as exc:
            self._scheduler_failed("start", exc)

    def _interrupt(self, exc: BaseException) -> None:
        """Ctrl-C (or ``SystemExit``) stopped the run as a kill would: the cycle it cut short is neither committed,
        logged nor charged; the claim is released for ``resume``, and this object (holding the half cycle) is done."""
        self._context.cycle = None
        if self.result is not None:  # it had ended (an event hook after the end was interrupted)
            return
        self.interrupted = type(exc).__name__
        log.info(
            "run %s interrupted (%s); nothing of the cycle under way was committed",
            self.run_id,
            self.interrupted,
        )
        if self._claimed and not self._closed and self.store is not None:
            try:
                self.store.release(self.run_id)
            except Exception as failed:  # a stale claim is taken by the next resume anyway
                log.warning("could not release interrupted run %s: %s", self.run_id, failed)
        self._closed = True

    def _wait(self) -> None:
        """Stop until a person answers (decision 0021): the result says so and how, and the claim is released."""
        state = self._context.state.snapshot()
        request = waiting_on(state) or {}
        message = (
            f"waiting for approval: {request.get('message', 'a call needs approval')}. Approve it with: aeon approve "
            f"{self.run_id} (--deny REASON refuses it; in Python, run.approve() or run.deny(reason))"
        )
        self.result = RunResult(
            run_id=state.run_id,
            status="waiting",
            answer=None,
            message=message,
            errors=state.errors,
            convergence=None,
            state=state,
            final_state=state.model_dump(mode="json"),
            details={"approval": request},
        )
        if self._claimed and self.store is not None:
            self.store.release(self.run_id)

    def _verdict(self) -> Verdict | None:
        """Whether the run is over: the model or the store failed (FR-049), the scheduler says so, or the TTL."""
        if self._fatal:
            return Verdict("failed")
        try:
            verdict = self._scheduler.status(self._context)
        except Exception as exc:
            self._scheduler_failed("status", exc)
            return Verdict("failed")
        if verdict is None and self._context.state.ttl_remaining <= 0:
            return Verdict("ttl_expired")  # FR-005/036
        if verdict is None and self.deadline is not None and time.monotonic() - self._began > self.deadline:
            error = DeadlineError(
                f"the run's deadline of {self.deadline} s passed after {self._context.state.cycle} cycles; "
                "the state is kept. Give it more time (deadline=..., aeon run --deadline) or resume it."
            )
            self._context.record_error(error_record(error, phase="deadline"))
            return Verdict("failed")
        return verdict

    def _scheduler_failed(self, stage: str, exc: Exception) -> None:
        """A scheduler bug outside a cycle: recorded in the state, and the run ends failed (never a bare raise)."""
        log.exception("%s.%s failed", type(self._scheduler).__name__, stage)
        self._context.record_error(error_record(exc, phase=f"scheduler.{stage}"))
        self._fatal = True

    def _cycle(self) -> LogEntry:
        """One cycle: the scheduler's next unit of work; always ends with one log record."""
        context = self._context
        cycle = context.cycle = Cycle(context.state.plan())
        calls: list[dict[str, Any]] = []
        work: Work | None = None
        try:
            capture = begin_capture(calls)  # this cycle's model responses, whatever other runs do meanwhile
            try:
                work = self._scheduler.next_work(context)
                cycle.phase, cycle.step_id = work.phase, work.step_id
                if self._decisions:
                    with deciding(self._decisions):
                        outcome = self._scheduler.perform(work, context)
                else:
                    outcome = self._scheduler.perform(work, context)
                self._scheduler.apply(work, outcome, context)
            finally:
                end_capture(capture)
        except ApprovalRequired as asked:  # not a failure: the step stays running, and the run waits
            cycle.errors.append(asked.to_dict())
            context.state.finish("waiting")
        except Exception as exc:
            # Nothing escapes a cycle: the scheduler settles its state (a running step fails, FR-054) and the
            # error is logged (FR-039). A model that stays unavailable ends the run with a structured error (FR-049).
            if not isinstance(exc, AeonError):
                log.exception("unexpected error in cycle %d", context.state.cycle + 1)
            cycle.errors.append(error_record(exc, cycle.step_id, phase=cycle.phase))
            self._fatal = isinstance(exc, LLMError)
            try:
                self._scheduler.abandon(work, exc, context)
            except Exception as inner:  # a scheduler that cannot settle its state cannot go on
                log.exception("%s.abandon failed", type(self._scheduler).__name__)
                cycle.errors.append(error_record(inner, cycle.step_id, phase="abandon"))
                self._fatal = True
        # Not in a ``finally``: a BaseException that is not an Exception (Ctrl-C) leaves the cycle uncommitted.
        return self._close_cycle(cycle, calls)

    def _close_cycle(self, cycle: Cycle, calls: list[dict[str, Any]]) -> LogEntry:
        context = self._context
        state = context.state
        # the requests (prompts) and start times go to aeon_model_called, not into the state
        asked = [{"request": call.pop(REQUEST, None), STARTED: call.pop(STARTED, None)} for call in calls]
        state.end_cycle(cycle.tool_calls, calls, cycle.actions, cycle.errors, cycle.checks)
        step = state.step(cycle.step_id) if state.goal is not None and cycle.step_id else None
        # Built without re-validation: every part is already a validated kernel object (pydantic would
        # otherwise re-run the plan's validators on each cycle).
        entry = LogEntry.trusted(
            step_number=state.cycle,
            plan_state=cycle.plan_state,
            llm_output=calls[0] if calls else {},
            supervisor_actions=tuple(cycle.actions),
            tool_calls=tuple(cycle.tool_calls),
            ttl_remaining=state.ttl_remaining,
            errors=tuple(cycle.errors),
            timestamp=utc_now(),
            run_id=state.run_id,
            phase=cycle.phase,
            step_id=cycle.step_id,
            step_status=step.status if step else None,
            usage=total_usage(calls),
            duration_ms=round((time.perf_counter() - cycle.started) * 1000, 3),
            stages=tuple(cycle.stages),
            checks=tuple(cycle.checks),
        )
        context.cycle = None
        if self.store is not None:
            entry = self._commit(state.snapshot(), entry, calls)
        if calls and context.hooks.listens("aeon_model_called"):
            for number, (call, extra) in enumerate(zip(calls, asked, strict=True)):
                made = {**call, "number": number, **extra}
                context.emit("aeon_model_called", run_id=state.run_id, cycle=state.cycle, call=made)
        if context.hooks.listens("aeon_cycle_end"):
            context.emit("aeon_cycle_end", entry=entry, state=state.snapshot())
        elif context.observer is not None:  # only the run's stream hears it: the state is made if it is read
            context.observer("aeon_cycle_end", Deferred(state=state.snapshot, entry=lambda: entry))
        return entry

    def _commit(self, state: OrchestrationState, entry: LogEntry, calls: list[dict[str, Any]]) -> LogEntry:
        """Store the cycle before it is logged; a store that fails ends the run, and the log says why."""
        assert self.store is not None
        try:
            self.store.commit_cycle(state, entry, calls)
        except Exception as exc:
            log.error("the state store failed: %s: %s", type(exc).__name__, exc)
            error = error_record(exc, entry.step_id, phase="state_store")
            self._context.record_error(error)
            self._fatal = True
            return entry.model_copy(update={"errors": (*entry.errors, error)})
        return entry

    def _finish(self, verdict: Verdict) -> None:
        context = self._context
        if self._scheduler.reviews_tool_calls:
            working = context.state
            for check in reviews(working.request, working.tool_history, context.components.tools):
                context.record_check(check)
        verification = _verification(context.state, verdict.status)
        status = "failed" if verdict.status == "completed" and verification.contradicted else verdict.status
        context.state.finish(status)
        try:
            conclusion = self._scheduler.conclude(context.state.snapshot(), verdict)
        except Exception as exc:
            self._scheduler_failed("conclude", exc)
            conclusion = Conclusion(answer=None, message=f"the scheduler could not conclude: {exc}")
        message = conclusion.message
        if status != verdict.status:  # every step completed, but a check's finding stands (decision 0018)
            message = f"not verified: {verification.reason}; the answer is kept, but do not trust it"
        state = context.state.snapshot()
        result = RunResult(
            run_id=state.run_id,
            status=status,
            answer=conclusion.answer,
            message=message,
            errors=state.errors,
            convergence=verdict.convergence or conclusion.convergence,
            state=state,
            final_state=state.model_dump(mode="json"),
            details=conclusion.details,
            verification=verification,
        )
        if self.store is not None:
            try:
                self.store.finish_run(state, result.to_dict())
            except Exception as exc:
                log.error("the state store could not record the end of run %s: %s", state.run_id, exc)
                result = replace(result, errors=(*result.errors, error_record(exc, phase="state_store")))
        self.result = result
        context.emit("aeon_run_end", run_id=state.run_id, result=result.to_dict())
        try:
            self._scheduler.end(context)
        except Exception as exc:  # the result stands; what was not released only costs memory
            log.warning("%s.end failed for run %s: %s", type(self._scheduler).__name__, state.run_id, exc)


#: The ``type`` of the record that says a run was given more cycles (:func:`extend_ttl`).
TTL_EXTENDED = "TTLExtended"


def extend_ttl(store: StateStore, stored: StoredRun, cycles: int) -> StoredRun:
    """Give the stored run ``cycles`` more cycles, recorded in its history; the run as it is stored then.

    The extension is a cycle record of its own, committed like any other, that does no work and spends no TTL;
    its one ``errors`` entry (``type`` :data:`TTL_EXTENDED`) says "TTL extended by N at cycle C". A run whose TTL
    expired is ``running`` again from that commit on; an interrupted one gets ``cycles`` on top of what it had
    left; a completed or failed one cannot be continued (``RunStoreError``). The store refuses a record that does
    not follow the stored cycles, so of two processes extending a run at once, one does. Call it holding the
    run's claim, or, for a run whose TTL expired (which no claim can hold), before claiming it.
    """
    state, at = stored.state, stored.state.cycle
    if state.status not in ("running", "ttl_expired"):
        raise RunStoreError(
            f"run {state.run_id!r} already finished ({state.status}); only a run whose TTL expired, or one that "
            "was interrupted, can be continued with more cycles: run the request again"
        )
    expired = ": the run, whose TTL had expired, goes on" if state.status == "ttl_expired" else ""
    record = {
        "type": TTL_EXTENDED,
        "message": f"TTL extended by {cycles} at cycle {at}{expired}",
        "step_id": None,
        "phase": "ttl",
        "ttl_added": cycles,
        "at_cycle": at,
        "status_before": state.status,
    }
    entry = LogEntry(
        step_number=at + 1,
        plan_state=state.plan,
        llm_output={},
        ttl_remaining=state.ttl_remaining + cycles,
        errors=(record,),
        run_id=state.run_id,
        phase=stored.entries[-1].phase if stored.entries else "plan",
        usage={"llm_calls": 0},
    )
    changes = {"cycle": at + 1, "ttl_remaining": entry.ttl_remaining, "status": "running"}
    extended = state.model_copy(update={**changes, "errors": (*state.errors, record)})
    commit_record(store, extended, entry, "continue it")
    return StoredRun(state=extended, manifest=stored.manifest, entries=(*stored.entries, entry))


def commit_record(store: StateStore, state: OrchestrationState, entry: LogEntry, doing: str) -> None:
    """Commit a record that does no work (more TTL, a person's answer) as the next cycle, needing no claim; the
    store refuses it when another process committed that cycle first (``doing``: what the other may have done)."""
    try:
        store.commit_cycle(state, entry, [])
    except RunStoreError as exc:
        raise RunStoreError(
            f"run {state.run_id!r} could not {doing}: {exc} (did another process {doing} meanwhile? aeon runs "
            "shows it)"
        ) from None


def _verification(state: RunState, status: RunStatus) -> Verification:
    """What the run's checks allow it to claim; a run that did not complete is at best unverified."""
    verification = verify(state.checks, tool_calls=state.tool_history)
    if status != "completed" and verification.verdict == VERIFIED:
        reason = f"the run ended {status}: {verification.reason} for what did run"
        return verification.model_copy(update={"verdict": UNVERIFIED, "reason": reason})
    return verification
