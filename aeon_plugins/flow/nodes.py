"""What runs inside a node: the :class:`NodeContext` a deterministic implementation gets, the kernel's own
implementations, and the agent call (spec 004 §2.2, §3.2 step 2, §5).

A deterministic node names an implementation a plugin registered with ``aeon_register_nodes``:
``register("ticket.normalize", factory)``, where ``factory(**options)`` returns ``fn(value, context) -> output``
and ``options`` are the node's ``options`` in ``flow.yaml`` — never a dotted import path. An agent node is the
model, asked through the kernel's client with the node's output schema as the decoding constraint and the
supervisor repairing what does not parse or match.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from aeon_kernel import ToolCall, ToolContext, ToolRegistry
from aeon_kernel.errors import AeonError, ValidationError
from aeon_kernel.kit import RecordAction, ask_json, checked, redacted, schema_errors
from aeon_plugins.flow.context import Layers
from aeon_plugins.flow.manifest import Layer, NodeSpec
from aeon_plugins.flow.templates import Template, text
from aeon_plugins.planning import facts_in, unsupported_numbers

if TYPE_CHECKING:
    from aeon_kernel.kit import Components

#: ``fn(value, context) -> output``: a deterministic node's code
NodeFunction = Callable[[Any, "NodeContext"], Any]


class ToolMisuseError(AeonError):
    """A node called a tool it does not list, or with arguments its schema refuses: the node fails (§3.4)."""


@dataclass
class NodeContext:
    """What a node may use while it runs: its context (a copy: read-only to the node), its tools, its memory."""

    run_id: str
    task_id: str
    node: NodeSpec
    #: the assembled context items (``{"layer", "key", "value", "seq"}``), as recorded in the history
    context: list[dict[str, Any]]
    lineage: list[str]
    tools: ToolRegistry
    layers: Layers
    invoke: Callable[..., Any]
    #: every tool call this stage made, in order
    tool_calls: list[ToolCall] = field(default_factory=list)
    #: the task's how-manieth stage at this node (above 1 only inside a loop)
    iteration: int = 1
    #: why the node's output is only partial (:meth:`mark_partial`); None: it is whole
    partial: str | None = None

    @property
    def stage_id(self) -> str:
        """``<task>/<node>``, and ``#<iteration>`` from a loop's second iteration on."""
        stage = f"{self.task_id}/{self.node.id}"
        return stage if self.iteration == 1 else f"{stage}#{self.iteration}"

    @property
    def idempotency_key(self) -> str:
        """``"<run_id>:<task>/<node>"`` (``#<iteration>`` in a loop): the same when a resumed run runs this stage
        again, so a side effect keyed by it happens once, and once per iteration."""
        return f"{self.run_id}:{self.stage_id}"

    def call_tool(self, name: str, **arguments: Any) -> ToolCall:
        """Call a tool this node lists. A tool's own error comes back in the record and does not by itself fail
        the node; an unlisted tool or arguments its schema refuses is misuse, and fails it. The record returned
        holds the tool's sensitive values; the one the history keeps has them redacted."""
        if name not in self.node.tools:
            raise ToolMisuseError(
                f"node {self.node.id!r} called tool {name!r}, which it does not list: {list(self.node.tools)}"
            )
        tool = self.tools.get(name)
        if tool is None:
            raise ToolMisuseError(f"node {self.node.id!r} called tool {name!r}, which is not enabled")
        problems = schema_errors(tool.input_schema, arguments)
        if problems:
            raise ToolMisuseError(
                f"node {self.node.id!r} called {name!r} with arguments its schema refuses: {problems}"
            )
        if name in self.node.permissions:  # the node narrows the tool's grant
            tool = tool.model_copy(update={"granted": tool.granted & set(self.node.permissions[name])})
        context = ToolContext(self.run_id, self.stage_id, self.node.id)
        call = self.invoke(tool=tool, arguments=arguments, context=context)
        record = checked(tool, arguments, self.stage_id, call)
        self.tool_calls.append(
            redacted(tool, record)
        )  # the history never keeps a secret; the node's code may
        return record

    def mark_partial(self, reason: str) -> None:
        """Say the output is usable but incomplete: the stage succeeds and its task becomes ``partial`` (spec 004
        §3.4), with ``reason`` in the history."""
        self.partial = reason

    def remember(self, key: str, value: Any, layer: Layer = "project") -> None:
        """Keep ``value`` under ``key`` in the ``project`` or ``global`` layer (or this task's)."""
        self.layers.remember(layer, self.run_id, self.task_id, key, value)


