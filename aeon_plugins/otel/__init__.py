"""The ``otel`` telemetry sink: every run as an OpenTelemetry trace, model calls per the GenAI conventions.

A root span per run (``invoke_agent <agent_name>``, or ``invoke_workflow <flow>`` for a flow run), a child per
cycle (``aeon.cycle <phase>``, or ``aeon.node <id>`` for a flow stage), and under it a span per model call
(``chat <model>``) and per tool call (``execute_tool <tool>``), named and attributed as OpenTelemetry's GenAI
semantic conventions say (:mod:`aeon_plugins.otel.conventions`).

The kernel reports a cycle once it has ended, so spans are built afterwards with explicit times: a cycle ends
when its record arrives and lasts its ``duration_ms`` (never overlapping the run's previous cycle); a tool call
sits where its millisecond timestamp puts it; model calls, recorded with a duration but no start, are laid back
to back from the cycle's start, stepping over its tool calls. Every child is clamped inside its parent.

OpenTelemetry is optional (``pip install 'aeon-core[otel]'``) and imported only when the sink is built. The sink
owns a ``TracerProvider`` (the global one is left alone) unless an embedder passes one; a run's root span is a
child of whatever span is current when the run starts. Prompts and completions stay out unless
``capture_content`` is set; every string that reaches a span is scrubbed of registered secrets.
"""

from __future__ import annotations

import atexit
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import SecretStr

from aeon_kernel import (
    ConfigError,
    LogEntry,
    OrchestrationState,
    Register,
    TelemetrySink,
    ToolCall,
    __version__,
    hookimpl,
)
from aeon_kernel.kit import scrub_secrets

from . import setup
from .conventions import (
    AGENT_NAME,
    CONVERSATION,
    ERROR_TYPE,
    FINISH_REASONS,
    INFERENCE_DETAILS,
    INPUT_MESSAGES,
    INPUT_TOKENS,
    MAX_TOKENS,
    MS,
    OPERATION,
    OUTPUT_MESSAGES,
    OUTPUT_TOKENS,
    PROVIDER,
    REQUEST_MODEL,
    RESPONSE_MODEL,
    SYSTEM_INSTRUCTIONS,
    TEMPERATURE,
    TOOL_ARGUMENTS,
    TOOL_CALL_ID,
    TOOL_NAME,
    TOOL_RESULT,
    TOOL_TYPE,
    WORKFLOW_NAME,
    attributes,
    clamp,
    content,
    duration,
    instructions,
    kind_of,
    mapping,
    messages,
    nanoseconds,
    stage_attributes,
)
from .setup import DEFAULT_ENDPOINT

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter
    from opentelemetry.trace import Link, Span

__all__ = ["DEFAULT_ENDPOINT", "OtelSink", "aeon_register_telemetry_sinks"]


@dataclass
class _OpenRun:
    span: Span
    #: ns: where the run's next cycle may start (its cycles are reported in order and never overlap)
    last_end: int
    #: the model the run asks (its manifest's ``model``): ``gen_ai.request.model``
    model: str | None
    #: ``gen_ai.provider.name``: the sink's ``provider_name``, else the manifest's ``llm`` (the adapter chosen)
    provider: str
    #: the calls of the cycle under way, by number, as ``aeon_model_called`` gave them (before ``aeon_cycle_end``)
    requests: dict[int, Mapping[str, Any]] = field(default_factory=dict)


