"""Typed results (issue 28, part 2): ``engine.run(request, output_type=...)`` and the step that writes the output.

The output is one more step after the plan's (the text answer stays), written under the caller's schema, checked
as every model output is (validated, repaired by the supervisor, grounded in the tools' results), kept in the
run's manifest across a resume, and handed back as the caller's type.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, field_validator
from typing_extensions import TypedDict

from aeon_kernel import AeonConfig, Engine
from aeon_kernel.errors import ValidationError
from aeon_kernel.output_types import output_type
from aeon_plugins.planning.output import OUTPUT_DESCRIPTION
from aeon_plugins.scripted import ScriptedLLM
from tests.support.builders import llm_step, plan, tool_step

EGGS = "A box holds 12 eggs. How many eggs are in 7 boxes?"
EGG_PLAN = plan(
    tool_step("1", "calculator", {"expression": "12 * 7"}), llm_step("2"), goal="Multiply 12 by 7"
)


class Eggs(BaseModel):
    count: int
    unit: str


class EggsDict(TypedDict):
    count: int
    unit: str


@dataclasses.dataclass
class EggsData:
    count: int
    unit: str


def scripted(*responses: Any, **options: Any) -> AeonConfig:
    return AeonConfig(**options).with_choice("llm", "scripted", responses=list(responses))


def test_a_typed_run_returns_the_text_answer_and_an_output_of_the_asked_type() -> None:
    config = scripted(EGG_PLAN, {"answer": "7 boxes hold 84 eggs."}, {"count": 84, "unit": "eggs"})
    with Engine(config) as engine:
        result = engine.run(EGGS, output_type=Eggs)
    assert result["status"] == "completed", result
    assert result["answer"] == "7 boxes hold 84 eggs."  # the plan's own last step, unchanged
    assert result["output"] == Eggs(count=84, unit="eggs")
    steps = result["plan"]["steps"]
    assert [s["step_id"] for s in steps] == ["1", "2", "output"]
    assert steps[-1]["description"] == OUTPUT_DESCRIPTION and steps[-1]["result"] == {
        "count": 84,
        "unit": "eggs",
    }


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        (EggsDict, {"count": 84, "unit": "eggs"}),
        (EggsData, EggsData(84, "eggs")),
        (output_type(Eggs).schema, {"count": 84, "unit": "eggs"}),  # a JSON Schema: the JSON itself
    ],
)
def test_a_typed_dict_a_dataclass_and_a_json_schema_are_output_types(spec: Any, expected: Any) -> None:
    config = scripted(EGG_PLAN, {"answer": "84 eggs"}, {"count": 84, "unit": "eggs"})
    with Engine(config) as engine:
        result = engine.run(EGGS, output_type=spec)
    assert result["status"] == "completed", result
    assert result["output"] == expected


def test_the_output_is_asked_for_under_its_schema_and_shows_the_results() -> None:
    class Constrained(ScriptedLLM):
        supports_json_schema = True

    model = Constrained([EGG_PLAN, {"answer": "84 eggs"}, {"count": 84, "unit": "eggs"}])

    class Model:
        from aeon_kernel import hookimpl

        @hookimpl
        def aeon_register_llm_adapters(self, register: Any) -> None:
            register("constrained", lambda **_: model)

    with Engine(AeonConfig().with_choice("llm", "constrained"), plugins=[Model()]) as engine:
        result = engine.run(EGGS, output_type=Eggs)
    assert result["status"] == "completed", result
    asked = model.prompts[-1]
    # decoded under the caller's schema with its one number narrowed to what the calculator found
    narrowed = output_type(Eggs).schema
    narrowed["properties"]["count"] = {**narrowed["properties"]["count"], "enum": [84]}
    assert asked["json_schema"] == narrowed
    assert "Schema:" in asked["prompt"] and '"value": 84' in asked["prompt"]  # the calculator's result


def test_a_malformed_output_is_repaired_by_the_supervisor() -> None:
    config = scripted(EGG_PLAN, {"answer": "84 eggs"}, "count: 84 eggs", {"count": 84, "unit": "eggs"})
    with Engine(config) as engine:
        result = engine.run(EGGS, output_type=Eggs)
    assert result["status"] == "completed", result
    assert result["output"] == Eggs(count=84, unit="eggs")
    (repair,) = result["final_state"]["supervisor_actions"]
    assert repair["action_type"] == "json_repair" and repair["error"] is None
    assert repair["repaired_output"] == {"count": 84, "unit": "eggs"}


def test_an_output_that_does_not_match_the_schema_after_two_repairs_fails_the_run() -> None:
    wrong = {"count": "many", "unit": "eggs"}
    config = scripted(EGG_PLAN, {"answer": "84 eggs"}, wrong, wrong, wrong)
    with Engine(config) as engine:
        result = engine.run(EGGS, output_type=Eggs)
    assert result["status"] == "failed"
    assert result["output"] is None
    assert "could not be used" in result["final_state"]["plan"]["steps"][-1]["failure"]


def test_an_output_stating_a_number_no_tool_gave_is_asked_again_then_fails_the_run() -> None:
    config = scripted(
        EGG_PLAN, {"answer": "84 eggs"}, {"count": 48, "unit": "eggs"}, {"count": 85, "unit": "eggs"}
    )
    with Engine(config) as engine:
        result = engine.run(EGGS, output_type=Eggs)
    assert result["status"] == "failed", result  # never `completed` with an output the tools contradict
    assert result["output"] is None
    failure = result["final_state"]["plan"]["steps"][-1]["failure"]
    assert "contradicted the tools twice" in failure and "85" in failure


def test_an_output_corrected_on_the_second_asking_completes() -> None:
    config = scripted(
        EGG_PLAN, {"answer": "84 eggs"}, {"count": 48, "unit": "eggs"}, {"count": 84, "unit": "eggs"}
    )
    with Engine(config) as engine:
        result = engine.run(EGGS, output_type=Eggs)
    assert result["status"] == "completed", result
    assert result["output"].count == 84


def test_without_an_output_type_the_result_is_as_it_always_was() -> None:
    config = scripted(EGG_PLAN, {"answer": "84 eggs"})
    with Engine(config) as engine:
        result = engine.run(EGGS)
    assert result["status"] == "completed"
    assert "output" not in result and [s["step_id"] for s in result["plan"]["steps"]] == ["1", "2"]


def test_a_type_whose_validators_refuse_what_its_schema_allows_says_so_with_the_run_id() -> None:
    class Even(BaseModel):
        count: int

        @field_validator("count")
        @classmethod
        def even(cls, value: int) -> int:
            if value % 2:
                raise ValueError("must be even")
            return value

    config = scripted(
        plan(tool_step("1", "calculator", {"expression": "7 * 3"}), llm_step("2")),
        {"answer": "21"},
        {"count": 21},
    )
    with Engine(config) as engine, pytest.raises(ValidationError, match="not a valid Even") as caught:
        engine.run("what is 7 times 3?", output_type=Even)
    assert "count: Value error, must be even" in str(caught.value) and "run " in str(caught.value)


@pytest.mark.parametrize("spec", [object(), {"type": "no such type"}, {}])
def test_an_output_type_without_a_json_schema_is_refused_before_the_run(spec: Any) -> None:
    with Engine(scripted()) as engine, pytest.raises(ValidationError, match="output"):
        engine.run("anything", output_type=spec)


def test_a_resumed_run_writes_the_output_it_was_started_for(tmp_path: Path) -> None:
    store = {"path": str(tmp_path / "runs.db")}
    first = scripted(EGG_PLAN, {"answer": "84 eggs"}).with_choice("state", "sqlite", **store)
    with Engine(first) as engine:
        run = engine.start(EGGS, output_type=Eggs)
        for _ in range(3):  # the plan, the calculator, the report: the process then goes away
            run.next()
        run_id = run.run_id
        run.close()
    later = scripted({"count": 84, "unit": "eggs"}).with_choice("state", "sqlite", **store)
    with Engine(later) as engine:
        result = engine.resume(run_id)  # no output type given: the run's manifest has its schema
    assert result["status"] == "completed", result
    assert result["output"] == {"count": 84, "unit": "eggs"}
    assert Eggs.model_validate(result["output"]).count == 84


def test_the_report_step_before_the_output_is_still_held_to_stating_the_result() -> None:
    # "Report the result" is no longer the plan's last step, but it is still the run's answer: it must state 84
    config = scripted(EGG_PLAN, {"answer": "done"}, {"answer": "done again"}, {"count": 84, "unit": "eggs"})
    with Engine(config) as engine:
        result = engine.run(EGGS, output_type=Eggs)
    report = result["final_state"]["plan"]["steps"][1]
    assert report["status"] == "complete" and "84" in json.dumps(
        report["result"]
    )  # grounded: the tool's answer


def test_a_scheduler_that_cannot_write_a_typed_output_refuses_it_before_the_run() -> None:
    from aeon_kernel.errors import OrchestrationError

    with Engine(scripted(EGG_PLAN).multipass()) as engine:
        with pytest.raises(OrchestrationError, match="MultiPassScheduler cannot write a typed output"):
            engine.run(EGGS, output_type=Eggs)
        assert engine.llm.adapter.prompts == []  # nothing was asked


def test_the_output_is_decoded_with_its_numbers_narrowed_to_what_the_grounding_check_accepts() -> None:
    from aeon_plugins.planning.output import decoding_schema

    one = {"type": "object", "properties": {"count": {"type": "integer"}, "unit": {"type": "string"}}}
    two = {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": ["integer", "null"]}}}
    facts, found = {12.0, 7.0, 84.0, 0.5}, {84.0}
    assert decoding_schema(one, None) is one  # no tool has run: nothing to narrow to
    # one number: the last tool's result
    assert decoding_schema(one, (facts, found))["properties"]["count"]["enum"] == [84]
    narrowed = decoding_schema(two, (facts, found))["properties"]  # several: any grounded number
    assert narrowed["a"]["enum"] == [0.5, 7, 12, 84] and narrowed["b"]["enum"] == [7, 12, 84]
    assert "enum" not in two["properties"]["a"]  # the caller's schema is left as it was
    many = ({float(n) for n in range(100)}, set())
    assert decoding_schema(two, many) == two  # too many to list: left free (the check still reads them)
