"""Policies (spec 004 §10.5, issue 17): what may run, decided before it runs.

Permissions say what a tool *can* be asked to do at all; policies judge each request as it comes, from what it
touches: the tool, its arguments, the paths and hosts it names (``Tool.resources``), the flow node asking. Every
policy ``[policy] use`` names is asked before every tool call, flow stage and model step; one denial is enough. A denial
is a failed tool call (or a failed stage) carrying the policy and the rule that denied it, recorded like any other
failure — it never changes where a run or a flow goes next.

What a call touches but can only be known while it runs — the host a redirect leads to — is judged the same way
before the tool touches it: the tool calls :meth:`~aeon_kernel.Tool.check_resources`, which asks the same policies
about the same call with those resources, and a denial fails the call there.

A policy is a component (``aeon_register_policies``), so an organisation can plug in its own evaluator; the
declarative rules of ``aeon.toml`` are the built-in ``rules`` policy.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Generator, Sequence
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from aeon_kernel.approvals import ask
from aeon_kernel.errors import PolicyDeniedError
from aeon_kernel.invocation import ToolContext, describe, failed_call_error
from aeon_kernel.markers import hookimpl
from aeon_kernel.models import PlanStep, StepExecutionResult, ToolCall, utc_now
from aeon_kernel.tools import Tool, judged_by

if TYPE_CHECKING:
    from aeon_kernel.steps import StepContext


class PolicyAction(BaseModel):
    """One thing about to happen, as a policy sees it."""

    model_config = ConfigDict(frozen=True)

    #: ``tool_call`` (a tool about to be invoked), ``stage`` (a flow node about to run) or ``model_step`` (a plan
    #: step the model is about to answer)
    kind: Literal["tool_call", "stage", "model_step"]
    run_id: str
    #: the plan step, or ``task/node`` for a flow stage
    stage: str
    #: the flow node, when the action is part of a flow
    node: str | None = None
    #: the tool about to be called (``tool_call`` only)
    tool: str | None = None
    arguments: dict[str, Any] = Field(default_factory=dict)
    #: what the call touches, from ``Tool.resources``: ``{"path": [...], "host": [...]}``; paths relative to the
    #: tool's root or, outside it, absolute; ``unresolved`` for what the tool could not work out
    resources: dict[str, list[str]] = Field(default_factory=dict)
    #: the tools a stage may call (``stage`` only)
    tools: tuple[str, ...] = ()
    #: what the node or model will be shown, ``{"layer", "key", "value"}``: a stage's assembled context (spec 004
    #: §10.5); for a model step, the request, the step and the results of the steps before it
    context: tuple[dict[str, Any], ...] = ()


class PolicyDecision(BaseModel):
    """A policy's verdict on an action: allowed or not, and by which rule; or, with ``ask``, allowed once a person
    approves it (:mod:`aeon_kernel.approvals`: the run waits for the answer)."""

    model_config = ConfigDict(frozen=True)

    allowed: bool
    #: the rule that decided, as the user named it (``deny[0]``, ``no-secrets``, ``default``)
    rule: str
    reason: str = ""
    #: the action may go on only once a person approves it (a tool call or a flow stage; a model step, or what a
    #: running call reports, cannot wait: asked about, it is refused)
    ask: bool = False
    #: seconds a person has to answer, counted from the request; an answer after that fails the call
    expires_in: float | None = Field(default=None, gt=0)


class Policy(ABC):
    """Judges actions before they run. Return None to have no opinion (the action goes on unless another
    policy denies it); raising is a denial too, since a policy that cannot decide must not let things through."""

    @abstractmethod
    def evaluate(self, action: PolicyAction) -> PolicyDecision | None: ...


def denial(policies: Sequence[tuple[str, Policy]], action: PolicyAction) -> PolicyDeniedError | None:
    """The first denial of ``action`` by ``policies`` (``(name, policy)`` pairs), or None when all allow it. A
    policy that asks for approval denies here: only a tool call or a flow stage, judged by :func:`refusal`, can wait
    for one."""
    refused, asked = judged(policies, action)
    if refused is None and asked is not None:
        name, decision = asked
        why = "; approval can be asked only before a tool call or a flow stage runs, so it was refused"
        return _refusal(name, decision, action, why)
    return refused


def judged(
    policies: Sequence[tuple[str, Policy]], action: PolicyAction
) -> tuple[PolicyDeniedError | None, tuple[str, PolicyDecision] | None]:
    """The first denial of ``action`` by ``policies``, and the first policy that asks for a person's approval."""
    asked = None
    for name, policy in policies:
        try:
            decision = policy.evaluate(action)
        except Exception as exc:
            return PolicyDeniedError(
                f"the policy {name!r} failed while judging this call ({type(exc).__name__}: {describe(exc)}), "
                "so it was refused",
                policy=name,
                rule="error",
            ), None
        if decision is not None and decision.ask:
            asked = asked or (name, decision)
        elif decision is not None and not decision.allowed:
            return _refusal(name, decision, action), None
    return None, asked


