"""The DAG router (spec 004 §3): a :class:`~aeon_kernel.runtime.scheduler.Scheduler` on the kernel's runtime.

Each cycle claims the next ready tasks (up to the flow's ``parallelism``), runs one stage of each — concurrently
when there are several — and applies the outcomes in claim order, so a run is the same run sequential or
parallel. A stage follows §3.2 in order: assemble the context, execute the node (its code, or the model), validate
the output against the node's schema, update the task's output, write the history record, route. The task
bookkeeping is :class:`~aeon_plugins.flow.tasks.TaskBook`; what runs inside a node is :mod:`aeon_plugins.flow.nodes`.

History records (one per stage, :meth:`RunContext.record_stage`) land in the cycle's log entry (``stages``), so
they reach the JSONL log and the state store with the cycle; the book of tasks is the scheduler's memo
(:class:`~aeon_plugins.flow.tasks.FlowBook`, in the run's state), so ``aeon flow resume`` goes on from the last
committed stage. A stage whose process died is run again with the same idempotency key (``<run_id>:<task>/<node>``).
Between cycles, :meth:`FlowScheduler.preview` tells which stages run next, each with the context it will get.
"""

from __future__ import annotations

import contextvars
import sys
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from aeon_kernel import (
    Conclusion,
    OrchestrationState,
    Policy,
    PolicyAction,
    Preview,
    RunContext,
    Scheduler,
    ToolCall,
    Verdict,
    Work,
)
from aeon_kernel.errors import ApprovalRequired, LLMError
from aeon_kernel.kit import (
    Check,
    begin_capture,
    captured,
    decode_own,
    end_capture,
    json_encoder,
    refusal,
    schema_errors,
    utc_now,
)
from aeon_plugins.flow.context import Layers, RetrievalPolicy, assemble
from aeon_plugins.flow.graph import Flow
from aeon_plugins.flow.nodes import (
    NodeContext,
    NodeFunction,
    ToolMisuseError,
    agent_schema,
    check_output,
    grounded,
    run_agent,
    tool_status,
)
from aeon_plugins.flow.tasks import FlowBook, FlowTask, TaskBook, exhausted, route_of


@dataclass
class StageOutcome:
    """What one stage produced, before it is applied to the book."""

    task_id: str
    node_id: str
    input: Any
    context: list[dict[str, Any]]
    started: str
    #: the task's how-manieth stage at this node (above 1 only inside a loop)
    iteration: int = 1
    succeeded: bool = False
    output: Any = None
    error: str | None = None
    route: list[str] = field(default_factory=list)
    tool_calls: list[ToolCall] = field(default_factory=list)
    model_calls: list[dict[str, Any]] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)  # of the output, for the run's verification
    duration_ms: float = 0.0
    partial: str | None = None  # why the output is partial (``NodeContext.mark_partial``)
    #: spec 004 §10.4: CPU time, the process's peak RSS, the context's size, the time it waited in the queue
    profile: dict[str, Any] = field(default_factory=dict)
    #: the request of a call or a stage that needs a person's approval (decision 0021): the stage did not end
    waiting: dict[str, Any] | None = None


@dataclass(frozen=True)
class FlowSetup:
    """What every run of one flow shares: the flow, its node code, its memory layers, the retrieval policies, and
    the policies (``[policy]``) that judge each stage before it runs."""

    flow: Flow
    functions: Mapping[str, NodeFunction]
    layers: Layers
    policies: Mapping[str, RetrievalPolicy]
    judges: Sequence[tuple[str, Policy]] = ()