class OtelSink(TelemetrySink):
    """Turns the kernel's events into spans; ``close()`` flushes them (and shuts down a provider it built).

    :param exporter: ``"otlp"`` (the default: OTLP/HTTP protobuf to ``endpoint``), ``"console"`` (JSON on
        stderr) or ``"memory"`` (kept in :attr:`exporter`, an ``InMemorySpanExporter``).
    :param headers: sent with every OTLP export; ``SecretStr`` values are registered as secrets.
    :param timeout: seconds per OTLP export, retries included; bounds how long ``close()`` waits for a collector
        that does not answer.
    :param capture_content: add the request, the completions, the answer, supervisor repairs and tool arguments
        and results (scrubbed, cut at ``max_content_length`` characters).
    :param provider_name: ``gen_ai.provider.name`` (``"openai"``, ...); by default the adapter ``[llm]`` chose,
        as the run's manifest names it (``llama_cpp``, ``openai``, ``scripted``).
    :param tracer_provider: an embedder's provider, in code (not with ``exporter``): ``close()`` only flushes it.
    """

    def __init__(
        self,
        exporter: str | None = None,
        endpoint: str = DEFAULT_ENDPOINT,
        headers: Mapping[str, str | SecretStr] | None = None,
        timeout: float = 10.0,
        service_name: str = "aeon",
        capture_content: bool = False,
        max_content_length: int = 8192,
        provider_name: str | None = None,
        agent_name: str = "aeon",
        tracer_provider: TracerProvider | None = None,
    ) -> None:
        if tracer_provider is not None and exporter is not None:
            raise ConfigError("otel sink: give either exporter or tracer_provider, not both")
        kind = exporter or "otlp"
        setup.check(
            exporter=kind,
            endpoint=endpoint,
            timeout=timeout,
            service_name=service_name,
            capture_content=capture_content,
            max_content_length=max_content_length,
            provider_name=provider_name,
            agent_name=agent_name,
        )
        sent = setup.headers(headers)
        setup.require_sdk()
        from opentelemetry import trace

        self._trace = trace
        self.capture_content, self.max_content_length = capture_content, max_content_length
        self.provider_name, self.agent_name = provider_name, agent_name
        #: where spans go when the sink built its provider (``exporter = "memory"``: read them here)
        self.exporter: SpanExporter | None = None
        self._owned = tracer_provider is None
        if tracer_provider is None:
            tracer_provider, self.exporter = setup.provider(
                kind, endpoint, sent, float(timeout), service_name
            )
        self.tracer_provider = tracer_provider
        self._tracer = tracer_provider.get_tracer("aeon", __version__)
        self._runs: dict[str, _OpenRun] = {}
        #: runs announced by aeon_run_resumed: the cycle they go on from, and a link to their earlier span
        self._resumed: dict[str, tuple[int, Link | None]] = {}
        self._lock = threading.Lock()
        self._closed = False

    # --- events ------------------------------------------------------------------------------------------------

    @hookimpl
    def aeon_run_resumed(self, run_id: str, state: OrchestrationState, entries: tuple[LogEntry, ...]) -> None:
        """A resumed run gets a new root span with the same run id, linked to the earlier one if this sink saw it."""
        with self._lock:
            earlier = self._runs.pop(run_id, None)
        link = self._interrupt(earlier) if earlier is not None else None
        with self._lock:
            self._resumed[run_id] = (state.cycle, link)

    @hookimpl
    def aeon_run_start(
        self, run_id: str, request: str, state: OrchestrationState, manifest: dict[str, Any]
    ) -> None:
        now = time.time_ns()
        with self._lock:
            earlier = self._runs.pop(run_id, None)
            resumed = self._resumed.pop(run_id, None)
        if earlier is not None:  # started again without aeon_run_resumed: still the same run
            resumed = (state.cycle, self._interrupt(earlier))
        flow = manifest.get("flow") if isinstance(manifest.get("flow"), Mapping) else None
        operation = "invoke_workflow" if flow else "invoke_agent"
        name = str(flow.get("name") or "flow") if flow else self.agent_name
        model = manifest.get("model") if isinstance(manifest.get("model"), str) else None
        chosen = manifest.get("llm") if isinstance(manifest.get("llm"), str) else None
        provider = self.provider_name or chosen or "unknown"
        values: dict[str, Any] = {
            OPERATION: operation,
            PROVIDER: provider,
            WORKFLOW_NAME if flow else AGENT_NAME: name,
            CONVERSATION: run_id,
            REQUEST_MODEL: model,
            "aeon.run.id": run_id,
            "aeon.version": manifest.get("aeon_version"),
            "aeon.scheduler": manifest.get("scheduler"),
            "aeon.config.fingerprint": manifest.get("config_fingerprint"),
            "aeon.flow.version": flow.get("version") if flow else None,
            "aeon.run.ttl": state.ttl_remaining,
        }
        links = []
        if resumed is not None:
            values.update({"aeon.run.resumed": True, "aeon.run.resumed_at_cycle": resumed[0]})
            links = [resumed[1]] if resumed[1] is not None else []
        span = self._tracer.start_span(
            scrub_secrets(f"{operation} {name}"), attributes=attributes(values), start_time=now, links=links
        )
        if self.capture_content:
            text = messages("user", request, self.max_content_length)
            span.add_event("aeon.request", attributes({INPUT_MESSAGES: text}), timestamp=now)
        with self._lock:
            self._runs[run_id] = _OpenRun(span, now, model, provider)

    @hookimpl
    def aeon_model_called(self, run_id: str, cycle: int, call: dict[str, Any]) -> None:
        """Kept until the cycle ends: its ``chat`` span gets the request's settings (and, with
        ``capture_content``, its prompt)."""
        with self._lock:
            run = self._runs.get(run_id)
            if run is not None and isinstance(call.get("number"), int):
                run.requests[call["number"]] = call

    @hookimpl
    def aeon_cycle_end(self, entry: LogEntry, state: OrchestrationState) -> None:
        """The cycle's span, and under it its stages, tool calls and model calls; ended even if one fails."""
        with self._lock:
            run = self._runs.get(entry.run_id)
            if run is None:  # a cycle of a run this sink did not see start
                return
            end = max(time.time_ns(), run.last_end)
            start = max(end - round(entry.duration_ms * MS), run.last_end)
            run.last_end = end
            requests, run.requests = run.requests, {}
        stages = [s for s in entry.stages if isinstance(s, Mapping)] if entry.phase == "node" else []
        single = stages[0] if len(stages) == 1 else None
        values: dict[str, Any] = {
            "aeon.run.id": entry.run_id,
            "aeon.cycle.number": entry.step_number,
            "aeon.phase": entry.phase,
            "aeon.step.id": entry.step_id,
            "aeon.step.status": entry.step_status.value if entry.step_status else None,
            "aeon.ttl_remaining": entry.ttl_remaining,
            "aeon.cycle.errors": len(entry.errors),
            **(stage_attributes(single) if single is not None else {}),
        }
        name = f"aeon.node {single.get('node')}" if single is not None else f"aeon.cycle {entry.phase}"
        cycle = self._tracer.start_span(
            scrub_secrets(name), self._under(run.span), attributes=attributes(values), start_time=start
        )
        try:
            if entry.errors:
                self._fail(cycle, entry.errors[0].get("type"), entry.errors[0].get("message"))
            for action in entry.supervisor_actions:
                self._supervisor_event(cycle, action.model_dump(mode="json"), start, end)
            placed = [(cycle, start, end, call) for call in entry.tool_calls]
            if len(stages) > 1:  # parallel stages: a span each, their tool calls inside them, in stage order
                placed, remaining = [], list(entry.tool_calls)
                for stage in stages:
                    stage_span, low, high = self._stage_span(cycle, stage, start, end)
                    made = stage.get("tool_calls")
                    taken = len(made) if isinstance(made, list) else 0
                    placed += [(stage_span, low, high, call) for call in remaining[:taken]]
                    remaining = remaining[taken:]
                    stage_span.end(high)
                placed += [(cycle, start, end, call) for call in remaining]
            # the cycle's model calls are the last ``llm_calls`` of the state's history (the run appends them)
            count = int(entry.usage.get("llm_calls", 0) or 0)
            calls = state.llm_outputs[len(state.llm_outputs) - count :] if count > 0 else ()
            model_calls = [{**call, **requests.get(number, {})} for number, call in enumerate(calls)]
            # a model call's start is known to the nanosecond, a tool call's to the millisecond: a tool placed
            # inside a call that began before it is moved to after that call
            chats = [w for w in (_began(call, start, end) for call in model_calls) if w is not None]
            busy = [
                self._tool_span(parent, call, entry.timestamp, low, high, chats)
                for parent, low, high, call in placed
            ]
            self._model_spans(
                cycle, model_calls, entry.run_id, run.model, run.provider, start, end, sorted(busy)
            )
        finally:
            cycle.end(end)

    @hookimpl
    def aeon_pass_event(self, run_id: str, pass_number: int, event: str, record: dict[str, Any]) -> None:
        """A multi-pass run's passes, reports and refinements, as events on the run's span."""
        with self._lock:
            run = self._runs.get(run_id)
        if run is not None:
            values = attributes({"aeon.pass.number": pass_number, "aeon.pass.event": event})
            run.span.add_event(scrub_secrets(f"aeon.pass.{event}"), values, timestamp=time.time_ns())

    @hookimpl
    def aeon_run_end(self, run_id: str, result: dict[str, Any]) -> None:
        with self._lock:
            run = self._runs.pop(run_id, None)
        if run is None:
            return
        end = max(time.time_ns(), run.last_end)
        status, answer = result.get("status"), result.get("answer")
        errors = result.get("errors") or []
        final = mapping(result.get("final_state"))
        verification = mapping(result.get("verification"))
        values = {
            "aeon.run.status": status,
            "aeon.run.answer.kind": kind_of(answer),
            "aeon.run.errors": len(errors),
            "aeon.run.cycles": final.get("cycle"),
            "aeon.run.verification": verification.get("verdict"),
            "aeon.run.verification.reason": verification.get("reason"),
            "aeon.run.checks": len(verification.get("checks") or ()),
        }
        run.span.set_attributes(attributes(values))
        if status != "completed":  # failed, or out of TTL: the run did not do what it was asked
            last = errors[-1] if errors and isinstance(errors[-1], Mapping) else {}
            self._fail(run.span, last.get("type") or status, result.get("message"))
        if self.capture_content and answer is not None:
            text = messages("assistant", answer, self.max_content_length)
            run.span.add_event("aeon.answer", attributes({OUTPUT_MESSAGES: text}), timestamp=end)
        run.span.end(end)

    def close(self) -> None:
        """End the spans of runs left open (closed, not finished: resumable), flush, shut down our provider."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            open_runs, self._runs = list(self._runs.values()), {}
        for run in open_runs:
            self._interrupt(run)
        if self._owned:
            atexit.unregister(self.tracer_provider.shutdown)  # registered by the SDK; done here instead
            self.tracer_provider.shutdown()  # exports what is left, waiting at most ``timeout`` per batch
        else:
            self.tracer_provider.force_flush()

    # --- spans ---------------------------------------------------------------------------------------------------

    def _under(self, span: Span) -> Context:
        return self._trace.set_span_in_context(span)

    def _interrupt(self, run: _OpenRun) -> Link:
        """End the span of a run that stopped without ending (it may be resumed); a link to it for the next part."""
        run.span.set_attribute("aeon.run.status", "interrupted")
        run.span.end(max(time.time_ns(), run.last_end))
        return self._trace.Link(run.span.get_span_context())

    def _fail(self, span: Span, kind: Any, message: Any) -> None:
        kind = scrub_secrets(str(kind or "error"))
        span.set_attribute(ERROR_TYPE, kind)
        description = scrub_secrets(str(message))[:512] if message else kind
        span.set_status(self._trace.Status(self._trace.StatusCode.ERROR, description))

    def _stage_span(
        self, cycle: Span, stage: Mapping[str, Any], low: int, high: int
    ) -> tuple[Span, int, int]:
        """One of a cycle's parallel stages, by its start and duration: the span, where it starts and ends."""
        began = nanoseconds(stage.get("started")) or low
        start, end = clamp(began, began + duration(stage.get("duration_ms")), low, high)
        span = self._tracer.start_span(
            scrub_secrets(f"aeon.node {stage.get('node')}"),
            self._under(cycle),
            attributes=attributes(stage_attributes(stage)),
            start_time=start,
        )
        if stage.get("status") == "failure":
            self._fail(span, "NodeFailed", stage.get("error"))
        return span, start, end

    def _tool_span(
        self,
        parent: Span,
        call: ToolCall,
        cycle_time: str,
        low: int,
        high: int,
        chats: Sequence[tuple[int, int]] = (),
    ) -> tuple[int, int]:
        """``execute_tool <tool>``, ending as long before the cycle's end as its record says (and after a model
        call it would start inside); where it sits."""
        before = max((nanoseconds(cycle_time) or 0) - (nanoseconds(call.timestamp) or 0), 0)
        start, end = clamp(high - before - duration(call.duration_ms), high - before, low, high)
        for chat_start, chat_end in chats:
            if chat_start <= start < chat_end:
                start, end = clamp(chat_end, chat_end + end - start, low, high)
        values: dict[str, Any] = {
            OPERATION: "execute_tool",
            TOOL_NAME: call.tool_name,
            TOOL_CALL_ID: call.step_id,
            TOOL_TYPE: "function",
            "aeon.step.id": call.step_id,
        }
        if self.capture_content:
            values[TOOL_ARGUMENTS] = content(call.arguments, self.max_content_length)
            if call.result is not None:
                values[TOOL_RESULT] = content(call.result, self.max_content_length)
        span = self._tracer.start_span(
            scrub_secrets(f"execute_tool {call.tool_name}"),
            self._under(parent),
            attributes=attributes(values),
            start_time=start,
        )
        if call.error is not None:
            self._fail(span, call.error.get("type") or "ToolError", call.error.get("message"))
        span.end(end)
        return start, end

    def _model_spans(
        self,
        parent: Span,
        calls: Sequence[Mapping[str, Any]],
        run_id: str,
        requested: str | None,
        provider: str,
        low: int,
        high: int,
        busy: list[tuple[int, int]],
    ) -> None:
        """``chat <model>`` per call: from when it began where ``aeon_model_called`` said, else back to back from
        the cycle's start, stepping over its tool calls."""
        cursor = low
        for call in calls:
            took = duration(call.get("duration_ms"))
            known = _began(call, low, high)
            if known is None:
                for tool_start, tool_end in busy:
                    if cursor < tool_end and cursor + took > tool_start:
                        cursor = tool_end
            start, end = known or clamp(cursor, cursor + took, low, high)
            cursor = end
            usage = mapping(call.get("usage"))
            request = mapping(call.get("request"))
            model = call.get("model") if isinstance(call.get("model"), str) else None
            finish = call.get("finish_reason") if isinstance(call.get("finish_reason"), str) else None
            values = {
                OPERATION: "chat",
                PROVIDER: provider,
                REQUEST_MODEL: requested or model,
                RESPONSE_MODEL: model,
                # from the request as aeon_model_called gave it
                MAX_TOKENS: request.get("max_tokens"),
                TEMPERATURE: request.get("temperature"),
                INPUT_TOKENS: usage.get("input_tokens", usage.get("prompt_tokens")),
                OUTPUT_TOKENS: usage.get("output_tokens", usage.get("completion_tokens")),
                FINISH_REASONS: [finish] if finish else None,
                CONVERSATION: run_id,
                "aeon.llm.constrained": call.get("constrained"),
            }
            span = self._tracer.start_span(
                scrub_secrets(f"chat {requested or model}" if requested or model else "chat"),
                self._under(parent),
                kind=self._trace.SpanKind.CLIENT,
                attributes=attributes(values),
                start_time=start,
            )
            if self.capture_content and isinstance(call.get("text"), str):
                details = {
                    OUTPUT_MESSAGES: messages("assistant", call["text"], self.max_content_length, finish)
                }
                if isinstance(request.get("prompt"), str):
                    details[INPUT_MESSAGES] = messages("user", request["prompt"], self.max_content_length)
                if isinstance(request.get("system_prompt"), str):
                    details[SYSTEM_INSTRUCTIONS] = instructions(
                        request["system_prompt"], self.max_content_length
                    )
                span.add_event(INFERENCE_DETAILS, attributes(details), timestamp=end)
            span.end(end)

    def _supervisor_event(self, span: Span, action: Mapping[str, Any], low: int, high: int) -> None:
        """A repair attempt, as an event on its cycle's span (its model calls are spans of their own)."""
        error = action.get("error") if isinstance(action.get("error"), Mapping) else None
        values: dict[str, Any] = {
            "aeon.supervisor.action": action.get("action_type"),
            "aeon.supervisor.attempt": action.get("attempt_number"),
            "aeon.supervisor.method": action.get("method"),
            "aeon.supervisor.outcome": "failed" if error else "repaired",
            ERROR_TYPE: error.get("type") if error else None,
        }
        if self.capture_content:
            values["aeon.supervisor.original"] = content(
                action.get("original_output"), self.max_content_length
            )
            if not error:
                values["aeon.supervisor.repaired"] = content(
                    action.get("repaired_output"), self.max_content_length
                )
        at, _ = clamp(nanoseconds(action.get("timestamp")) or high, high, low, high)
        span.add_event("aeon.supervisor_action", attributes(values), timestamp=at)


def _began(call: Mapping[str, Any], low: int, high: int) -> tuple[int, int] | None:
    """Where a model call sits in its cycle, when ``aeon_model_called`` said when it began."""
    began = call.get("started_ns")
    if not isinstance(began, int) or isinstance(began, bool):
        return None
    return clamp(began, began + duration(call.get("duration_ms")), low, high)


@hookimpl
def aeon_register_telemetry_sinks(register: Register) -> None:
    register("otel", OtelSink)
