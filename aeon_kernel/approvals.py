"""Approvals (issue 29, decision 0021): a tool call that waits for a person, as durable as the run.

A policy may answer *ask* (``PolicyDecision(ask=True)``; the ``rules`` policy's ``[[policy.rules.ask]]``), and a
tool may name permissions whose every use needs approval (``Tool.ask``, ``[tools.<name>] ask``). Such a call
does not run: :func:`ask` raises :class:`ApprovalRequired`; the run records the request in that cycle's record
(an ``errors`` entry of type :data:`REQUESTED`), commits it with the status ``waiting`` and stops; the process
may exit. A person's answer (:class:`Approval`) is a record of its own (type :data:`DECIDED`), committed like
the TTL extension — it does no work and spends no TTL — which puts the approved arguments (as proposed, or
edited) into the step and makes the run ``running`` again. The step then runs again, and its call finds the
answer: approved with these arguments, it runs; denied or expired, it fails as a policy's denial does.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Final

from aeon_kernel.errors import ApprovalRequired, PolicyDeniedError, RunStoreError, ValidationError
from aeon_kernel.models import LogEntry, OrchestrationState, StepStatus, utc_now

if TYPE_CHECKING:
    from aeon_kernel.tools import ToolRegistry

#: the ``type`` of the record of a call that waits for approval
REQUESTED: Final = "ApprovalRequested"
#: the ``type`` of the record of a person's answer
DECIDED: Final = "ApprovalDecided"

#: the answers recorded for the run whose cycle runs in this context, by step (see :func:`deciding`)
_DECISIONS: ContextVar[Mapping[str, dict[str, Any]] | None] = ContextVar("aeon_approvals", default=None)


@dataclass(frozen=True)
class Approval:
    """A person's answer to the call a run waits on: approved (``arguments``: edited ones, checked against the
    tool's input schema) or refused with a ``reason``."""

    approved: bool = True
    reason: str = ""
    #: who answered, as they want it recorded
    by: str = ""
    arguments: dict[str, Any] | None = field(default=None)

    @classmethod
    def deny(cls, reason: str, by: str = "") -> Approval:
        return cls(approved=False, reason=reason, by=by)


@contextmanager
def deciding(decisions: Mapping[str, dict[str, Any]]) -> Iterator[None]:
    """While the block runs (a cycle), :func:`ask` finds the answers in ``decisions`` (by step)."""
    token = _DECISIONS.set(decisions)
    try:
        yield
    finally:
        _DECISIONS.reset(token)