class FlowScheduler(Scheduler[FlowBook, list[StageOutcome]]):
    """Routes one task tree through a flow (``start`` and ``value`` are used by a new run, not a resumed one)."""

    memo_type = FlowBook
    reviews_tool_calls = False  # a node's tool calls answer the node's input, not the run's request

    def __init__(self, setup: FlowSetup, start: str | None = None, value: Any = None) -> None:
        self.setup = setup
        self.flow = setup.flow
        self._start, self._value = start or setup.flow.default_start, value
        self.book: TaskBook | None = None
        self._claimed: list[str] = []
        #: the task layer is written only when some node reads it (no reader, no use: a write per stage saved)
        self._writes_task_layer = setup.flow.reads_task_layer
        self._pool: ThreadPoolExecutor | None = None
        #: when each ready task joined the queue (this process only: a resumed run's first stages have none)
        self._queued_at: dict[str, float] = {}

    def start(self, run: RunContext, *, resumed: bool) -> None:
        saved = self.memo(run)
        if resumed and saved is not None:
            self.book = TaskBook(self.flow, saved)
            return
        self.book = TaskBook(self.flow, FlowBook(flow=self.flow.name))
        self.book.begin(self._start, self._value)
        self._queued_at[self.book.root["id"]] = time.perf_counter()
        self._save(run)

    def status(self, run: RunContext) -> Verdict | None:
        book = self._book
        if book.finished:
            return Verdict("failed" if book.root["status"] == "failure" else "completed")
        if not book.queue:  # cannot happen with a checked flow; never spin
            run.record_error(
                {"type": "FlowError", "message": "no task is ready but the root task has not ended"}
            )
            return Verdict("failed")
        return None

    def next_work(self, run: RunContext) -> Work:
        book = self._book
        self._claimed = book.claim(self.flow.spec.parallelism)
        return Work.of("node", (f"{t}/{book.tasks[t]['node']}" for t in self._claimed))

    def perform(self, work: Work, run: RunContext) -> list[StageOutcome]:
        if len(self._claimed) == 1:
            return [self._stage(self._claimed[0], run)]
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.flow.spec.parallelism, thread_name_prefix="aeon-flow")
        futures = [
            self._pool.submit(contextvars.copy_context().run, self._stage, task_id, run)
            for task_id in self._claimed
        ]
        return [future.result() for future in futures]

    def apply(self, work: Work, outcome: list[StageOutcome], run: RunContext) -> None:
        book = self._book
        calls = captured()
        asking = [stage for stage in outcome if stage.waiting is not None]
        for stage in outcome:
            self._claimed.remove(stage.task_id)
            if stage.waiting is not None:  # not ended: it runs again once the person answered
                continue
            task = book.tasks[stage.task_id]
            # cancelled by an earlier stage of this cycle (its branch was won): it ran, and counts for nothing
            if task["state"] == "done":
                record = self._record(None, stage, task, [])
                run.record_stage({**record, "status": "cancelled", "error": task["error"]})
                run.record_tool_calls(tuple(stage.tool_calls))
                continue
            seq = book.next_seq()
            if stage.succeeded and self._writes_task_layer:
                self.setup.layers.write_stage(run.run_id, stage.task_id, seq, stage.node_id, stage.output)
            route = stage.route if stage.succeeded else list(self.flow.successors[stage.node_id])
            waiting = len(book.queue)
            events = book.advance(
                stage.task_id, stage.succeeded, stage.output, route, stage.error, partial=stage.partial
            )
            if self.flow.spec.profile:
                now = time.perf_counter()
                for ready in book.queue[waiting:]:
                    self._queued_at[ready] = now
            task = book.tasks[stage.task_id]
            run.record_stage(self._record(seq, stage, task, events))
            run.record_tool_calls(tuple(stage.tool_calls))
            for check in stage.checks:
                run.record_check(check)
            if calls is not None:
                calls.extend(stage.model_calls)
            if not stage.succeeded:
                run.fail_cycle(
                    {
                        "type": "NodeFailed",
                        "message": stage.error,
                        "step_id": f"{stage.task_id}/{stage.node_id}",
                    }
                )
        book.unclaim([stage.task_id for stage in asking])
        self._save(run)
        if asking:  # the run waits for the first; the others ask again when their stages run again
            raise ApprovalRequired(asking[0].waiting or {})

    def abandon(self, work: Work | None, error: BaseException, run: RunContext) -> None:
        """Stages the cycle could not apply fail their tasks (the run goes on with the others)."""
        book = self._book
        for task_id in self._claimed:
            events = book.abandon(task_id, f"{type(error).__name__}: {error}")
            run.record_stage(
                {
                    "seq": book.next_seq(),
                    "task": task_id,
                    "node": book.tasks[task_id]["node"],
                    "status": "failure",
                    "error": str(error),
                    "events": events,
                }
            )
        self._claimed = []
        self._save(run)

    def conclude(self, state: OrchestrationState, verdict: Verdict) -> Conclusion:
        if self._pool is not None:
            self._pool.shutdown(wait=False)
        stored = FlowBook.stored(state)  # the final snapshot's, read back
        if stored is None or not stored.tasks:
            return Conclusion(answer=None, message="the flow did not start")
        book = TaskBook(self.flow, stored)
        root = book.root
        status = root["status"] if book.finished else "failure"
        task = {
            "status": status,
            "output": root["output"],
            "exit": root.get("exit"),
            "error": root.get("error"),
            "tasks": [_summary(t) for t in book.tasks.values()],
        }
        message = _message(verdict, root, book)
        return Conclusion(
            answer=root["output"], message=message, details={"task": task, "flow": self.flow.metadata()}
        )

    def end(self, run: RunContext) -> None:
        """The task layer is the run's own (a resumed run writes back what its memory lost)."""
        self.setup.layers.release(run.run_id)

    def preview(self, run: RunContext) -> Preview | None:
        """The stages the next cycle runs: the first ready tasks (up to the flow's parallelism), each with its node,
        its input and the context :func:`assemble` gives it (it only reads). Before the first cycle the book is not
        kept yet: a resumed run's stored one, or the new run's root task at its start node with its input."""
        book = self.book
        if book is None:
            stored = self.memo(run)
            book = TaskBook(self.flow, stored or FlowBook(flow=self.flow.name))
            if stored is None:
                book.begin(self._start, self._value)
        if book.finished or not book.queue:
            return None  # status ends the run
        stages = [
            self._upcoming(book, task_id, run.run_id) for task_id in book.queue[: self.flow.spec.parallelism]
        ]
        labels = tuple(f"{stage['task']}/{stage['node']}" for stage in stages)
        return Preview(
            "node",
            labels,
            "node",
            ", ".join(labels),
            "The router runs one stage of "
            + ("this task" if len(stages) == 1 else f"these {len(stages)} tasks, concurrently")
            + ": it assembles the context, runs the node, validates its output and routes the task.",
            {"stages": stages},
        )

    def _upcoming(self, book: TaskBook, task_id: str, run_id: str) -> dict[str, Any]:
        """One stage as :meth:`preview` tells it (JSON values: the input and the context items as they are)."""
        task, setup = book.tasks[task_id], self.setup
        node = self.flow.nodes[task["node"]]
        items: list[dict[str, Any]] = []
        problem = None
        try:
            items = assemble(
                setup.layers, node.context, self.flow.profiles, setup.policies, run_id, book.lineage(task_id)
            )
        except Exception as exc:  # the stage itself will fail the same way, and say so
            problem = f"context assembly failed: {type(exc).__name__}: {exc}"
        profile = getattr(node.context, "profile", None)
        return {
            "task": task_id,
            "node": node.id,
            "role": node.role,
            "agent": node.kind == "agent",
            "instruction": node.instruction,
            "input": task["output"],
            "context_choice": f"profile {profile}" if profile else str(node.context),
            "context": [{"layer": i["layer"], "key": i["key"], "value": i["value"]} for i in items],
            "context_problem": problem,
        }

    # --- one stage -----------------------------------------------------------------------------------------------

    def _stage(self, task_id: str, run: RunContext) -> StageOutcome:
        """§3.2 steps 1-3 for one task (apply does 4-6): never raises, except when the model is unavailable."""
        book, flow, setup = self._book, self.flow, self.setup
        task = book.tasks[task_id]
        node = flow.nodes[task["node"]]
        value = _copy(task["output"])  # the node may change its input; the task's output stays as recorded
        iteration = task.get("visits", {}).get(node.id, 1)
        stage = StageOutcome(task_id, node.id, task["output"], [], utc_now(), iteration)
        began, cpu = time.perf_counter(), time.thread_time() if flow.spec.profile else 0.0
        queued = self._queued_at.pop(task_id, None) if flow.spec.profile else None
        token = begin_capture(stage.model_calls)
        try:
            problems = schema_errors(flow.schemas[node.input_schema], value) if node.input_schema else []
            if problems:
                raise _StageFailed(
                    f"input does not match schema {node.input_schema!r}: {'; '.join(problems)}"
                )
            lineage = book.lineage(task_id)
            try:
                stage.context = assemble(
                    setup.layers, node.context, flow.profiles, setup.policies, run.run_id, lineage
                )
            except Exception as exc:
                raise _StageFailed(f"context assembly failed: {type(exc).__name__}: {exc}") from None
            if setup.judges:  # spec 004 §10.5: the policy sees the stage's context before the node runs
                action = PolicyAction(
                    kind="stage",
                    run_id=run.run_id,
                    stage=f"{task_id}/{node.id}",
                    node=node.id,
                    tools=node.tools,
                    context=tuple({k: i[k] for k in ("layer", "key", "value")} for i in stage.context),
                )
                # a stage a policy asks about runs once a person approves it (decision 0021)
                refused = refusal(setup.judges, action, node.id, value, what=f"the stage {node.id}")
                if refused is not None:
                    raise _StageFailed(f"PolicyDeniedError: {refused}")
            context = NodeContext(
                run.run_id,
                task_id,
                node,
                _copy(stage.context) if stage.context else [],
                lineage,
                run.components.tools,
                setup.layers,
                run.hooks.caller("aeon_invoke_tool"),
                stage.tool_calls,
                iteration,
            )
            output = self._execute(task, value, context, run)
            try:
                output = _copy(output)  # JSON only, and a copy the node cannot touch
            except (TypeError, ValueError, RecursionError) as exc:
                raise _StageFailed(f"the node's output is not JSON: {exc}") from None
            problems = schema_errors(flow.schemas[node.output_schema], output) if node.output_schema else []
            if problems:
                raise _StageFailed(
                    f"output does not match schema {node.output_schema!r}: {'; '.join(problems)}"
                )
            if node.checks or grounded(node, stage.tool_calls):
                findings = check_output(node, stage.input, output, stage.tool_calls)
                stage.checks.append(
                    Check(
                        name="node_check",
                        subject="output",
                        verdict="failed" if findings else "passed",
                        detail="; ".join(findings) or None,
                        step_id=context.stage_id,
                        by=node.id,
                    )
                )
                if findings:
                    raise _StageFailed(f"check failed: {'; '.join(findings)}")
            route, error = route_of(flow, task, node.id, output)
            if error:
                raise _StageFailed(error)
            stage.succeeded, stage.output, stage.route, stage.partial = True, output, route, context.partial
        except LLMError:
            raise
        except _StageFailed as exc:
            stage.error = str(exc)
        except ToolMisuseError as exc:
            stage.error = f"tool misuse: {exc}"
        except ApprovalRequired as exc:  # the task waits, and the run with it (decision 0021)
            stage.waiting = exc.request
        except Exception as exc:
            stage.error = f"{type(exc).__name__}: {exc}"
        finally:
            end_capture(token)
            stage.duration_ms = round((time.perf_counter() - began) * 1000, 3)
            if flow.spec.profile:  # a few µs a stage (clock reads, a getrusage, a bigger record): asked for
                stage.profile = {
                    "cpu_ms": round((time.thread_time() - cpu) * 1000, 3),
                    "rss_peak_kb": _peak_rss_kb(),
                    "context_chars": len(_encode(stage.context)) if stage.context else 0,
                    "queued_ms": None if queued is None else round((began - queued) * 1000, 3),
                }
        return stage

    def _execute(self, task: FlowTask, value: Any, context: NodeContext, run: RunContext) -> Any:
        node_id = task["node"]
        node = self.flow.nodes[node_id]
        if node.role == "exit":
            return value  # read-only: an exit presents the task's output as it is
        if node.kind == "deterministic":
            return self.setup.functions[node_id](value, context)
        used_up = exhausted(self.flow, task, node_id)  # the model may not choose a loop edge used up
        targets = tuple(t for t in self.flow.successors[node_id] if t not in used_up)
        schema = agent_schema(node, self.flow.schema(node.output_schema), targets)
        return run_agent(node, value, context, schema, run.components, run.record_action)

    # --- records -----------------------------------------------------------------------------------------------

    def _record(
        self, seq: int | None, stage: StageOutcome, task: FlowTask, events: list[dict[str, Any]]
    ) -> dict[str, Any]:
        """The history record of one stage (spec 004 §6): input and output exactly as given, the context used, the
        tool calls, the route, what the routing did (forks, merges, task ends), the status and the times. Keys
        whose value is empty (no context, no tool call, no error, no event) are left out."""
        record: dict[str, Any] = {
            "seq": seq,
            "task": stage.task_id,
            "node": stage.node_id,
            "role": self.flow.nodes[stage.node_id].role,
            "input": stage.input,
            "output": stage.output,
            "status": "success" if stage.succeeded else "failure",
            "route": stage.route,
            "task_status": task["status"],
            "started": stage.started,
            "duration_ms": stage.duration_ms,
        }
        if stage.profile:  # measured (profile: true): like started, not for a replay to repeat
            record["profile"] = stage.profile
        if stage.node_id in self.flow.in_loop:
            record["iteration"] = stage.iteration
        schema = self.flow.nodes[stage.node_id].output_schema
        if schema and stage.succeeded:
            record["schema"] = schema  # the output was validated against it
        if stage.context:
            record["context"] = stage.context
        if stage.tool_calls:
            record["tool_calls"] = [
                {
                    **call.model_dump(mode="json", exclude={"timestamp", "duration_ms"}),
                    "status": tool_status(call),
                }
                for call in stage.tool_calls
            ]
        if stage.error is not None:
            record["error"] = stage.error
        if events:
            record["events"] = events
        return record

    @property
    def _book(self) -> TaskBook:
        assert self.book is not None, "start() builds the book"
        return self.book

    def _save(self, run: RunContext) -> None:
        """The book is the run's memo (a snapshot, when one is taken, stores it as JSON)."""
        run.state.keep(self._book.state)