# --- the kernel's node implementations ----------------------------------------------------------------------


def identity() -> NodeFunction:
    """The input, unchanged (the default of a deterministic node without ``impl``)."""
    return lambda value, context: value


def pick(keys: list[str]) -> NodeFunction:
    """Only ``keys`` of the input object."""

    def run(value: Any, context: NodeContext) -> Any:
        _need_object(value, "pick")
        return {key: value[key] for key in keys if key in value}

    return run


def assign(values: dict[str, Any]) -> NodeFunction:
    """The input object with ``values`` set (a constant label, a default, ...)."""

    def run(value: Any, context: NodeContext) -> Any:
        _need_object(value, "assign")
        return {**value, **copy.deepcopy(values)}

    return run


def route_by(
    key: str, routes: dict[str, str], default: str | None = None, route_key: str = "route"
) -> NodeFunction:
    """For decision nodes: ``route`` set from the input's ``key`` through ``routes`` (value -> node id)."""

    def run(value: Any, context: NodeContext) -> Any:
        _need_object(value, "route_by")
        chosen = routes.get(str(value.get(key)), default)
        return {**value, route_key: chosen}

    return run


def collect(key: str = "items") -> NodeFunction:
    """For merge nodes: ``{key: [output of each input]}``, in the merge's order."""

    def run(value: Any, context: NodeContext) -> Any:
        if not isinstance(value, list):
            raise ValidationError(f"collect expects the list a merge receives, got {type(value).__name__}")
        return {key: [entry.get("output") for entry in value]}

    return run


def call_tool(tool: str, arguments: dict[str, Any] | None = None, output: Any = None) -> NodeFunction:
    """Call ``tool`` (which the node lists in ``tools``) with ``arguments`` filled from the input (``{/pointer}``
    slots, :mod:`aeon_plugins.flow.templates`). The output is the tool's result, or ``output`` filled from
    ``{"input": ..., "result": ...}``. A tool's error fails the node: there is no code to decide otherwise."""
    filled_arguments = Template(arguments or {}, "options.arguments")
    shape = Template(output, "options.output") if output is not None else None

    def run(value: Any, context: NodeContext) -> Any:
        given = filled_arguments.fill(value)
        if not isinstance(given, dict):
            raise ValidationError("call_tool: options.arguments must be an object")
        call = context.call_tool(tool, **given)
        if call.error is not None:
            raise ValidationError(f"tool {tool!r} failed: {call.error.get('message') or call.error}")
        if tool_status(call) == "partial":
            context.mark_partial(f"tool {tool!r} reported a partial result")
        return call.result if shape is None else shape.fill({"input": value, "result": call.result})

    return run


def tool_status(call: ToolCall) -> str:
    """A tool call in the universal status model (spec 004 §5): ``failure`` with an error, ``partial`` when the
    tool's result says ``"partial": true`` (it did part of what was asked), else ``success``."""
    if call.error is not None:
        return "failure"
    return "partial" if isinstance(call.result, dict) and call.result.get("partial") is True else "success"


def template(output: Any) -> NodeFunction:
    """``output`` with its ``{/pointer}`` slots filled from the input: rename, nest, pick and join fields."""
    shape = Template(output, "options.output")
    return lambda value, context: shape.fill(value)


def _need_object(value: Any, name: str) -> None:
    if not isinstance(value, dict):
        raise ValidationError(f"{name} expects an object, got {type(value).__name__}")


# --- agent nodes ----------------------------------------------------------------------------------------------


def agent_schema(node: NodeSpec, schema: dict[str, Any] | None, targets: tuple[str, ...]) -> dict[str, Any]:
    """The decoding constraint of an agent node: its output schema; a decision's route key limited to its edges."""
    base: dict[str, Any] = copy.deepcopy(schema) if schema is not None else {"type": "object"}
    if node.role != "decision":
        return base
    key = node.decides_by
    properties = {**base.get("properties", {}), key: {"type": "string", "enum": list(targets)}}
    required = [*base.get("required", []), *([key] if key not in base.get("required", []) else [])]
    return {**base, "type": "object", "properties": properties, "required": required}


