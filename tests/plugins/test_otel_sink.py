"""The ``otel`` telemetry sink: a run as one trace (run, cycles or flow stages, model and tool calls) named per
OpenTelemetry's GenAI conventions, exported in memory and over OTLP/HTTP to a loopback receiver; secrets in none
of it; and a clear error when OpenTelemetry is not installed."""

from __future__ import annotations

import importlib
import itertools
import json
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as semconv
from opentelemetry.semconv.attributes import error_attributes
from opentelemetry.trace import SpanKind, StatusCode

import aeon_plugins
from aeon_kernel import ConfigError, Engine, LLMResponse, hookimpl
from aeon_kernel.config import parse_config
from aeon_kernel.kit import register_secret
from aeon_plugins import otel
from aeon_plugins.otel import OtelSink, conventions
from aeon_plugins.scripted import ScriptedLLM
from tests.plugins.flow.test_engine import EXIT, START, build
from tests.support.builders import answer, llm_step, plan, tool_step
from tests.support.otlp_receiver import OtlpReceiver

#: a step that works, one whose tool fails (the calculator refuses to divide by zero), one the model answers
MIXED = plan(
    tool_step("1", "calculator", {"expression": "5 + 10"}),
    tool_step("2", "calculator", {"expression": "1 / 0"}),
    llm_step("3"),
)
MIXED_REPLIES = [json.dumps(MIXED), answer("15")]


def engine_for(
    tmp_path: Path, replies: list[str], *, plugins: tuple[Any, ...] = (), sink: bool = True, **options: Any
) -> Engine:
    """An engine on the scripted model whose only sink is ``otel`` (``exporter = "memory"`` unless given)."""
    path = tmp_path / "replies.json"
    path.write_text(json.dumps(replies), encoding="utf-8")
    llm = {"use": options.pop("llm", "scripted"), "responses": str(path)}
    telemetry = {"use": ["otel"], "otel": {"exporter": "memory", **options}} if sink else {"use": []}
    config = parse_config({"llm": llm, "memory": {"use": "in_memory"}, "telemetry": telemetry})
    return Engine(config, plugins=plugins)


def sink_of(engine: Any) -> OtelSink:
    (sink,) = [p for p in engine.pm.get_plugins() if isinstance(p, OtelSink)]
    return sink


def finished(engine: Any) -> list[ReadableSpan]:
    exporter = sink_of(engine).exporter
    assert isinstance(exporter, InMemorySpanExporter)
    return list(exporter.get_finished_spans())


def children(spans: list[ReadableSpan], parent: ReadableSpan) -> list[ReadableSpan]:
    """The spans directly under ``parent``, in start order."""
    assert parent.context is not None
    found = [s for s in spans if s.parent is not None and s.parent.span_id == parent.context.span_id]
    return sorted(found, key=lambda s: (s.start_time or 0, s.end_time or 0))


def check_tree(spans: list[ReadableSpan]) -> ReadableSpan:
    """One trace, one root; every span ended, inside its parent; the root's children one after another."""
    roots = [s for s in spans if s.parent is None]
    assert len(roots) == 1, [s.name for s in roots]
    ids = {s.context.span_id: s for s in spans if s.context is not None}
    assert len({s.context.trace_id for s in spans if s.context is not None}) == 1
    for span in spans:
        assert span.start_time is not None and span.end_time is not None and span.start_time <= span.end_time
        if span.parent is not None:
            parent = ids[span.parent.span_id]  # every parent was exported too
            assert parent.start_time is not None and parent.end_time is not None
            assert parent.start_time <= span.start_time and span.end_time <= parent.end_time, span.name
    top = children(spans, roots[0])
    for earlier, later in itertools.pairwise(top):
        assert earlier.end_time is not None and later.start_time is not None
        assert earlier.end_time <= later.start_time, (earlier.name, later.name)
    return roots[0]


def texts(spans: list[ReadableSpan]) -> str:
    """Everything the spans hold, as exported (names, attributes, events, statuses, resource)."""
    return "\n".join(span.to_json() for span in spans)


# --- conventions -------------------------------------------------------------------------------------------------