def decisions(errors: Iterable[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The latest answer for each step, from a run's records."""
    return {record["step_id"]: record for record in errors if record.get("type") == DECIDED}


def ask(
    tool: str,
    arguments: dict[str, Any],
    step_id: str,
    *,
    policy: str,
    rule: str,
    reason: str = "",
    expires_in: float | None = None,
    what: str | None = None,
) -> None:
    """Return when a person approved this call with these ``arguments``; raise :class:`PolicyDeniedError` when they
    refused it (or the request expired), else :class:`ApprovalRequired` with the request to record. ``what``: how
    to name it, when it is not a tool call (a flow's stage: ``tool`` is then the node, ``arguments`` its input)."""
    decision = (_DECISIONS.get() or {}).get(step_id)
    if decision is not None and decision["tool"] == tool:
        if decision["decision"] != "approved":
            named = decision.get("what") or f"the {tool} call"
            raise PolicyDeniedError(
                f"{named} was not approved ({decision['decision']}): {decision['reason'] or 'no reason given'}",
                policy=decision["policy"],
                rule=decision["rule"],
            )
        if decision["arguments"] == arguments:
            return
    now, what = datetime.now(UTC), what or f"the {tool} call"
    because = f": {reason}" if reason else ""
    raise ApprovalRequired(
        {
            "type": REQUESTED,
            "message": f"{what} of step {step_id} needs approval (rule {rule!r} of {policy!r}{because})",
            "what": what,
            "step_id": step_id,
            "tool": tool,
            "arguments": arguments,
            "policy": policy,
            "rule": rule,
            "reason": reason,
            "requested_at": utc_now(),
            "expires_at": None
            if expires_in is None
            else (now + timedelta(seconds=expires_in)).isoformat(timespec="milliseconds"),
        }
    )


def waiting_on(state: OrchestrationState) -> dict[str, Any] | None:
    """The request a ``waiting`` run waits on (its last), or None."""
    if state.status != "waiting":
        return None
    return next((e for e in reversed(state.errors) if e.get("type") == REQUESTED), None)


def answered(state: OrchestrationState) -> bool:
    """Whether a person answered the last call ``state`` asked approval for (False: it never asked)."""
    kinds = [e.get("type") for e in state.errors if e.get("type") in (REQUESTED, DECIDED)]
    return bool(kinds) and kinds[-1] == DECIDED


def decided(
    state: OrchestrationState, approval: Approval, tools: ToolRegistry
) -> tuple[OrchestrationState, LogEntry]:
    """The waiting run ``state`` with ``approval`` recorded: the new state (``running``; the step holds the
    approved arguments) and the record of the answer, to commit as the next cycle (no work, no TTL spent).

    Raises :class:`RunStoreError` when the run is not waiting, and :class:`ValidationError` for edited arguments
    the tool's input schema refuses (nothing is recorded then). An answer given after the request's
    ``expires_at`` is recorded as ``expired``: the call fails."""
    request = waiting_on(state)
    if request is None:
        raise RunStoreError(f"run {state.run_id!r} is not waiting for approval (it is {state.status})")
    arguments = request["arguments"] if approval.arguments is None else approval.arguments
    if approval.approved and approval.arguments is not None and state.plan is None:
        raise ValidationError("a flow's call or stage cannot be edited: approve it as it is, or refuse it")
    if approval.approved and approval.arguments is not None:
        tool = tools.get(request["tool"])
        if tool is None:
            raise ValidationError(f"the tool {request['tool']!r} the run waits on is not registered here")
        tool.validate_input(**arguments)
    expires = request.get("expires_at")
    expired = expires is not None and utc_now() > expires
    verdict = "expired" if expired else "approved" if approval.approved else "denied"
    reason = f"the request expired at {expires}" if expired else approval.reason
    what = request.get("what") or f"the {request['tool']} call"
    record = {
        "type": DECIDED,
        "message": f"{what} of step {request['step_id']} was {verdict}"
        + (f" by {approval.by}" if approval.by else "")
        + (f": {reason}" if reason else ""),
        "what": what,
        "step_id": request["step_id"],
        "tool": request["tool"],
        "decision": verdict,
        "arguments": arguments,
        "edited": approval.arguments is not None and arguments != request["arguments"],
        "by": approval.by,
        "reason": reason,
        "at": utc_now(),
        "policy": request["policy"],
        "rule": request["rule"],
    }
    plan, step_id = state.plan, request["step_id"]
    in_plan = plan is not None and any(step.step_id == step_id for step in plan.steps)
    if in_plan and verdict == "approved":
        assert plan is not None
        steps = tuple(
            s.model_copy(update={"arguments": arguments})
            if s.step_id == step_id and s.tool == request["tool"]
            else s
            for s in plan.steps
        )
        plan = plan.model_copy(update={"steps": steps})
    entry = LogEntry(
        step_number=state.cycle + 1,
        plan_state=plan,
        llm_output={},
        ttl_remaining=state.ttl_remaining,
        errors=(record,),
        run_id=state.run_id,
        phase="step" if in_plan else "node",
        step_id=step_id,
        step_status=StepStatus.RUNNING if in_plan else None,
        usage={"llm_calls": 0},
    )
    changes = {"cycle": state.cycle + 1, "status": "running", "plan": plan, "errors": (*state.errors, record)}
    return state.model_copy(update=changes), entry
