"""The run being stepped through, as the inspector's pages see it: a moment published between two cycles.

A :class:`Moment` is built by the thread that drives the run, while no cycle runs, from the run's immutable state
snapshot and the cycle records so far; the server's threads only read it. Its :class:`RunData` is the same a
state store would give for the run — so the run's page, its timeline and its cycles are the recorded-run views,
unchanged — and is built once per moment, when a page first asks.

:class:`LiveRuns` puts the run in the inspector's catalog under the source ``live``.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

from aeon_cli.inspect.control import Control
from aeon_cli.inspect.problems import Unreadable
from aeon_cli.inspect.records import FinalPlan, RunData, RunInfo
from aeon_cli.inspect.sources import RunSource, split_calls
from aeon_kernel.models import OrchestrationState

KEY = "live"


def _number(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0


@dataclass(frozen=True)
class Moment:
    """The run between two cycles (or at its end): what the page shows."""

    state: OrchestrationState
    #: the cycle records so far (``LogEntry`` dumps without their plan), oldest first
    entries: tuple[dict[str, Any], ...]
    manifest: dict[str, Any]
    #: what the next cycle will do (:mod:`aeon_cli.inspect.pending`); None when no cycle is left
    pending: dict[str, Any] | None = None
    #: the run's result (``RunResult.to_dict()``) once it has ended
    result: dict[str, Any] | None = None
    #: why the run stopped and how to go on, once stopped
    stopped: str | None = None
    #: stopping now leaves the run resumable: it has a state store, and has started (with its first cycle)
    resumable: bool = False

    @property
    def run_id(self) -> str:
        return self.state.run_id

    @property
    def flow(self) -> str | None:
        flow = self.manifest.get("flow")
        name = flow.get("name") if isinstance(flow, dict) else None
        return name if isinstance(name, str) else None

    @cached_property
    def data(self) -> RunData:
        """The run so far, as a store would give it (built once, by the first page that asks)."""
        state, entries = self.state, list(self.entries)
        usage = [entry.get("usage") or {} for entry in entries]
        calls = split_calls(list(state.llm_outputs), entries)
        status = "stopped" if self.stopped else "running"
        if self.result is not None:
            status = str(self.result.get("status"))
        info = RunInfo(
            key=KEY,
            run_id=state.run_id,
            request=state.request,
            status=status,
            started=str(self.manifest.get("started", "")),
            cycles=len(entries),
            llm_calls=sum(len(made) for made in calls),
            prompt_tokens=sum(int(_number(u.get("prompt_tokens"))) for u in usage),
            completion_tokens=sum(int(_number(u.get("completion_tokens"))) for u in usage),
            errors=sum(len(entry.get("errors") or ()) for entry in entries),
            duration_ms=round(sum(_number(entry.get("duration_ms")) for entry in entries), 3),
            flow=self.flow,
            goal=state.plan.goal if state.plan is not None else None,
        )
        plan = state.plan.model_dump(mode="json") if state.plan is not None else None
        return RunData(
            info=info,
            manifest=self.manifest,
            entries=entries,
            calls=calls,
            every_call=True,
            plans=FinalPlan(plan, entries),
            result=self.result,
            where="this run, live (aeon run --inspect)",
        )


class LiveRuns(RunSource):
    """The catalog's source for the one run a step-through session drives: whatever moment it published last."""

    def __init__(self, control: Control) -> None:
        super().__init__(KEY, "the run this command drives")
        self.control = control

    def _moment(self) -> Moment | None:
        moment = self.control.look().moment
        return moment if isinstance(moment, Moment) else None

    def runs(self) -> list[RunInfo]:
        moment = self._moment()
        return [] if moment is None else [moment.data.info]

    def run(self, run_id: str) -> RunData:
        moment = self._moment()
        if moment is None or moment.run_id != run_id:
            raise Unreadable(f"no run {run_id!r} here: this server shows the run it drives")
        return moment.data
