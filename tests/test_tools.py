"""The Tool contract and ToolRegistry (FR-019…022, spec 002): definitions are checked when they are built."""

from __future__ import annotations

import inspect
from typing import Any

import pydantic
import pytest

from aeon_kernel import FunctionTool, Tool, ToolError, ToolRegistry, ValidationError
from aeon_kernel.errors import ToolRegistrationError
from aeon_plugins.calculator import CalculatorTool
from aeon_plugins.echo import EchoTool

OBJECT = {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}


def double(x: int) -> dict[str, Any]:
    return {"x": x * 2}


def make(**overrides: Any) -> FunctionTool:
    fields: dict[str, Any] = {
        "name": "double",
        "description": "Double a number.",
        "input_schema": OBJECT,
        "output_schema": OBJECT,
        "function": double,
    }
    return FunctionTool(**{**fields, **overrides})


def test_function_tool_invokes_and_validates() -> None:
    tool = make(example={"x": 2})
    assert tool.invoke(x=21) == {"x": 42}
    assert tool.validate_input(x=1)
    assert tool.validate_output({"x": 2})
    with pytest.raises(ValidationError) as info:
        tool.validate_input(x="one")
    assert info.value.errors == ["at $.x: 'one' is not of type 'integer'"]
    with pytest.raises(ValidationError, match="double result invalid"):
        tool.validate_output({})


def test_tool_errors_propagate_from_the_function() -> None:
    def broken(**_: Any) -> dict[str, Any]:
        raise ToolError("boom")

    with pytest.raises(ToolError, match="boom"):
        make(function=broken).invoke(x=1)


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "nope"},
        {"type": 5},
        {"properties": 5},
        {"required": "x"},
        {"type": "object", "properties": {"x": {"type": "nope"}}},
        {"minLength": -1},
        {"enum": "not-a-list"},
    ],
)
@pytest.mark.parametrize("field", ["input_schema", "output_schema"])
def test_invalid_schemas_are_rejected_at_construction(field: str, schema: dict[str, Any]) -> None:
    with pytest.raises(pydantic.ValidationError) as info:
        make(**{field: schema})
    assert info.value.errors()[0]["loc"] == (field,)


@pytest.mark.parametrize("schema", [[], "object", None, 5])
def test_schemas_must_be_objects(schema: Any) -> None:
    with pytest.raises(pydantic.ValidationError):
        make(input_schema=schema)


@pytest.mark.parametrize("name", ["", " ", "has space", "a/b", "tool\n", "naïve", "semi;colon", 5, None])
def test_blank_or_invalid_names_are_rejected(name: Any) -> None:
    with pytest.raises(pydantic.ValidationError) as info:
        make(name=name)
    assert info.value.errors()[0]["loc"] == ("name",)


@pytest.mark.parametrize("name", ["a", "calc-2.v1_x", "UPPER", "0"])
def test_valid_names(name: str) -> None:
    assert make(name=name).name == name


def test_description_is_required() -> None:
    with pytest.raises(pydantic.ValidationError):
        make(description="")


def test_tools_are_immutable() -> None:
    tool = make()
    with pytest.raises(pydantic.ValidationError):
        tool.name = "other"  # type: ignore[misc]


def test_tool_is_abstract() -> None:
    with pytest.raises(TypeError):
        Tool(name="t", description="d", input_schema={}, output_schema={})  # type: ignore[abstract]


def test_a_subclass_with_an_invalid_default_schema_is_rejected() -> None:
    class Bad(Tool):
        name: str = "bad"
        description: str = "d"
        input_schema: dict[str, Any] = {"type": "nope"}
        output_schema: dict[str, Any] = {"type": "object"}

        def invoke(self, **kwargs: Any) -> dict[str, Any]:
            return {}

    with pytest.raises(pydantic.ValidationError) as info:
        Bad()
    assert [error["loc"] for error in info.value.errors()] == [("input_schema",)]


@pytest.mark.parametrize("fields", [{"name": "bad name!"}, {"name": ""}, {"description": ""}])
def test_subclasses_keep_the_name_and_description_rules(fields: dict[str, Any]) -> None:
    with pytest.raises(pydantic.ValidationError):
        EchoTool(**fields)


# --- ToolRegistry ---


def test_register_get_list_unregister() -> None:
    registry = ToolRegistry()
    assert len(registry) == 0
    assert registry.get("echo") is None
    echo, calc = EchoTool(), CalculatorTool()
    registry.register(echo)
    registry.register(calc)
    assert registry.list_all() == ["echo", "calculator"]
    assert registry.get("echo") is echo
    assert "calculator" in registry
    assert list(registry) == [echo, calc]
    registry.unregister("echo")
    assert registry.get("echo") is None
    assert registry.list_all() == ["calculator"]
    registry.unregister("echo")  # unregistering a missing name is not an error
    assert len(registry) == 1


def test_duplicate_names_are_refused_and_the_first_tool_kept() -> None:
    first = make()
    registry = ToolRegistry([first])
    with pytest.raises(ToolRegistrationError, match="already registered") as info:
        registry.register(make(description="Another doubler."))
    assert isinstance(info.value, ValueError)  # spec 002 says ValueError
    assert registry.get("double") is first
    with pytest.raises(ToolRegistrationError):
        ToolRegistry([make(), make()])


def test_a_name_can_be_reused_after_unregister() -> None:
    registry = ToolRegistry([make()])
    registry.unregister("double")
    replacement = make(description="Replacement.")
    registry.register(replacement)
    assert registry.get("double") is replacement


@pytest.mark.parametrize("thing", [double, {"name": "x"}, "echo", None])
def test_only_tools_can_be_registered(thing: Any) -> None:
    with pytest.raises(ToolRegistrationError, match="FunctionTool"):
        ToolRegistry().register(thing)


def test_export_tools_for_llm() -> None:
    registry = ToolRegistry([make(example={"x": 3}), EchoTool()])
    exported = registry.export_tools_for_llm()
    assert [tool["name"] for tool in exported] == ["double", "echo"]
    for tool in exported:
        assert set(tool) == {"name", "description", "input_schema", "output_schema", "example"}
    assert exported[0] == {
        "name": "double",
        "description": "Double a number.",
        "input_schema": OBJECT,
        "output_schema": OBJECT,
        "example": {"x": 3},
    }
    assert make().describe()["example"] is None


def test_a_tool_class_reports_its_own_signature_whatever_was_built_before() -> None:
    """The registry binds a tool's ``[tools.X]`` options to its class's signature. The kernel's own tool classes
    build their pydantic schema when first used (a light import); a deferred subclass would report its parent's
    signature (``name`` required), so any other tool class is built as it is defined."""
    Tool.model_rebuild(force=True)  # the parent built first, as a run's earlier tools may have made it

    class Notebook(Tool):
        name: str = "notebook"
        description: str = "keeps notes"
        input_schema: dict[str, Any] = {"type": "object"}
        output_schema: dict[str, Any] = {"type": "object"}

        def invoke(self, **kwargs: Any) -> dict[str, Any]:
            return {}

    signature = inspect.signature(Notebook)
    assert signature.parameters["name"].default == "notebook"
    signature.bind(granted=frozenset({"x"}))  # what the registry does with a tool's options
