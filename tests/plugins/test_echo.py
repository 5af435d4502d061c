"""The ``echo`` tool: the message comes back unchanged, and its schemas hold it to ``{"message": str}``."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aeon_kernel import ToolRegistry, ValidationError
from aeon_plugins.echo import EchoTool, aeon_register_tools


@given(st.text())
def test_round_trip(message: str) -> None:
    tool = EchoTool()
    assert tool.validate_input(message=message)
    result = tool.invoke(message=message)
    assert result == {"message": message}
    assert tool.validate_output(result)


def test_result_is_a_new_dict_each_call() -> None:
    tool = EchoTool()
    first = tool.invoke(message="hi")
    first["message"] = "changed"
    assert tool.invoke(message="hi") == {"message": "hi"}


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        ({}, "'message' is a required property"),
        ({"message": "a", "extra": 1}, "Additional properties are not allowed"),
        ({"msg": "a"}, "'message' is a required property"),
        ({"message": 5}, "is not of type 'string'"),
        ({"message": None}, "is not of type 'string'"),
    ],
)
def test_input_schema_rejects_bad_arguments(arguments: dict[str, Any], problem: str) -> None:
    with pytest.raises(ValidationError) as info:
        EchoTool().validate_input(**arguments)
    assert any(problem in error for error in info.value.errors), info.value.errors
    assert str(info.value).startswith("echo arguments invalid")


def test_every_problem_is_listed() -> None:
    with pytest.raises(ValidationError) as info:
        EchoTool().validate_input(extra=1)
    assert len(info.value.errors) == 2  # the missing key and the extra key


@pytest.mark.parametrize("result", [{}, {"message": 1}, {"message": "a", "more": "b"}])
def test_output_schema_rejects_bad_results(result: dict[str, Any]) -> None:
    with pytest.raises(ValidationError, match="echo result invalid"):
        EchoTool().validate_output(result)


def test_registered_and_exported() -> None:
    registered: list[tuple[str, Any]] = []
    aeon_register_tools(lambda name, factory: registered.append((name, factory)))
    assert [name for name, _ in registered] == ["echo"]
    registry = ToolRegistry([registered[0][1]()])
    [exported] = registry.export_tools_for_llm()
    assert exported["name"] == "echo"
    assert exported["example"] == {"message": "hello"}
    tool = registry.get("echo")
    assert tool is not None
    assert tool.validate_input(**exported["example"])