def test_the_attribute_names_are_those_of_the_installed_semantic_conventions() -> None:
    ours = {
        "OPERATION": semconv.GEN_AI_OPERATION_NAME,
        "PROVIDER": semconv.GEN_AI_PROVIDER_NAME,
        "REQUEST_MODEL": semconv.GEN_AI_REQUEST_MODEL,
        "RESPONSE_MODEL": semconv.GEN_AI_RESPONSE_MODEL,
        "MAX_TOKENS": semconv.GEN_AI_REQUEST_MAX_TOKENS,
        "TEMPERATURE": semconv.GEN_AI_REQUEST_TEMPERATURE,
        "INPUT_TOKENS": semconv.GEN_AI_USAGE_INPUT_TOKENS,
        "OUTPUT_TOKENS": semconv.GEN_AI_USAGE_OUTPUT_TOKENS,
        "FINISH_REASONS": semconv.GEN_AI_RESPONSE_FINISH_REASONS,
        "CONVERSATION": semconv.GEN_AI_CONVERSATION_ID,
        "AGENT_NAME": semconv.GEN_AI_AGENT_NAME,
        "WORKFLOW_NAME": semconv.GEN_AI_WORKFLOW_NAME,
        "TOOL_NAME": semconv.GEN_AI_TOOL_NAME,
        "TOOL_CALL_ID": semconv.GEN_AI_TOOL_CALL_ID,
        "TOOL_TYPE": semconv.GEN_AI_TOOL_TYPE,
        "TOOL_ARGUMENTS": semconv.GEN_AI_TOOL_CALL_ARGUMENTS,
        "TOOL_RESULT": semconv.GEN_AI_TOOL_CALL_RESULT,
        "INPUT_MESSAGES": semconv.GEN_AI_INPUT_MESSAGES,
        "OUTPUT_MESSAGES": semconv.GEN_AI_OUTPUT_MESSAGES,
        "ERROR_TYPE": error_attributes.ERROR_TYPE,
    }
    assert {name: getattr(conventions, name) for name in ours} == ours
    operations = {v.value for v in semconv.GenAiOperationNameValues}
    assert {"invoke_agent", "invoke_workflow", "chat", "execute_tool"} <= operations


# --- a run -------------------------------------------------------------------------------------------------------


def test_the_provider_is_the_adapter_the_run_chose_unless_configured(tmp_path: Path) -> None:
    with engine_for(tmp_path, MIXED_REPLIES) as engine:
        engine.run("add 5 and 10")
        spans = finished(engine)
    providers = {
        span.attributes.get("gen_ai.provider.name")
        for span in spans
        if span.name.startswith(("chat", "invoke"))
    }
    assert providers == {"scripted"}


