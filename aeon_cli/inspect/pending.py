"""What a run's next cycle will do, for the step-through page: the run's own answer, made into the page's dict.

A scheduler decides its next unit of work only when the cycle starts (``next_work`` claims it: a step is marked
running, a flow's tasks are taken off the queue), so the page asks the run for a preview instead
(:meth:`~aeon_kernel.Run.preview`, which asks its scheduler: :meth:`~aeon_kernel.Scheduler.preview`). Each
scheduler tells its own:

- the ``linear`` scheduler: plan generation, with the planning prompt the kernel's planner sends; or the next
  step — its tool and arguments or the model, its status — with the state summary the step's prompt gets (FR-002)
  and, for a model step, that prompt;
- the ``multipass`` scheduler (spec 003): its stage (profile, plan, validate, refine, evaluate, ...), or the step
  it executes;
- a flow run: the tasks the router will take off its queue, each with its node, its input and the context the
  router will assemble for it;
- any other scheduler: that it decides its work when the cycle starts, with its durable state.

None means no cycle is left: the run ends when it is next asked (the plan finished, the flow's root task ended,
the TTL spent). A page dict holds text and plain values only (the templates escape them): the JSON values of a
preview (arguments, inputs, context values, a scheduler's state) are shown indented here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aeon_cli.inspect.views import pretty
from aeon_kernel.secrets import scrub_secrets

if TYPE_CHECKING:
    from aeon_kernel import Preview, Run


def upcoming(run: Run) -> dict[str, Any] | None:
    """The next cycle of ``run``, as the page shows it; None when no cycle is left. A scheduler that cannot tell
    (a stored run whose state it cannot read) is shown saying so: the cycle itself then ends the run, and says why."""
    cycle = run.state.cycle + 1
    try:
        preview = run.preview()
    except Exception as exc:
        problem = scrub_secrets(f"{type(exc).__name__}: {exc}")
        return {
            "kind": "other",
            "cycle": cycle,
            "title": f"the {type(run.scheduler).__name__}'s next unit of work",
            "what": f"The scheduler could not tell what its next cycle does: {problem}",
        }
    return None if preview is None else page(preview, cycle)


def page(preview: Preview, cycle: int) -> dict[str, Any]:
    """``preview`` as the page's dict: its details by name, their JSON values as text."""
    shown: dict[str, Any] = {
        "kind": preview.kind,
        "cycle": cycle,
        "title": preview.title,
        "what": preview.what,
        **preview.details,
    }
    step = shown.get("step")
    if isinstance(step, dict) and step.get("arguments") is not None:
        shown["step"] = {**step, "arguments": pretty(step["arguments"])}
    if "stages" in shown:
        shown["stages"] = [_stage(stage) for stage in shown["stages"]]
    if "state" in shown:  # a scheduler's durable state
        shown["detail"] = pretty(shown.pop("state"))
    return shown


def _stage(stage: dict[str, Any]) -> dict[str, Any]:
    context = [{**item, "value": pretty(item["value"])} for item in stage.get("context", ())]
    return {**stage, "input": pretty(stage["input"]), "context": context}