_encode = json_encoder(allow_nan=False, ensure_ascii=False)


def _peak_rss_kb() -> int | None:
    """The process's peak resident set so far, in KiB (None where the platform has no ``resource``)."""
    try:
        import resource
    except ImportError:  # Windows
        return None
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak // 1024 if sys.platform == "darwin" else peak)  # macOS counts bytes, Linux KiB


def _copy(value: Any) -> Any:
    """A copy of a JSON value, through the C encoder; raises on anything that is not JSON (a cycle too: the
    encoder's nesting limit stops it)."""
    return decode_own(_encode(value))


class _StageFailed(Exception):
    """A stage error named by the spec (§7.1): schema mismatch, invalid routing decision, context assembly."""


def _summary(task: FlowTask) -> dict[str, Any]:
    return {
        "id": task["id"],
        "parent": task["parent"],
        "lineage": task["lineage"],
        "status": task["status"],
        "ended_at": task.get("ended_at"),
        "exit": task.get("exit"),
        "merged_into": task.get("merged_into"),
        "error": task["error"],
    }


def _message(verdict: Verdict, root: FlowTask, book: TaskBook) -> str:
    if verdict.status == "ttl_expired":
        return (
            "TTL expired before the task reached an exit; the state is kept in final_state. Continue a stored run "
            "with `aeon flow resume RUN_ID --ttl N`, or run it again with a larger TTL (--ttl, or ttl: in "
            "flow.yaml; the default is 10 cycles per node)."
        )
    if not book.finished:
        return "the flow stopped before its root task ended; see errors"
    where = f"exit {root['exit']!r}" if root.get("exit") else f"node {root.get('ended_at')!r}"
    if root["status"] == "failure":
        return f"the task ended with failure at {where}: {root.get('error') or 'see the history'}"
    return f"the task ended with {root['status']} at {where}"
