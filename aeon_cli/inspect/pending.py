"""What a run's next cycle will do, worked out between cycles without changing anything (step-through's "next").

A scheduler decides its next unit of work only when the cycle starts (``next_work`` claims it: a step is marked
running, a flow's tasks are taken off the queue), so the page cannot ask it. Instead this reads the same state the
scheduler will read and says what the cycle will do, with the context it will get:

- a plan run (the ``linear`` scheduler): plan generation, with the planning prompt the kernel's planner sends; or
  the next step — its tool and arguments or the model, its status — with the state summary the kernel builds for
  the step's prompt (FR-002) and, for a model step, that prompt;
- a multi-pass run (spec 003): its stage (profile, plan, validate, refine, evaluate, ...), or the step it executes;
- a flow run: the tasks the router will take off its queue, each with its node, its input and the context the
  router will assemble for it — by calling the router's own :func:`~aeon_plugins.flow.context.assemble`, which
  only reads.

None means no cycle is left: the run ends when it is next asked (the plan finished, the flow's root task ended,
the TTL spent). A page dict holds text and plain values only (the templates escape them).
"""

from __future__ import annotations

import copy
from typing import Any

from aeon_cli.inspect.views import pretty
from aeon_kernel.models import OrchestrationState, PlanStep, StepStatus
from aeon_kernel.runtime.context import Components
from aeon_kernel.runtime.run import Run
from aeon_kernel.steps import memory_key
from aeon_plugins.flow.context import assemble
from aeon_plugins.flow.router import FlowScheduler, FlowSetup
from aeon_plugins.flow.tasks import TaskBook
from aeon_plugins.planning.planner import ModelPlanner
from aeon_plugins.planning.prompts import plan_prompt, reasoning_prompt, state_summary, tool_arguments_prompt


def plan_run(run: Run, components: Components) -> dict[str, Any] | None:
    """The next cycle of a plan run (linear or multi-pass; another scheduler: what can be said of it)."""
    state = run.state
    if state.ttl_remaining <= 0:
        return None
    scheduler = type(run.scheduler).__name__
    if scheduler == "MultiPassScheduler":
        return _multipass(state, components)
    if scheduler != "LinearPlanScheduler":
        return {
            "kind": "other",
            "cycle": state.cycle + 1,
            "title": f"the {scheduler}'s next unit of work",
            "what": "This scheduler decides its work when the cycle starts; its durable state is below.",
            "detail": pretty(state.scheduler_state),
        }
    if state.plan is None:
        return None if state.cycle > 0 else _planning(state, components)
    if state.current_step_id is None:
        return None  # every step has ended: the run concludes
    return _step(state, components)


def _planning(state: OrchestrationState, components: Components) -> dict[str, Any]:
    prompt = None
    if isinstance(components.planner, ModelPlanner):  # a plugin planner writes its own prompt
        prompt = plan_prompt(state.request, components.tools.export_tools_for_llm())
    return {
        "kind": "plan",
        "cycle": state.cycle + 1,
        "title": "plan generation",
        "what": f"The planner ({type(components.planner).__name__}) writes the plan for the request; the "
        "plan is validated (and repaired by the supervisor when it is malformed) before any step runs.",
        "request": state.request,
        "prompt": prompt,
    }


def _step(state: OrchestrationState, components: Components, title: str | None = None) -> dict[str, Any]:
    assert state.plan is not None and state.current_step_id is not None
    steps = list(state.plan.steps)
    at = next(i for i, step in enumerate(steps) if step.step_id == state.current_step_id)
    step = steps[at]
    # the step is running while its prompt is built: the summary shows it so
    steps[at] = step.model_copy(update={"status": StepStatus.RUNNING})
    summary = _summary(state, steps, components)
    tool = components.tools.get(step.tool) if step.tool else None
    if step.agent == "llm" or (step.tool and tool is None):
        prompt = reasoning_prompt(summary, state.request, step)
        asks = "the model answers the step from the results so far (the prompt below)"
    elif tool is not None and step.arguments is None:
        prompt = tool_arguments_prompt(summary, step, tool)
        asks = f"the model gives the arguments for {tool.name} (the prompt below), then the tool runs"
    else:
        prompt = None
        asks = (
            f"{step.tool} runs with the arguments below; no model call unless the tool's output needs repair"
        )
    return {
        "kind": "step",
        "cycle": state.cycle + 1,
        "title": title or f"step {step.step_id}",
        "what": f"Step {at + 1} of {len(steps)}: {asks}.",
        "step": {
            "step_id": step.step_id,
            "description": step.description,
            "does": step.tool or ("model" if step.agent == "llm" else "—"),
            "arguments": pretty(step.arguments) if step.arguments is not None else None,
            "status": step.status.value,
        },
        "context": summary,
        "prompt": prompt,
    }


