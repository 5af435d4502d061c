"""How a run's result was checked (issue 26, decision 0018): the checks that ran, and what they let it claim.

Components record a :class:`Check` for each thing they verified or tried to — the planner on the plan, a tool's
:meth:`~aeon_kernel.tools.Tool.review` on a call, the grounding check on an answer, the convergence engine on the
run — through the ``record`` callback they already report supervisor actions to. The kernel keeps the checks
with the run (the state, each cycle's log line) and, when the run ends, sums them up in a :class:`Verification`:

- ``contradicted``: a check found a problem that was not resolved. The run cannot end ``completed``: it ends
  ``failed``, its answer kept, its message naming the finding.
- ``verified``: tools gave the answer, every tool call was reviewed and approved by its tool, and nothing failed.
- ``unverified``: nothing failed, but something the answer rests on could not be checked (a model's own answer, a
  tool that cannot review its calls, a check that was skipped); the reason says what.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final, Literal

from aeon_kernel.models import Check, CheckVerdict, FrozenModel

__all__ = [
    "ASKED_HEAD", "CONTRADICTED", "GIVEN_HEAD", "UNVERIFIED", "VERIFIED", "Check", "CheckVerdict", "Review",
    "Verification", "given_line", "given_results", "request_for", "request_parts", "reviews", "tool_reviews",
    "verify",
]  # fmt: skip

#: a run's overall verdict
VerdictName = Literal["verified", "unverified", "contradicted"]

VERIFIED: Final = "verified"
UNVERIFIED: Final = "unverified"
CONTRADICTED: Final = "contradicted"


class Review(FrozenModel):
    """A tool's review of a proposed call against the request (:meth:`~aeon_kernel.tools.Tool.review`).

    ``approved`` with no findings: the call does what the request asks of this tool. Not approved: each finding
    says what the call gets wrong ("the request says 'multiply' but the expression does not multiply"), in words
    a planner can be given back. ``unrelated``: the request asks nothing of this tool at all (a calculation for
    "translate 'cat' into French"); a planner then leaves the call out rather than run it.
    """

    approved: bool
    findings: tuple[str, ...] = ()
    unrelated: bool = False


class Verification(FrozenModel):
    """A run's verification record: every check that ran, and the overall verdict they allow."""

    verdict: VerdictName
    #: why the verdict is what it is: the unresolved finding, what could not be checked, or what was
    reason: str
    checks: tuple[Check, ...] = ()

    @property
    def contradicted(self) -> bool:
        return self.verdict == CONTRADICTED


def verify(checks: Iterable[Check], *, tool_calls: Sequence[Any] = ()) -> Verification:
    """The verdict ``checks`` allow for a run that made ``tool_calls`` (:class:`~aeon_kernel.models.ToolCall`).

    ``contradicted`` when a check failed; ``verified`` when at least one tool call completed, every completed call
    passed its tool's review, and no check was inconclusive or skipped; ``unverified`` otherwise. A ``resolved``
    check settles the inconclusive or skipped ones of its name and subject recorded before it, not those after.
    """
    checks = tuple(checks)
    failed = [c for c in checks if c.verdict == "failed"]
    if failed:
        return Verification(verdict=CONTRADICTED, reason=_finding(failed[0]), checks=checks)
    settled = {(c.name, c.subject): i for i, c in enumerate(checks) if c.verdict == "resolved"}
    doubts = [(i, c) for i, c in enumerate(checks) if c.verdict in ("inconclusive", "skipped")]
    doubtful = [c for i, c in doubts if settled.get((c.name, c.subject), -1) < i]
    if doubtful:
        return Verification(verdict=UNVERIFIED, reason=_finding(doubtful[0]), checks=checks)
    completed = [c for c in tool_calls if getattr(c, "error", None) is None]
    if not completed:
        reason = "no tool gave the answer: the model's own words cannot be checked"
        return Verification(verdict=UNVERIFIED, reason=reason, checks=checks)
    reviewed = {c.by for c in checks if c.name == "review" and c.verdict in ("passed", "resolved")}
    unreviewed = sorted({str(c.tool_name) for c in completed if c.tool_name not in reviewed})
    if unreviewed:
        reason = f"{', '.join(unreviewed)} cannot review its calls against the request"
        return Verification(verdict=UNVERIFIED, reason=reason, checks=checks)
    return Verification(
        verdict=VERIFIED, reason="every tool call was reviewed and every check passed", checks=checks
    )