def test_a_run_is_one_trace_of_cycles_with_model_and_tool_calls(tmp_path: Path) -> None:
    with engine_for(tmp_path, MIXED_REPLIES, provider_name="openai") as engine:
        result = engine.run("add 5 and 10")
        spans = finished(engine)
    assert result["status"] == "failed"  # step 2 failed
    root = check_tree(spans)
    run_id = result["run_id"]

    assert root.name == "invoke_agent aeon" and root.kind is SpanKind.INTERNAL
    assert root.attributes is not None
    assert {k: root.attributes.get(k) for k in ("gen_ai.operation.name", "gen_ai.agent.name")} == {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "aeon",
    }
    assert root.attributes["gen_ai.conversation.id"] == root.attributes["aeon.run.id"] == run_id
    assert root.attributes["gen_ai.request.model"] == "scripted"
    assert root.attributes["gen_ai.provider.name"] == "openai"
    assert (root.attributes["aeon.run.status"], root.attributes["aeon.run.errors"]) == ("failed", 1)
    assert (root.attributes["aeon.run.answer.kind"], root.attributes["aeon.run.cycles"]) == ("string", 4)
    assert root.status.status_code is StatusCode.ERROR and root.attributes["error.type"] == "StepFailed"
    assert root.status.description == result["message"]
    assert root.resource.attributes["service.name"] == "aeon"

    cycles = children(spans, root)
    assert [c.name for c in cycles] == [
        "aeon.cycle plan",
        "aeon.cycle step",
        "aeon.cycle step",
        "aeon.cycle step",
    ]
    described = [
        {k: (c.attributes or {}).get(k) for k in ("aeon.cycle.number", "aeon.step.id", "aeon.step.status")}
        for c in cycles
    ]
    assert described == [
        {"aeon.cycle.number": 1, "aeon.step.id": None, "aeon.step.status": None},
        {"aeon.cycle.number": 2, "aeon.step.id": "1", "aeon.step.status": "complete"},
        {"aeon.cycle.number": 3, "aeon.step.id": "2", "aeon.step.status": "failed"},
        {"aeon.cycle.number": 4, "aeon.step.id": "3", "aeon.step.status": "complete"},
    ]
    assert [(c.attributes or {})["aeon.ttl_remaining"] for c in cycles] == [49, 48, 47, 46]
    assert all((c.attributes or {})["aeon.run.id"] == run_id for c in cycles)
    assert [c.status.status_code for c in cycles] == [
        StatusCode.UNSET,
        StatusCode.UNSET,
        StatusCode.ERROR,
        StatusCode.UNSET,
    ]

    plan_calls, ok_calls, failed_calls, answer_calls = (children(spans, c) for c in cycles)
    for (chat,) in (plan_calls, answer_calls):
        assert chat.name == "chat scripted" and chat.kind is SpanKind.CLIENT
        assert dict(chat.attributes or {}) == {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": "openai",
            "gen_ai.request.model": "scripted",
            "gen_ai.response.model": "scripted",
            "gen_ai.conversation.id": run_id,
            "gen_ai.request.max_tokens": 512,
            "gen_ai.request.temperature": 0.0,
            "aeon.llm.constrained": False,
        }
        assert not chat.events  # no content unless asked for
    (ok,), (failed,) = ok_calls, failed_calls
    for tool, step in ((ok, "1"), (failed, "2")):
        assert tool.name == "execute_tool calculator" and tool.kind is SpanKind.INTERNAL
        assert tool.attributes is not None
        assert tool.attributes["gen_ai.operation.name"] == "execute_tool"
        assert (tool.attributes["gen_ai.tool.name"], tool.attributes["gen_ai.tool.call.id"]) == (
            "calculator",
            step,
        )
        assert (
            "gen_ai.tool.call.arguments" not in tool.attributes
            and "gen_ai.tool.call.result" not in tool.attributes
        )
    assert ok.status.status_code is StatusCode.UNSET and "error.type" not in (ok.attributes or {})
    assert failed.status.status_code is StatusCode.ERROR
    assert (failed.attributes or {})["error.type"] == "ToolError"
    assert failed.status.description == "calculator failed: division by zero"
    assert (cycles[2].attributes or {})["error.type"] == "StepFailed"


class Counted(ScriptedLLM):
    """The scripted model, reporting token counts and a finish reason the way OpenAI-style servers do."""

    def generate(self, *args: Any, **kwargs: Any) -> LLMResponse:
        usage = {"prompt_tokens": 120, "completion_tokens": 7}
        return cast(
            LLMResponse, {**super().generate(*args, **kwargs), "usage": usage, "finish_reason": "stop"}
        )


class Slow(ScriptedLLM):
    """The scripted model taking milliseconds, as a real one does: a reply in microseconds could begin and end
    within the millisecond a tool call's record is stamped with, and nothing could tell which came first."""

    def generate(self, *args: Any, **kwargs: Any) -> LLMResponse:
        time.sleep(0.005)
        return super().generate(*args, **kwargs)


class CountedPlugin:
    @hookimpl
    def aeon_register_llm_adapters(self, register: Any) -> None:
        register("counted", Counted)
        register("slow", Slow)


