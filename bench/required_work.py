"""The yardstick for W1: what spec 000 requires of one tool step, in a minimal loop with no orchestration.

    python bench/required_work.py [N]

Per step: the pending → running → complete transitions on immutable step records, the arguments and the result
checked against the tool's JSON Schemas (the kernel's compiled validators), the tool call, a ``ToolCall`` record,
the memory write (the ``in_memory`` backend) and a ``LogEntry`` with timestamps. No hooks, no plugins, no state
snapshots: the gap between this and Aeon's W1 figure is what the kernel's structure costs.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from workloads import aeon_w, common

from aeon_kernel.models import LogEntry, Plan, StepStatus, ToolCall, utc_now
from aeon_kernel.schemas import compiled_validator
from aeon_plugins.in_memory import InMemoryKVStore


def run(plan: Plan, tool: aeon_w.FunctionTool) -> int:
    steps, memory, total = list(plan.steps), InMemoryKVStore(), 0
    arguments_schema, result_schema = (
        compiled_validator(tool.input_schema),
        compiled_validator(tool.output_schema),
    )
    for index, step in enumerate(steps):
        started = time.perf_counter()
        if step.status is not StepStatus.PENDING:
            raise RuntimeError("only a pending step may start")
        step = steps[index] = step.model_copy(update={"status": StepStatus.RUNNING})
        arguments = step.arguments or {}
        if not arguments_schema.is_valid(arguments):
            raise ValueError(arguments_schema.errors(arguments))
        result = tool.invoke(**arguments)
        if not result_schema.is_valid(result):
            raise ValueError(result_schema.errors(result))
        call = ToolCall.trusted(
            tool_name=tool.name,
            arguments=arguments,
            result=result,
            error=None,
            timestamp=utc_now(),
            step_id=step.step_id,
            duration_ms=0.0,
        )
        memory.write(f"run/bench/{step.step_id}", result)
        done = StepStatus.COMPLETE
        steps[index] = step.model_copy(
            update={"status": done, "result": result, "errors": (), "failure": None}
        )
        LogEntry.trusted(
            step_number=index + 1,
            plan_state=plan,
            llm_output={},
            supervisor_actions=(),
            tool_calls=(call,),
            ttl_remaining=len(steps) - index,
            errors=(),
            timestamp=utc_now(),
            run_id="bench",
            phase="step",
            step_id=step.step_id,
            step_status=done,
            usage={},
            stages=(),
            checks=(),
            duration_ms=round((time.perf_counter() - started) * 1000, 3),
        )
        total += result["value"]
    return total


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 100
    plan, tool = Plan.model_validate(json.loads(common.w1_plan(n))), aeon_w.add_one_tool()
    assert run(plan, tool) == common.w1_expected_total(n)
    samples = []
    for _ in range(7):
        started = time.perf_counter()
        for _ in range(max(1, 5000 // n)):
            run(plan, tool)
        samples.append((time.perf_counter() - started) / max(1, 5000 // n) / n * 1e6)
    samples.sort()
    print(f"required work of a tool step, N={n}: median {samples[3]:.1f} µs, min {samples[0]:.1f} µs")


if __name__ == "__main__":
    main()