def _summary(state: OrchestrationState, steps: list[PlanStep], components: Components) -> str:
    """``StepContext.summary()`` for the step about to run: the goal, each step with its status and result (read
    back from memory), the last errors and the cycles left."""
    prefix = memory_key(state.run_id, "")
    results = {key[len(prefix) :]: value for key, value in components.memory.search(prefix)}
    goal = state.plan.goal if state.plan is not None else state.request
    return state_summary(goal, steps, results, list(state.errors), state.ttl_remaining)


def _multipass(state: OrchestrationState, components: Components) -> dict[str, Any] | None:
    memo = state.scheduler_state.get("multipass") or {}
    stage = str(memo.get("stage") or "profile")
    if stage == "done":
        return None
    number = memo.get("pass_number") or 1
    current = state.current_step_id
    if stage == "execute" and current is not None and state.plan is not None:
        if state.plan.step(current).status is not StepStatus.INVALID:
            return _step(state, components, f"pass {number}: step {current}")
        stage = "evaluate"  # nothing (more) to run in this pass
    return {
        "kind": "stage",
        "cycle": state.cycle + 1,
        "title": f"pass {number}: {stage.replace('_', ' ')}",
        "what": "A multi-pass stage (spec 003): profile the task, plan, validate the plan, refine it, execute "
        "its steps, evaluate convergence, refine, update the profile.",
        "request": state.request,
    }


def flow_run(run: Run, setup: FlowSetup, start: str | None, value: Any) -> dict[str, Any] | None:
    """The stage(s) the router runs next: the first ready tasks (up to the flow's parallelism), each with its
    node, its input and its assembled context. Before the first cycle the book does not exist yet: the root task
    at the start node with the run's input."""
    state = run.state
    if state.ttl_remaining <= 0:
        return None
    flow = setup.flow
    scheduler = run.scheduler
    book = scheduler.book if isinstance(scheduler, FlowScheduler) else None
    if book is None:
        saved = state.scheduler_state.get("book")
        book = TaskBook(flow, copy.deepcopy(saved) if saved else {"flow": flow.name})
        if not saved:
            book.begin(start or flow.default_start, value)
    if book.finished or not book.queue:
        return None
    stages = []
    for task_id in book.queue[: flow.spec.parallelism]:
        task = book.tasks[task_id]
        node = flow.nodes[task["node"]]
        lineage = book.lineage(task_id)
        items: list[dict[str, Any]] = []
        problem = None
        try:
            items = assemble(setup.layers, node.context, flow.profiles, setup.policies, run.run_id, lineage)
        except Exception as exc:  # the stage itself will fail the same way, and say so
            problem = f"context assembly failed: {type(exc).__name__}: {exc}"
        stages.append(
            {
                "task": task_id,
                "node": node.id,
                "role": node.role,
                "agent": node.kind == "agent",
                "instruction": node.instruction,
                "input": pretty(task["output"]),
                "context_choice": _choice(node.context),
                "context": [
                    {"layer": item["layer"], "key": item["key"], "value": pretty(item["value"])}
                    for item in items
                ],
                "context_problem": problem,
            }
        )
    return {
        "kind": "node",
        "cycle": state.cycle + 1,
        "title": ", ".join(f"{s['task']}/{s['node']}" for s in stages),
        "what": "The router runs one stage of "
        + ("this task" if len(stages) == 1 else f"these {len(stages)} tasks, concurrently")
        + ": it assembles the context, runs the node, validates its output and routes the task.",
        "stages": stages,
    }


def _choice(context: Any) -> str:
    profile = getattr(context, "profile", None)
    return f"profile {profile}" if profile else str(context)