def _finding(check: Check) -> str:
    where = f" (step {check.step_id})" if check.step_id else ""
    return f"{check.name}{where}: {check.detail or check.verdict}"


def tool_reviews(
    request: str, calls: Mapping[str, Sequence[Any]], tools: Any, *, whole_request: bool = False
) -> dict[str, Review | Exception]:
    """Each tool's review (:meth:`~aeon_kernel.tools.Tool.review`) of the calls made or proposed to it (``calls``,
    by tool name, each ``{"arguments", "result"}``), against the request without the text the other tools' calls
    took from it (:func:`request_for`; ``whole_request``: the request as it is). ``tools`` is the run's registry. A
    tool that cannot review is left out; a review that raised gives its exception, since it proves nothing."""
    found: dict[str, Review | Exception] = {}
    for name, made in calls.items():
        tool = tools.get(name)
        if tool is None:
            continue
        others = [c for other, theirs in calls.items() if other != name and not whole_request for c in theirs]
        try:
            review = tool.review(request_for(request, others), made)
        except Exception as exc:
            found[name] = exc
            continue
        if review is not None:
            found[name] = review
    return found


def reviews(request: str, calls: Sequence[Any], tools: Any, *, whole_request: bool = False) -> list[Check]:
    """The reviews of the calls a run made (:func:`tool_reviews`, ``whole_request`` passed on), as checks: one per
    tool that can review, in the order the tools were first called."""
    by_tool: dict[str, list[dict[str, Any]]] = {}
    for call in (c for c in calls if c.error is None):
        by_tool.setdefault(call.tool_name, []).append({"arguments": call.arguments, "result": call.result})
    checks = []
    for name, review in tool_reviews(request, by_tool, tools, whole_request=whole_request).items():
        if isinstance(review, Exception):  # the calls are not verified
            detail = f"the review failed: {type(review).__name__}: {review}"
            checks.append(_review_check(name, "inconclusive", detail))
        else:
            found = " ".join(review.findings) or None
            checks.append(_review_check(name, "passed" if review.approved else "failed", found))
    return checks


#: how a request starts when its caller puts context before what is asked (a session's earlier turns); the asked
#: part follows the first line that starts with :data:`ASKED_HEAD`
GIVEN_HEAD: Final = "Earlier in this conversation:\n"
ASKED_HEAD: Final = "\nNow: "


def request_parts(request: str) -> tuple[str, str]:
    """``(given, asked)``: the context a caller put before the request (facts a check may use) and what is asked
    (what the plan and the calls must do). A request without that context is all asked."""
    if request.startswith(GIVEN_HEAD):
        given, found, asked = request[len(GIVEN_HEAD) :].partition(ASKED_HEAD)
        if found:
            return given, asked
    return "", request


def given_line(asked: str, answer: Any, result: Any) -> str:
    """One earlier turn as a line of the given part: what was asked, what was answered and, as JSON, the result a
    tool gave (what a reviewer may hold a follow-up to: :func:`given_results`)."""
    said = f'asked "{asked}"'
    if answer is not None:
        said += f"; answered: {answer if isinstance(answer, str) else json.dumps(answer, ensure_ascii=False)}"
    if result is not None:
        said += f"; result: {json.dumps(result, ensure_ascii=False)}"
    return "- " + " ".join(said.split())  # one line: a line break would end the given part early


def given_results(given: str) -> list[Any]:
    """The results the lines of a request's given part state (:func:`given_line`), oldest first."""
    found = []
    for line in given.splitlines():
        _, marked, text = line.rpartition("; result: ")
        if marked:
            try:
                found.append(json.loads(text))
            except ValueError:
                continue
    return found


def request_for(request: str, others: Iterable[Any]) -> str:
    """The request as one tool reviews it: the text other tools' calls took from it word for word (an echoed
    "alert(1)") left out, since it is theirs to review, not this tool's."""
    for call in others:
        arguments = call.get("arguments") if isinstance(call, dict) else None
        for value in (arguments or {}).values() if isinstance(arguments, dict) else ():
            if isinstance(value, str) and len(value) > 2:
                request = re.sub(re.escape(value), " ", request, flags=re.IGNORECASE)
    return request


def _review_check(tool: str, verdict: CheckVerdict, detail: str | None) -> Check:
    return Check(name="review", subject="tool_call", verdict=verdict, detail=detail, by=tool)
