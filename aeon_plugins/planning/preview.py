"""What the next cycle of a plan run does, told before it starts (:meth:`LinearPlanScheduler.preview`).

The plan generation, with the planning prompt the ``model`` planner sends; or the next step — its tool and
arguments or the model, its status — with the state summary the step executor builds for its prompt (FR-002)
and, when the model is asked, that prompt. Everything is read, nothing changed: the step is shown as it will be
while it runs, in a copy of the steps.
"""

from __future__ import annotations

from aeon_kernel import Preview, RunContext, StepStatus
from aeon_kernel.kit import memory_key
from aeon_plugins.planning.planner import ModelPlanner
from aeon_plugins.planning.prompts import plan_prompt, reasoning_prompt, state_summary, tool_arguments_prompt


def planning_preview(run: RunContext) -> Preview:
    """The first cycle: the planner writes the plan (the prompt is known only for the ``model`` planner)."""
    components = run.components
    prompt = None
    if isinstance(components.planner, ModelPlanner):  # a plugin planner writes its own prompt
        prompt = plan_prompt(run.state.request, components.tools.export_tools_for_llm())
    return Preview(
        "plan",
        (),
        "plan",
        "plan generation",
        f"The planner ({type(components.planner).__name__}) writes the plan for the request; the plan is "
        "validated (and repaired by the supervisor when it is malformed) before any step runs.",
        {"request": run.state.request, "prompt": prompt},
    )


def step_preview(run: RunContext, title: str | None = None) -> Preview:
    """The current step, as it will run: what it does, and the context and prompt the step executor builds."""
    state, components = run.state, run.components
    assert state.current_step_id is not None, "a step is left"
    at = state.index[state.current_step_id]
    steps = list(state.steps)
    current = steps[at]
    # the step is running while its prompt is built: the summary shows it so
    steps[at] = current.model_copy(update={"status": StepStatus.RUNNING})
    prefix = memory_key(state.run_id, "")
    results = {key[len(prefix) :]: value for key, value in components.memory.search(prefix)}
    goal = state.goal if state.goal is not None else state.request
    summary = state_summary(goal, steps, results, list(state.errors), state.ttl_remaining)
    tool = components.tools.get(current.tool) if current.tool else None
    if current.agent == "llm" or (current.tool and tool is None):
        prompt = reasoning_prompt(summary, state.request, current)
        asks = "the model answers the step from the results so far (the prompt below)"
    elif tool is not None and current.arguments is None:
        prompt = tool_arguments_prompt(summary, current, tool)
        asks = f"the model gives the arguments for {tool.name} (the prompt below), then the tool runs"
    else:
        prompt = None
        asks = f"{current.tool} runs with the arguments below; no model call unless the tool's output needs repair"
    return Preview(
        "step",
        (current.step_id,),
        "step",
        title or f"step {current.step_id}",
        f"Step {at + 1} of {len(steps)}: {asks}.",
        {
            "step": {
                "step_id": current.step_id,
                "description": current.description,
                "does": current.tool or ("model" if current.agent == "llm" else "—"),
                "arguments": current.arguments,
                "status": current.status.value,
            },
            "context": summary,
            "prompt": prompt,
        },
    )
