"""A run as the inspector sees it, whatever it was read from: a line of the list, and the run whole.

Cycle records are kept as the JSON dicts the store or the log holds (``LogEntry`` dumps), without their plan:
rebuilding a plan snapshot per cycle would cost cycles x steps (a 10,000-cycle run steps through a plan of
10,000 steps). A :class:`PlanHistory` rebuilds the plan of the one cycle a page asks for.
"""

from __future__ import annotations

import bisect
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from aeon_cli.inspect.artifacts import ArtifactReader
from aeon_cli.inspect.problems import Unreadable
from aeon_cli.inspect.prompts import cassette_path, match_prompts
from aeon_cli.stats import run_stats

#: step statuses after which a step does not change again
TERMINAL = frozenset({"complete", "failed"})


@dataclass(frozen=True)
class RunInfo:
    """One line of the list of runs. Figures a source cannot give cheaply are None (shown as a dash)."""

    key: str
    run_id: str
    request: str | None
    status: str
    started: str
    cycles: int
    llm_calls: int | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    errors: int | None = None
    duration_ms: float | None = None
    #: the flow's name, for a flow run
    flow: str | None = None
    #: the plan's goal, shown where the source does not keep the request (a JSONL log)
    goal: str | None = None
    #: the status was read from the last cycle, not recorded (a JSONL log has no end-of-run line)
    status_inferred: bool = False

    @property
    def tokens(self) -> int | None:
        if self.prompt_tokens is None and self.completion_tokens is None:
            return None
        return (self.prompt_tokens or 0) + (self.completion_tokens or 0)

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.key,
            "run_id": self.run_id,
            "request": self.request,
            "goal": self.goal,
            "status": self.status,
            "status_inferred": self.status_inferred,
            "started": self.started,
            "cycles": self.cycles,
            "llm_calls": self.llm_calls,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "errors": self.errors,
            "duration_ms": self.duration_ms,
            "flow": self.flow,
        }


class PlanHistory(ABC):
    """The plan as it stood after each cycle, rebuilt on demand."""

    @abstractmethod
    def after(self, index: int) -> dict[str, Any] | None:
        """The plan (a ``Plan`` dump) after the cycle at ``index`` (0-based), or None while there was none."""


class FinalPlan(PlanHistory):
    """A state store's history: the final plan, and each cycle's step and its status after the cycle.

    Steps run in order and a step changes only in its own cycle, so after cycle ``i`` a step has the status its
    last cycle up to ``i`` left it with (its result only once that is its final status), else ``pending``. As for
    the store's own snapshots, a plan replaced during the run (multi-pass refinement) shows its final steps.
    """

    def __init__(self, plan: Mapping[str, Any] | None, entries: Sequence[Mapping[str, Any]]) -> None:
        self.plan = plan
        self.entries = entries

    def after(self, index: int) -> dict[str, Any] | None:
        made = any(
            entry.get("phase") != "plan" or not entry.get("errors") for entry in self.entries[: index + 1]
        )
        if self.plan is None or not made:  # every cycle so far failed to plan
            return None
        seen: dict[str, str] = {}
        for entry in self.entries[: index + 1]:
            step_id, status = entry.get("step_id"), entry.get("step_status")
            if isinstance(step_id, str) and isinstance(status, str):
                seen[step_id] = status
        steps = []
        for step in self.plan.get("steps", []):
            status = seen.get(step.get("step_id"))
            if status is None:
                steps.append({**step, "status": "pending", "result": None, "failure": None})
            elif status != step.get("status"):
                steps.append({**step, "status": status, "result": None, "failure": None})
            else:
                steps.append(dict(step))
        return {**self.plan, "steps": steps}


@dataclass
class LoggedPlans(PlanHistory):
    """A JSONL log's history: the plan at the start of some cycles whole (``plan_state``), of the others only the
    steps that changed (``plan_changes``). The plan at a cycle's start is the nearest whole one with the changes
    after it applied; the plan after a cycle is the next cycle's, or (for the last) its own with its step's
    status."""

    entries: Sequence[Mapping[str, Any]]
    #: cycle index -> the plan at its start (None: no plan yet), for cycles whose line carried it whole
    whole: dict[int, dict[str, Any] | None] = field(default_factory=dict)
    #: cycle index -> the steps that changed since the previous cycle's line
    changes: dict[int, list[dict[str, Any]]] = field(default_factory=dict)

    @cached_property
    def _bases(self) -> list[int]:
        return sorted(self.whole)

    def at_start(self, index: int) -> dict[str, Any] | None:
        at = bisect.bisect_right(self._bases, index) - 1
        if at < 0:
            return None
        base = self._bases[at]
        plan = self.whole[base]
        if plan is None:
            return None
        steps = {step.get("step_id"): step for step in plan.get("steps", [])}
        for cycle in range(base + 1, index + 1):
            for step in self.changes.get(cycle, ()):
                steps[step.get("step_id")] = step
        return {**plan, "steps": list(steps.values())}

    def after(self, index: int) -> dict[str, Any] | None:
        if index + 1 < len(self.entries):
            following = self.at_start(index + 1)
            if following is not None:
                return following
        plan = self.at_start(index)
        if plan is None:
            return None
        entry = self.entries[index]
        step_id, status = entry.get("step_id"), entry.get("step_status")
        return {
            **plan,
            "steps": [
                {**step, "status": status} if step.get("step_id") == step_id and status else step
                for step in plan["steps"]
            ],
        }