def refusal(
    policies: Sequence[tuple[str, Policy]],
    action: PolicyAction,
    subject: str,
    arguments: Any,
    what: str | None = None,
) -> PolicyDeniedError | None:
    """Why ``action`` may not go on: a policy's denial, or a person's refusal of what a policy asked about; None
    when it may. While nobody answered, :func:`~aeon_kernel.approvals.ask` raises ``ApprovalRequired`` (the run
    waits): ``subject`` and ``arguments`` are what the person is shown (a tool and its call, a node and its input)."""
    refused, asked = judged(policies, action)
    if refused is not None or asked is None:
        return refused
    name, decision = asked
    try:
        ask(
            subject,
            arguments,
            action.stage,
            policy=name,
            rule=decision.rule,
            reason=decision.reason,
            expires_in=decision.expires_in,
            what=what,
        )
    except PolicyDeniedError as answered:
        return answered
    return None


def _refusal(name: str, decision: PolicyDecision, action: PolicyAction, more: str = "") -> PolicyDeniedError:
    what = (
        f"{action.tool} call"
        if action.kind == "tool_call"
        else f"{action.kind.replace('_', ' ')} {action.stage}"
    )
    because = f": {decision.reason}" if decision.reason else ""
    return PolicyDeniedError(
        f"the {what} was denied by rule {decision.rule!r} of the policy {name!r}{because}{more}",
        policy=name,
        rule=decision.rule,
    )


class PolicyGate:
    """The ``aeon_invoke_tool`` implementation that asks the policies first (``tryfirst``): a denied call is
    answered with its refusal and never reaches the tool; an allowed one goes on to the next implementation. Around
    them all (a wrapper), the same policies judge whatever the call reports while it runs
    (:meth:`~aeon_kernel.Tool.check_resources`)."""

    def __init__(self, policies: Sequence[tuple[str, Policy]]) -> None:
        self.policies = tuple(policies)

    @hookimpl(specname="aeon_invoke_tool", wrapper=True)
    def judge_while_running(
        self, tool: Tool, arguments: dict[str, Any], context: ToolContext
    ) -> Generator[None, ToolCall | None, ToolCall | None]:
        def judge(asking: Tool, resources: dict[str, list[str]]) -> None:
            action = PolicyAction(
                kind="tool_call",
                run_id=context.run_id,
                stage=context.step_id,
                node=context.node,
                tool=asking.name,
                arguments=arguments,
                resources=resources,
            )
            refused = denial(self.policies, action)
            if refused is not None:
                raise refused

        with judged_by(judge):
            return (yield)

    @hookimpl(tryfirst=True)
    def aeon_execute_step(self, step: PlanStep, context: StepContext) -> StepExecutionResult | None:
        """A step the model answers is judged before the model is asked (a tool step's call is judged as one)."""
        if step.tool is not None:
            return None
        state = context.snapshot()
        shown = [("request", state.request), ("step", step.description)]
        done = [s for s in (state.plan.steps if state.plan else ()) if s.result is not None]
        shown += [(f"result of step {s.step_id}", s.result) for s in done]
        action = PolicyAction(
            kind="model_step",
            run_id=context.run_id,
            stage=step.step_id,
            context=tuple({"layer": "run", "key": key, "value": value} for key, value in shown),
        )
        refused = denial(self.policies, action)
        return (
            None
            if refused is None
            else StepExecutionResult(success=False, error=str(refused), execution_mode="llm")
        )

    @hookimpl(tryfirst=True)
    def aeon_invoke_tool(
        self, tool: Tool, arguments: dict[str, Any], context: ToolContext
    ) -> ToolCall | None:
        try:
            resources = tool.resources(arguments)
            action = PolicyAction(
                kind="tool_call",
                run_id=context.run_id,
                stage=context.step_id,
                node=context.node,
                tool=tool.name,
                arguments=arguments,
                resources=resources,
            )
        except Exception as exc:
            refused: PolicyDeniedError | None = PolicyDeniedError(
                f"what the call touches could not be worked out ({type(exc).__name__}: {describe(exc)}), "
                "so it was refused",
                policy="kernel",
                rule="resources",
            )
        else:
            refused = refusal(self.policies, action, tool.name, arguments)
        if refused is None:
            return None
        return ToolCall(
            tool_name=tool.name,
            arguments=arguments,
            step_id=context.step_id,
            error=failed_call_error(tool.name, refused),
            duration_ms=0.0,
            timestamp=utc_now(),
        )