def test_model_calls_carry_token_usage_and_finish_reasons_and_content_on_request(tmp_path: Path) -> None:
    with engine_for(
        tmp_path, MIXED_REPLIES, plugins=(CountedPlugin(),), llm="counted", capture_content=True
    ) as engine:
        engine.run("add 5 and 10")
        spans = finished(engine)
    root = check_tree(spans)
    chats = [s for s in spans if s.name == "chat scripted"]
    assert len(chats) == 2
    for chat in chats:
        assert chat.attributes is not None
        assert (
            chat.attributes["gen_ai.usage.input_tokens"],
            chat.attributes["gen_ai.usage.output_tokens"],
        ) == (120, 7)
        assert chat.attributes["gen_ai.response.finish_reasons"] == ("stop",)
        # the request's settings, as aeon_model_called gave them (the engine's defaults)
        assert (
            chat.attributes["gen_ai.request.max_tokens"],
            chat.attributes["gen_ai.request.temperature"],
        ) == (
            512,
            0.0,
        )
        (event,) = chat.events
        assert event.name == "gen_ai.client.inference.operation.details"
        (message,) = json.loads(str((event.attributes or {})["gen_ai.output.messages"]))
        assert message["role"] == "assistant" and message["finish_reason"] == "stop"
        assert message["parts"][0]["type"] == "text"
        # and the prompt as sent, with the system prompt as instructions
        (prompt,) = json.loads(str((event.attributes or {})["gen_ai.input.messages"]))
        assert prompt["role"] == "user" and prompt["parts"][0]["type"] == "text"
        (system,) = json.loads(str((event.attributes or {})["gen_ai.system_instructions"]))
        assert system["type"] == "text" and system["content"]
    planning = json.loads(str((chats[0].events[0].attributes or {})["gen_ai.input.messages"]))
    assert planning[0]["parts"][0]["content"].endswith("Request: add 5 and 10\nPlan:")
    assert json.loads(
        json.loads(str((chats[1].events[0].attributes or {})["gen_ai.output.messages"]))[0]["parts"][0][
            "content"
        ]
    ) == {"answer": "15"}

    request, answered = root.events
    assert request.name == "aeon.request" and answered.name == "aeon.answer"
    (asked,) = json.loads(str((request.attributes or {})["gen_ai.input.messages"]))
    assert asked == {"role": "user", "parts": [{"type": "text", "content": "add 5 and 10"}]}
    assert (
        json.loads(str((answered.attributes or {})["gen_ai.output.messages"]))[0]["parts"][0]["content"]
        == "15"
    )

    ok = next(
        s for s in spans if s.name == "execute_tool calculator" and s.status.status_code is StatusCode.UNSET
    )
    assert json.loads(str((ok.attributes or {})["gen_ai.tool.call.arguments"])) == {"expression": "5 + 10"}
    assert json.loads(str((ok.attributes or {})["gen_ai.tool.call.result"])) == {
        "expression": "5 + 10",
        "value": 15,
    }


def test_a_supervisor_repair_is_an_event_of_its_cycle_and_its_model_call_a_span(tmp_path: Path) -> None:
    """The arguments are invalid (a number, not text): the supervisor asks the model, then the tool runs."""
    replies = [
        json.dumps(plan(tool_step("1", "calculator", {"expression": 15}))),
        # the model's repair writes the request's sum (the calculator reviews the call made against the request)
        json.dumps({"expression": "5 + 10"}),
    ]
    with engine_for(tmp_path, replies, plugins=(CountedPlugin(),), llm="slow") as engine:
        assert engine.run("add 5 and 10")["status"] == "completed"
        spans = finished(engine)
    _, step = children(spans, check_tree(spans))
    (event,) = step.events
    assert event.name == "aeon.supervisor_action"
    assert dict(event.attributes or {}) == {
        "aeon.supervisor.action": "tool_call_repair",
        "aeon.supervisor.attempt": 1,
        "aeon.supervisor.method": "llm",
        "aeon.supervisor.outcome": "repaired",
    }
    chat, tool = children(spans, step)
    assert (chat.name, tool.name) == ("chat scripted", "execute_tool calculator")
    assert chat.end_time is not None and tool.start_time is not None and chat.end_time <= tool.start_time


def test_a_run_that_fails_in_its_first_cycle_still_ends_every_span(tmp_path: Path) -> None:
    """The script runs out while planning: the model is unavailable (FR-049), the cycle and the run fail."""
    with engine_for(tmp_path, []) as engine:
        result = engine.run("add 5 and 10")
        spans = finished(engine)
    assert result["status"] == "failed"
    root = check_tree(spans)
    (cycle,) = children(spans, root)
    assert cycle.name == "aeon.cycle plan" and cycle.status.status_code is StatusCode.ERROR
    assert (cycle.attributes or {})["error.type"] == "LLMError"
    assert root.status.status_code is StatusCode.ERROR and (root.attributes or {})["error.type"] == "LLMError"
    assert children(spans, cycle) == []  # a call that failed has no record, so no span