@dataclass(frozen=True)
class Prompts:
    """A cycle's prompts: each call's request by call number, and where they were found (for the page)."""

    source: str
    requests: dict[int, dict[str, Any]]


@dataclass
class RunData:
    """A run whole: its line, manifest, cycle records (without plans), the model calls of each cycle, the plan
    history and, from a store, how it ended."""

    info: RunInfo
    manifest: dict[str, Any]
    entries: list[dict[str, Any]]
    #: the model calls of each cycle, in order
    calls: list[list[dict[str, Any]]]
    #: False where the source keeps only each cycle's first model call (a JSONL log's ``llm_output``)
    every_call: bool
    plans: PlanHistory
    #: the run's end as the store recorded it (answer, message, status); None from a log or while running
    result: dict[str, Any] | None = None
    #: where it was read from, for the page
    where: str = ""
    #: the artifact store the catalog reads (set by :class:`~.sources.Catalog`): it keeps every call's prompt
    artifacts: ArtifactReader | None = None
    #: a multi-pass run's events as its log kept them (``pass_number``, ``event``, ``record``, ``cycle``); None:
    #: read them from the artifact store (:meth:`pass_events`)
    passes: list[dict[str, Any]] | None = None
    #: cycle index -> its prompts as :meth:`prompts_of` found them in the artifact store (a cycle's are final)
    _stored_prompts: dict[int, Prompts] = field(default_factory=dict, repr=False)

    @cached_property
    def stats(self) -> dict[str, Any]:
        """``aeon stats``'s figures: per cycle, per tool, and the run's totals."""
        return run_stats(self.entries)

    def prompts_of(self, index: int) -> Prompts:
        """The requests (prompts included) of cycle ``index``'s model calls, by call number, and where they were
        found: the artifact store's ``model_call`` artifacts, else the run's cassette matched by output."""
        if index in self._stored_prompts:
            return self._stored_prompts[index]
        if self.artifacts is not None:
            cycle = self.entries[index].get("step_number", index + 1)
            try:
                kept = self.artifacts.model_calls(self.info.run_id, int(cycle))
            except Unreadable:
                kept = []
            requests = {
                call["number"]: call["request"]
                for call in kept
                if isinstance(call.get("number"), int) and isinstance(call.get("request"), dict)
            }
            if requests:
                found = Prompts(f"the artifact store {self.artifacts.where}", requests)
                self._stored_prompts[index] = found
                return found
        matched = {number: request for (at, number), request in self._cassette.items() if at == index}
        return Prompts(f"the cassette {cassette_path(self.manifest)}, matched by output", matched)

    def pass_events(self) -> list[dict[str, Any]]:
        """A multi-pass run's events (spec 003), in order, each with its cycle: from the log that kept them, else
        the artifact store's ``pass_event`` artifacts; [] for other runs."""
        if self.passes is not None:
            return self.passes
        if self.artifacts is None:
            return []
        try:
            kept = self.artifacts.of_kind(self.info.run_id, "pass_event")
        except Unreadable:
            return []
        return [{**value, "cycle": cycle} for cycle, value in kept if isinstance(value, dict)]

    @cached_property
    def _cassette(self) -> dict[tuple[int, int], dict[str, Any]]:
        """(cycle index, call index) -> the request the run's cassette holds for that model call."""
        return match_prompts(self.manifest, self.info.request, self.calls)

    @cached_property
    def stages(self) -> list[tuple[int, dict[str, Any]]]:
        """A flow run's stage records with the index of their cycle, in order."""
        return [
            (index, stage) for index, entry in enumerate(self.entries) for stage in entry.get("stages") or ()
        ]

    @property
    def is_flow(self) -> bool:
        return self.info.flow is not None or bool(self.stages)

    def final_plan(self) -> dict[str, Any] | None:
        return self.plans.after(len(self.entries) - 1) if self.entries else None