def agent_prompt(
    node: NodeSpec, value: Any, context: list[dict[str, Any]], tool_results: list[ToolCall]
) -> str:
    """The prompt of an agent node: the instruction, its input, its context, and the reply format. (Rendering the
    input and context one item per line instead of as JSON was measured worse on bench/flow_routes: 20/20/15
    of 30 right against 24/23/18, so the JSON stays.)"""
    parts = [node.instruction or "", "", "Input:", json.dumps(value, ensure_ascii=False, default=str)]
    if context:
        parts += [
            "",
            "Context:",
            json.dumps(
                [{k: i[k] for k in ("layer", "key", "value")} for i in context],
                ensure_ascii=False,
                default=str,
            ),
        ]
    for call in tool_results:
        parts += [
            "",
            f"Result of tool {call.tool_name}:",
            json.dumps(call.result if call.error is None else call.error, ensure_ascii=False, default=str),
        ]
    if node.role == "decision":
        parts += ["", f"Choose the next step by setting {node.decides_by!r}."]
    parts += ["", "Reply with one JSON object only."]
    return "\n".join(parts)


def grounded(node: NodeSpec, calls: list[ToolCall]) -> bool:
    """Whether an agent node's output is held to its tools' results (it called one), as a plain run's answer is."""
    return node.kind == "agent" and any(call.error is None for call in calls)


def check_output(node: NodeSpec, value: Any, output: Any, calls: list[ToolCall]) -> list[str]:
    """The findings of the node's ``checks`` on ``output``, and for an agent node that used a tool, the numbers it
    states that neither its input nor a tool's result holds (none: every check passed)."""
    document = {
        "input": value,
        "output": output,
        "tools": {call.tool_name: call.result for call in calls if call.error is None},
    }
    findings = []
    for i, check in enumerate(node.checks):
        kind, pair = ("equal", check.equal) if check.equal is not None else ("within", check.within)
        try:
            first, second = Template(list(pair or ()), f"checks[{i}].{kind}").fill(document)
        except ValidationError as exc:
            findings.append(str(exc))
            continue
        if kind == "equal" and first != second:
            findings.append(check.message or f"checks[{i}]: {text(first)!r} is not {text(second)!r}")
        elif kind == "within" and text(first).casefold() not in text(second).casefold():
            findings.append(check.message or f"checks[{i}]: {text(first)!r} is not in {text(second)!r}")
    if grounded(node, calls):
        facts = facts_in([value, *(call.result for call in calls if call.error is None)])
        unsupported = unsupported_numbers(json.dumps(output), facts)
        if unsupported:
            findings.append(f"{', '.join(unsupported)} is in neither the input nor a tool's result")
    return findings


def run_agent(
    node: NodeSpec,
    value: Any,
    context: NodeContext,
    schema: dict[str, Any],
    components: Components,
    record: RecordAction,
) -> Any:
    """An agent node's output: the model asked through the kernel's client, its answer held to ``schema``.

    A node that lists tools first asks the model for one call of one of them (each tool's input schema is the
    constraint), makes it through :meth:`NodeContext.call_tool`, and shows the result in the second prompt."""

    def ask(prompt: str, wanted: dict[str, Any]) -> Any:
        if not components.llm.supports_json_schema:  # no constrained decoding: the schema goes in the prompt
            prompt += "\nThe reply must match this JSON Schema: " + json.dumps(wanted, ensure_ascii=False)
        return ask_json(
            components.llm,
            components.supervisor,
            components.validator,
            prompt,
            wanted,
            record=record,
            max_tokens=components.max_tokens,
            temperature=components.temperature,
        )

    if node.tools:
        tools = [context.tools.get(name) for name in node.tools]
        listing = "\n".join(f"- {tool.name}: {tool.description}" for tool in tools if tool is not None)
        calls = {
            "anyOf": [
                {
                    "type": "object",
                    "properties": {"tool": {"const": tool.name}, "arguments": tool.input_schema},
                    "required": ["tool", "arguments"],
                    "additionalProperties": False,
                }
                for tool in tools
                if tool is not None
            ]
        }
        prompt = agent_prompt(node, value, context.context, [])
        choice = ask(f"{prompt}\nFirst choose one tool call, of:\n{listing}", calls)
        context.call_tool(choice["tool"], **choice["arguments"])
    prompt = agent_prompt(node, value, context.context, context.tool_calls)
    if node.example is not None:
        prompt += "\nExample reply: " + json.dumps(node.example, ensure_ascii=False)
    output = ask(prompt, schema)
    checked = node.checks or grounded(node, context.tool_calls)
    findings = check_output(node, value, output, context.tool_calls) if checked else []
    if findings:  # once more, told what was wrong (the router checks the second reply and fails the node)
        output = ask(
            f"{prompt}\nYour reply {json.dumps(output)} was wrong: {'; '.join(findings)}. Reply again.",
            schema,
        )
    return output