def test_a_resumed_run_gets_a_new_root_linked_to_the_interrupted_one(tmp_path: Path) -> None:
    replies = [
        json.dumps(
            plan(
                tool_step("1", "calculator", {"expression": "1 + 1"}),
                tool_step("2", "echo", {"message": "hi"}),
            )
        )
    ]
    path = tmp_path / "replies.json"
    path.write_text(json.dumps(replies), encoding="utf-8")
    config = parse_config(
        {
            "llm": {"use": "scripted", "responses": str(path)},
            "state": {"use": "sqlite", "path": str(tmp_path / "state.db")},
            "telemetry": {"use": ["otel"], "otel": {"exporter": "memory"}},
        }
    )
    with Engine(config) as engine:
        run = engine.start("add 1 and 1, then say hi")
        run.next()
        run.next()
        run.close()  # resumable: the sink still holds its root span open
        assert engine.resume(run.run_id)["status"] == "completed"
        spans = finished(engine)
    first, second = sorted((s for s in spans if s.parent is None), key=lambda s: s.start_time or 0)
    assert (first.attributes or {})["aeon.run.status"] == "interrupted"
    assert (second.attributes or {})["aeon.run.status"] == "completed"
    assert (first.attributes or {})["aeon.run.id"] == (second.attributes or {})["aeon.run.id"] == run.run_id
    assert (second.attributes or {})["aeon.run.resumed"] is True
    assert (second.attributes or {})["aeon.run.resumed_at_cycle"] == 2
    assert [link.context.span_id for link in second.links] == [first.context.span_id]  # type: ignore[union-attr]
    assert [c.name for c in children(spans, first)] == ["aeon.cycle plan", "aeon.cycle step"]
    assert [(c.attributes or {})["aeon.cycle.number"] for c in children(spans, second)] == [3]


# --- flows -------------------------------------------------------------------------------------------------------


def test_a_flow_run_has_a_span_per_node_stage(tmp_path: Path) -> None:
    schemas = {"route": {"type": "object", "properties": {"team": {"type": "string"}}, "required": ["team"]}}
    flow = {
        "name": "triage",
        "profile": True,
        "nodes": [
            START,
            {
                "id": "calc",
                "role": "linear",
                "impl": "demo.calc",
                "options": {"a": 6, "b": 3},
                "tools": ["calculator"],
            },
            {
                "id": "pick",
                "role": "decision",
                "kind": "agent",
                "instruction": "Which team?",
                "output_schema": "route",
                "example": {"team": "x", "route": "billing"},
            },
            {"id": "billing", "role": "exit"},
            {"id": "tech", "role": "exit"},
        ],
        "edges": [["in", "calc"], ["calc", "pick"], ["pick", "billing"], ["pick", "tech"]],
    }
    with build(tmp_path, flow, replies=[{"team": "ops", "route": "tech"}], schemas=schemas) as engine:
        engine.engine.add_sink("otel", exporter="memory")
        result = engine.run({"ticket": "the server is down"})
        spans = finished(engine.engine)
    assert result.status == "success"
    root = check_tree(spans)
    assert root.name == "invoke_workflow triage"
    assert (root.attributes or {})["gen_ai.operation.name"] == "invoke_workflow"
    assert (root.attributes or {})["gen_ai.workflow.name"] == "triage"
    nodes = children(spans, root)
    assert [n.name for n in nodes] == ["aeon.node in", "aeon.node calc", "aeon.node pick", "aeon.node tech"]
    pick = nodes[2].attributes or {}
    assert (pick["aeon.task.id"], pick["aeon.node.id"], pick["aeon.node.role"], pick["aeon.node.status"]) == (
        "t1",
        "pick",
        "decision",
        "success",
    )
    # spec 004 §10.4: each stage's resource usage, context size and queue wait
    assert (
        pick["aeon.stage.cpu_ms"] >= 0
        and pick["aeon.stage.rss_peak_kb"] > 0
        and pick["aeon.stage.queued_ms"] >= 0
    )
    assert pick["aeon.stage.context_chars"] == 0
    ((tool,), (chat,)) = children(spans, nodes[1]), children(spans, nodes[2])
    assert (
        tool.name == "execute_tool calculator" and (tool.attributes or {})["gen_ai.tool.call.id"] == "t1/calc"
    )
    assert chat.name == "chat scripted" and (chat.attributes or {})["aeon.llm.constrained"] is True


