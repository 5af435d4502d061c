"""The malformed-plan corpus (SC-003): one JSONL file per family, read by the tests and by bench/repair_rate.py.

Each line is a case: ``id``, ``family``, ``text`` (what a model wrote), ``expect`` and ``notes``.

* ``repaired`` — the deterministic repair must give ``expected_plan`` (compared without step ids, which are only
  labels: a repair may number steps that had none).
* ``hostile`` — nothing can be recovered: the only right answer is a structured AeonError.
* ``model`` — something was lost or is ambiguous (a plan cut inside a step, a missing goal): the deterministic
  repair must refuse it, so that the supervisor asks the model.

The ``real *`` families are the embedded model's own outputs (``bench/repair_rate.py --collect``), judged by hand.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from aeon_kernel import AeonError, FunctionTool, Plan, ToolRegistry
from aeon_plugins.calculator import CalculatorTool
from aeon_plugins.echo import EchoTool
from aeon_plugins.planning import PlanParse, parse_plan
from aeon_plugins.schema_validator import SchemaValidator

CORPUS_DIR = Path(__file__).parent
Expect = Literal["repaired", "hostile", "model"]


@dataclass(frozen=True)
class Case:
    id: str
    family: str
    text: str
    expect: Expect
    expected_plan: dict[str, Any] | None
    notes: str


def load_corpus() -> list[Case]:
    cases = []
    for path in sorted(CORPUS_DIR.glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                raw = json.loads(line)
                cases.append(Case(**{"expected_plan": None, "notes": "", **raw}))
    return cases


def corpus_tools() -> ToolRegistry:
    """The tools the cases are written against: the two built-ins the kernel's prompt shows, and one with two
    arguments of different types."""
    repeat = FunctionTool(
        name="repeat",
        description="Repeat a text a number of times.",
        input_schema={
            "type": "object",
            "properties": {"text": {"type": "string"}, "times": {"type": "integer", "minimum": 1}},
            "required": ["text", "times"],
            "additionalProperties": False,
        },
        output_schema={"type": "object"},
        function=lambda text, times: {"text": text * times},
    )
    return ToolRegistry([CalculatorTool(), EchoTool(), repeat])


def deterministic_outcome(case: Case, tools: ToolRegistry | None = None) -> PlanParse | AeonError:
    """What the deterministic repair makes of the case: the plan and its repair actions, or the structured error
    it raises. Any other exception propagates: that is a bug, whatever the case expects."""
    try:
        return parse_plan(
            case.text, tools or corpus_tools(), None, SchemaValidator(), deterministic_only=True
        )
    except AeonError as exc:
        return exc


def comparable(plan: Plan | dict[str, Any]) -> dict[str, Any]:
    """A plan as the corpus writes it: JSON, defaults left out, step ids dropped."""
    if isinstance(plan, dict):
        plan = Plan.model_validate(plan)
    dumped = plan.model_dump(mode="json", exclude_defaults=True)
    return {**dumped, "steps": [{k: v for k, v in s.items() if k != "step_id"} for s in dumped["steps"]]}


def added_tools(text: str, plan: Plan) -> set[str]:
    """FR-032: the tools of the plan that the text never wrote."""
    return {step.tool for step in plan.steps if step.tool is not None and step.tool not in text}


def changed_arguments(text: str, plan: Plan) -> list[str]:
    """Argument keys and values of the plan that the text never wrote whole, in any spelling a repair reads (JSON,
    JSON inside a string, Python literals, YAML): a repair that changed or cut an argument shows up here."""
    layers = _layers(text)
    return [
        f"step {step.step_id}: {key}={value!r}"
        for step in plan.steps
        for key, value in _leaves(step.arguments or {})
        if not any(_key_written(layer, key) and _written(layer, value) for layer in layers)
    ]


def _layers(text: str) -> list[str]:
    """The text, and the text of the JSON string it is, as often as it is one (a plan written as a string)."""
    layers = [text]
    for _ in range(3):
        try:
            inner = json.loads(layers[-1])
        except ValueError:
            break
        if not isinstance(inner, str):
            break
        layers.append(inner)
    return layers


def _leaves(value: Any, key: str = "") -> Iterator[tuple[str, Any]]:
    """Every (key, scalar) pair of the arguments, at any depth."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _leaves(v, k)
    elif isinstance(value, list):
        for item in value:
            yield from _leaves(item, key)
    else:
        yield key, value


def _key_written(text: str, key: str) -> bool:
    return key == "" or _written(text, key) or bool(re.search(rf"(?<![\w\"']){re.escape(key)}[ \t]*:", text))


def _written(text: str, value: Any) -> bool:
    """``value`` appears whole in ``text``: a string between its quotes (or as a whole YAML value), a number or
    literal not as part of a longer one. A value cut short (``"5 +"`` of ``"5 + 10"``) does not."""
    if isinstance(value, str):
        inner = json.dumps(value, ensure_ascii=False)[1:-1]
        twice = json.dumps(inner, ensure_ascii=False)[1:-1]  # JSON inside a JSON string
        quoted = {
            f'"{inner}"',
            f'"{value}"',
            f"'{value}'",
            f"\u201c{value}\u201d",  # curly quotes
            f'\\"{twice}\\"',
            "'{}'".format(value.replace("'", "\\'")),
        }
        yaml_value = re.compile(rf"(?m):[ \t]*{re.escape(value)}[ \t]*$")
        return any(q in text for q in quoted) or bool(yaml_value.search(text))
    spellings = {json.dumps(value), repr(value)}
    return any(re.search(rf"(?<![\w.+-]){re.escape(s)}(?![\w.])", text) for s in spellings)
