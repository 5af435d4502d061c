"""The live terminal view of ``aeon run``: the plan as a table whose statuses change as the run goes, and the
model's text as it writes it.

It is built on a run's events (:mod:`aeon_kernel.events`), the same a stream yields
(:func:`aeon_kernel.kit.watching`): the run is still stepped in the command's own thread, so Ctrl-C
interrupts it exactly where it is (issue 27).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.panel import Panel
from rich.spinner import Spinner
from rich.table import Table
from rich.text import Text

from aeon_kernel.events import (
    CycleEnded,
    PassEvent,
    PlanAccepted,
    RunEvent,
    StepFinished,
    StepStarted,
    TextDelta,
)
from aeon_kernel.models import Plan, PlanStep, StepStatus
from aeon_plugins.planning.prompts import compact

_STATUS_STYLE = {
    StepStatus.PENDING: ("○", "dim"),
    StepStatus.RUNNING: ("◐", "bold yellow"),
    StepStatus.COMPLETE: ("✔", "green"),
    StepStatus.FAILED: ("✘", "bold red"),
    StepStatus.INVALID: ("!", "bold magenta"),
}
_RUN_STYLE = {"completed": "green", "failed": "red", "ttl_expired": "yellow", "waiting": "cyan"}
_VERDICT_STYLE = {"verified": "green", "unverified": "yellow", "contradicted": "red"}


class LiveView:
    def __init__(self, request: str, console: Console | None = None) -> None:
        self.request = request
        self.console = console or Console()
        self.plan: Plan | None = None
        #: the cycle that ended last, and the cycles left after it
        self.cycle: tuple[int, int] | None = None
        self.steps: dict[str, PlanStep] = {}
        self.result: dict[str, Any] | None = None
        self.passes: list[Text] = []
        #: what the model is writing now (its last characters), while a step or the plan is under way
        self.writing = ""
        self._live: Live | None = None

    # --- events ------------------------------------------------------------------------------------------------

    def on_event(self, event: RunEvent) -> None:
        if isinstance(event, TextDelta):
            self.writing = (self.writing + event.text)[-_WRITING_SHOWN:] if event.attempt == 1 else event.text
        elif isinstance(event, (StepStarted, StepFinished)):
            self.steps[event.step.step_id] = event.step
            self.writing = ""
        elif isinstance(event, PlanAccepted):
            self.plan = event.plan
            self.steps = {s.step_id: s for s in event.plan.steps}
        elif isinstance(
            event, PassEvent
        ):  # a multi-pass run (spec 003): profile, TTL, report, assessment, ...
            line = pass_line(event.event, event.record)
            if line is None:
                return
            self.passes.append(Text.assemble((f"pass {event.pass_number} ", "bold cyan"), line))
        elif isinstance(event, CycleEnded):
            self.cycle = (event.entry.step_number, event.entry.ttl_remaining)
            self.writing = ""
        else:
            return
        self._refresh()

    # --- rendering ---------------------------------------------------------------------------------------------

    def _refresh(self) -> None:
        if self._live is not None:
            self._live.update(self.render())

    def render(self) -> Panel:
        parts: list[Any] = []
        plan = self.plan
        if plan is None and self.result is None:
            parts.append(Spinner("dots", text=Text(" planning…", style="cyan")))
        if plan is not None:
            parts.append(Text.assemble(("Goal: ", "bold"), compact(plan.goal, 2000)))
            parts.append(self._table(plan.steps))
        parts.extend(self.passes[-12:])
        if self.writing and self.result is None:
            parts.append(Text.assemble(("model: ", "dim bold"), (self.writing.replace("\n", " "), "dim")))
        footer = self._footer()
        if footer is not None:
            parts.append(footer)
        return Panel(Group(*parts), title=f"[bold]aeon[/] · {compact(self.request, 70)}", border_style="blue")

    def _table(self, plan_steps: tuple[PlanStep, ...]) -> Table:
        table = Table(box=None, pad_edge=False, expand=False)
        table.add_column("", width=1)
        table.add_column("step", style="bold")
        table.add_column("does")
        table.add_column("with", style="magenta")
        table.add_column("outcome")
        for original in plan_steps:
            step = self.steps.get(original.step_id, original)
            icon, style = _STATUS_STYLE[step.status]
            outcome = (
                compact(step.result, 60)
                if step.status is StepStatus.COMPLETE
                else compact(step.failure or "", 60)
                if step.status in (StepStatus.FAILED, StepStatus.INVALID)
                else "…"
                if step.status is StepStatus.RUNNING
                else ""
            )
            using = step.tool or ("model" if step.agent == "llm" else "?")
            table.add_row(
                Text(icon, style=style), step.step_id, compact(step.description, 50), using, outcome
            )
        return table

    def _footer(self) -> Text | None:
        if self.result is not None:
            status = self.result["status"]
            text = Text.assemble(
                ("\n" + status.replace("_", " ").upper(), f"bold {_RUN_STYLE.get(status, '')}")
            )
            if self.result.get("answer") is not None:
                text.append("  answer: ", style="bold")
                text.append(compact(self.result["answer"], 200))
            if self.result.get("output") is not None:
                text.append("\n  output: ", style="bold")
                text.append(compact(self.result["output"], 2000))
            verification = self.result.get("verification")
            if verification:  # how the answer was checked (decision 0018)
                verdict = verification["verdict"]
                text.append(f"\n{verdict.upper()}", style=f"bold {_VERDICT_STYLE.get(verdict, '')}")
                text.append(f"  {compact(verification['reason'], 300)}")
            if status != "completed":
                text.append(f"\n{compact(self.result.get('message', ''), 2000)}", style="dim")
            return text
        if self.cycle is not None:
            return Text(f"cycle {self.cycle[0]} · {self.cycle[1]} cycles left", style="dim")
        return None

    # --- driving a run -----------------------------------------------------------------------------------------

    def run(self, run: Any, cycles: Iterable[Any]) -> dict[str, Any]:
        """Drive ``cycles`` (``run`` itself, or the step-through's cycles of it) with the view watching ``run``'s
        events; return the result."""
        from aeon_kernel.kit import watching

        try:
            with (
                watching(run, self.on_event),
                Live(self.render(), console=self.console, refresh_per_second=8, transient=False) as live,
            ):
                self._live = live
                for _ in cycles:
                    pass
                assert run.result is not None, "the cycles ended before the run did"
                self.result = run.result.to_dict()
                live.update(self.render())
        finally:
            self._live = None
        assert self.result is not None
        return self.result


#: the characters of the model's text the view keeps on screen
_WRITING_SHOWN = 100


def pass_line(event: str, record: dict[str, Any]) -> Text | None:
    """What the live view shows of a pass event; None for the ones it leaves out."""
    if event == "profile" or event == "profile_update":
        verb = "profile" if event == "profile" else "profile updated"
        return Text(
            f"{verb}: depth {record['reasoning_depth']}, tools {record['expected_tool_usage']}, "
            f"breadth {record['output_breadth']}, confidence {record['confidence_requirement']}"
        )
    if event == "ttl":
        return Text(f"TTL {record['allocated']} allocated (cap {record['cap']}), {record['remaining']} left")
    if event == "report":
        issues = record.get("issues") or []
        if not issues:
            return Text(f"{record['artifact_type']}: no semantic issues", style="green")
        found = "; ".join(f"{i['severity']} {i['type']}: {compact(i['description'], 60)}" for i in issues[:3])
        return Text(f"{record['artifact_type']}: {found}", style="yellow")
    if event == "assessment":
        verdict = "converged" if record["converged"] else "not converged"
        reasons = f" ({', '.join(record['reason_codes'])})" if record.get("reason_codes") else ""
        return Text(
            f"{verdict}: completeness {record['completeness_score']:.2f}, "
            "coherence "
            + ("not judged" if record.get("coherence_score") is None else f"{record['coherence_score']:.2f}")
            + reasons,
            style="green" if record["converged"] else "yellow",
        )
    if event == "refinement":
        outcomes = record.get("outcomes") or []
        if not outcomes:
            return Text("refinement: no changes proposed", style="dim")
        done = []
        for outcome in outcomes:
            action = outcome["action"]
            target = action.get("target_step_id") or action.get("target_plan_section")
            done.append(f"{action['action_type']} {target}" + ("" if outcome["applied"] else " (refused)"))
        return Text("refinement: " + ", ".join(done))
    if event == "decomposition":
        parts = record.get("parts") or []
        listed = " | ".join(f"{p['step_id']}: {compact(p['text'], 40)}" for p in parts)
        return Text(f"decomposed into {len(parts)} parts: {listed}")
    if event == "subplan":
        return _subplan_line(record)
    return None


def _subplan_line(record: dict[str, Any]) -> Text:
    """A part's subplan: its steps (a tool call as the tool and its arguments), or why the part runs as it is."""
    part = record.get("part")
    if not record.get("applied"):
        why = record.get("refused") or record.get("error") or "the plan validator refused it"
        return Text(f"{part}: no subplan, runs as it is ({compact(why, 80)})", style="yellow")
    context = record.get("context")
    left_out = set(record.get("left_out") or ())
    steps = [s for s in (record.get("subplan") or {}).get("steps") or [] if s.get("step_id") not in left_out]
    shown = "; ".join(
        f"{s['tool']} {compact(s.get('arguments') or {}, 40)}"
        if s.get("tool")
        else compact(s["description"], 40)
        for s in steps[:3]
    )
    more = f" (+{len(steps) - 3})" if len(steps) > 3 else ""
    return Text(
        f"{part} planned" + (f" (given the result {context})" if context else "") + f": {shown}{more}"
    )