def test_parallel_stages_of_one_cycle_each_get_a_span_holding_their_tool_calls(tmp_path: Path) -> None:
    flow = {
        "name": "par",
        "parallelism": 2,
        "nodes": [
            START,
            {"id": "fork", "role": "split"},
            {
                "id": "left",
                "role": "linear",
                "impl": "demo.calc",
                "options": {"a": 6, "b": 3},
                "tools": ["calculator"],
            },
            {"id": "right", "role": "linear", "impl": "demo.shout"},  # no text: the stage fails
            {"id": "join", "role": "merge", "impl": "collect"},
            EXIT,
        ],
        "edges": [
            ["in", "fork"],
            ["fork", "left"],
            ["fork", "right"],
            ["left", "join"],
            ["right", "join"],
            ["join", "out"],
        ],
    }
    with build(tmp_path, flow) as engine:
        engine.engine.add_sink("otel", exporter="memory")
        engine.run({"x": 1})
        spans = finished(engine.engine)
    root = check_tree(spans)
    (cycle,) = [c for c in children(spans, root) if c.name == "aeon.cycle node"]
    left, right = sorted(children(spans, cycle), key=lambda s: s.name)
    assert (left.name, right.name) == ("aeon.node left", "aeon.node right")
    assert [s.name for s in children(spans, left)] == ["execute_tool calculator"]
    assert children(spans, right) == []
    assert (
        right.status.status_code is StatusCode.ERROR
        and (right.attributes or {})["error.type"] == "NodeFailed"
    )
    assert "KeyError" in (right.status.description or "")


# --- OTLP/HTTP ---------------------------------------------------------------------------------------------------


def test_spans_reach_an_otlp_http_receiver_with_the_secret_header_and_nowhere_else(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    token = f"otlp-token-{uuid.uuid4().hex}"
    monkeypatch.setenv("AEON_TEST_OTLP_TOKEN", token)
    with OtlpReceiver() as receiver:
        options = {
            "exporter": "otlp",
            "endpoint": receiver.endpoint,
            "headers": {"authorization": {"$env": "AEON_TEST_OTLP_TOKEN"}, "x-tenant": "aeon-tests"},
            "service_name": "aeon-under-test",
            "timeout": 5,
        }
        with engine_for(tmp_path, MIXED_REPLIES, **options) as engine:
            result = engine.run("add 5 and 10")
        spans = receiver.spans()  # closing the engine flushed the batch
    assert receiver.exports and all(e.headers["authorization"] == token for e in receiver.exports)
    assert all(e.headers["x-tenant"] == "aeon-tests" for e in receiver.exports)
    assert all(token.encode() not in e.body for e in receiver.exports)
    assert token not in json.dumps(spans, default=str)

    names = sorted(s["name"] for s in spans)
    assert names == sorted(
        ["invoke_agent aeon", "aeon.cycle plan", *["aeon.cycle step"] * 3, "chat scripted", "chat scripted"]
        + ["execute_tool calculator"] * 2
    )
    (root,) = [s for s in spans if s["parent_span_id"] is None]
    assert root["attributes"]["aeon.run.id"] == result["run_id"]
    assert root["status"]["code"] == 2  # STATUS_CODE_ERROR: the run failed
    assert root["resource"]["service.name"] == "aeon-under-test" and root["scope"] == "aeon"
    by_id = {s["span_id"]: s for s in spans}
    for span in spans:
        assert span["trace_id"] == root["trace_id"]
        if span["parent_span_id"]:
            parent = by_id[span["parent_span_id"]]
            assert parent["start"] <= span["start"] <= span["end"] <= parent["end"]
    failed = next(s for s in spans if s["name"] == "execute_tool calculator" and s["status"]["code"] == 2)
    assert (
        failed["attributes"]["gen_ai.tool.call.id"] == "2"
        and failed["attributes"]["error.type"] == "ToolError"
    )
    chat = next(s for s in spans if s["name"] == "chat scripted")
    assert chat["attributes"]["gen_ai.operation.name"] == "chat" and chat["kind"] == 3  # SPAN_KIND_CLIENT


# --- secrets -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("capture_content", [False, True])
def test_a_registered_secret_reaches_no_span(tmp_path: Path, capture_content: bool) -> None:
    canary = f"canary-{uuid.uuid4().hex}"
    register_secret(canary)
    replies = [
        json.dumps(plan(tool_step("1", "echo", {"message": f"the key is {canary}"}), goal=f"echo {canary}"))
    ]
    with engine_for(tmp_path, replies, capture_content=capture_content) as engine:
        result = engine.run(f"echo the key is {canary}")  # the echo's message is the request's text
        spans = finished(engine)
    assert result["status"] == "completed"
    check_tree(spans)
    dumped = texts(spans)
    assert canary not in dumped and canary[8:24] not in dumped
    if capture_content:  # the content went through, scrubbed
        tool = next(s for s in spans if s.name == "execute_tool echo")
        # (other tests' secrets stay registered in this process and may take a neighbouring character along)
        message = json.loads(str((tool.attributes or {})["gen_ai.tool.call.result"]))["message"]
        assert message.startswith("the key is") and message.endswith("***")
        assert "echo the key" in dumped and "***" in dumped
    else:
        assert "the key is" not in dumped


# --- options, the provider, closing ------------------------------------------------------------------------------


def test_an_embedders_tracer_provider_gets_the_spans_under_its_current_span(tmp_path: Path) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with engine_for(tmp_path, MIXED_REPLIES, sink=False) as engine:
        sink = engine.add_sink("otel", tracer_provider=provider)
        assert isinstance(sink, OtelSink) and sink.exporter is None
        with provider.get_tracer("app").start_as_current_span("handle request") as outer:
            engine.run("add 5 and 10")
    mine = list(exporter.get_finished_spans())
    (root,) = [s for s in mine if s.name == "invoke_agent aeon"]
    assert root.parent is not None and root.parent.span_id == outer.get_span_context().span_id
    assert len([s for s in mine if s.name.startswith("aeon.cycle")]) == 4
    provider.get_tracer("app").start_span("after close").end()  # close() flushed it, did not shut it down
    assert exporter.get_finished_spans()[-1].name == "after close"


def test_the_global_tracer_provider_is_left_alone(tmp_path: Path) -> None:
    from opentelemetry import trace

    before = trace.get_tracer_provider()
    with engine_for(tmp_path, MIXED_REPLIES) as engine:
        engine.run("add 5 and 10")
    assert trace.get_tracer_provider() is before


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"exporter": "zipkin"}, "exporter must be one of"),
        ({"exporter": "otlp", "endpoint": "localhost:4318"}, "endpoint must be an http"),
        ({"capture_content": "yes"}, "capture_content must be true or false"),
        ({"timeout": 0}, "timeout must be a positive number"),
        ({"max_content_length": 0}, "max_content_length must be a positive integer"),
        ({"service_name": ""}, "service_name must be a non-empty string"),
        ({"headers": {"authorization": 5}}, "must be a string or a secret reference"),
        ({"exporter": "memory", "tracer_provider": object()}, "either exporter or tracer_provider"),
    ],
)
def test_options_that_cannot_work_are_config_errors(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        OtelSink(**options)


def test_close_ends_open_runs_and_can_be_called_twice(tmp_path: Path) -> None:
    engine = engine_for(tmp_path, MIXED_REPLIES)
    run = engine.start("add 5 and 10")
    run.next()
    sink = sink_of(engine)
    exporter = sink.exporter
    assert isinstance(exporter, InMemorySpanExporter)
    engine.close()
    engine.close()
    sink.close()
    (root,) = [s for s in exporter.get_finished_spans() if s.parent is None]
    assert (root.attributes or {})["aeon.run.status"] == "interrupted"


# --- without OpenTelemetry ---------------------------------------------------------------------------------------


@pytest.fixture
def without_opentelemetry(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """As if OpenTelemetry were not installed: every ``opentelemetry`` import fails; the plugin imported afresh."""
    for name in [n for n in sys.modules if n == "opentelemetry" or n.startswith("opentelemetry.")]:
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.setitem(sys.modules, "opentelemetry", None)
    for name in [n for n in sys.modules if n == "aeon_plugins.otel" or n.startswith("aeon_plugins.otel.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setattr(aeon_plugins, "otel", otel)  # the fresh import replaces it; put back afterwards
    yield


@pytest.mark.usefixtures("without_opentelemetry")
def test_without_opentelemetry_the_plugin_imports_and_choosing_it_names_the_extra(tmp_path: Path) -> None:
    module = importlib.import_module("aeon_plugins.otel")
    assert module is not otel and callable(module.aeon_register_telemetry_sinks)
    with pytest.raises(ConfigError, match=r"pip install 'aeon-core\[otel\]'"):
        module.OtelSink(exporter="memory")
    with (
        engine_for(tmp_path, MIXED_REPLIES) as engine,
        pytest.raises(ConfigError, match=r"aeon-core\[otel\]"),
    ):
        engine.run("add 5 and 10")
