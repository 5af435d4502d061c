"""Two-tier JSON Schema validation: jsonschema-rs decides, the reference ``jsonschema`` explains failures."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import jsonschema
import pytest
from hypothesis import given
from hypothesis import strategies as st

from aeon_kernel.errors import ValidationError
from aeon_kernel.schemas import check_schema, compiled_validator, schema_errors, validate_against

ARGS = {
    "type": "object",
    "properties": {"value": {"type": "integer"}, "name": {"type": "string", "maxLength": 3}},
    "required": ["value"],
    "additionalProperties": False,
}

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=10,
)


@given(json_values)
def test_the_verdict_agrees_with_the_reference_library_on_json_data(instance: Any) -> None:
    reference = jsonschema.Draft202012Validator(ARGS)
    assert (schema_errors(ARGS, instance) == []) == reference.is_valid(instance)


def test_errors_name_every_violation_with_its_path_in_order() -> None:
    errors = schema_errors(ARGS, {"value": "x", "name": "long", "extra": 1})
    assert errors[0].startswith("at $:") and "'extra' was unexpected" in errors[0]
    assert errors[1:] == ["at $.name: 'long' is too long", "at $.value: 'x' is not of type 'integer'"]


def test_non_json_instances_are_judged_by_the_reference_library() -> None:
    # jsonschema-rs refuses a dict with an int key; the reference library still gives a verdict.
    assert schema_errors({"type": "object", "maxProperties": 1}, {1: "a"}) == []
    assert schema_errors({"type": "object", "maxProperties": 0}, {1: "a"})


def test_when_the_engines_disagree_the_fast_one_decides_and_says_why() -> None:
    # A tuple is an array to jsonschema-rs but not to jsonschema: the instance is judged by jsonschema-rs.
    assert schema_errors({"type": "array"}, (1, 2)) == []
    errors = schema_errors({"type": "array", "maxItems": 1}, (1, 2))
    assert errors and "at $:" in errors[0]


def test_a_schema_is_compiled_once_and_found_by_identity_or_content() -> None:
    schema = {"type": "string", "minLength": 2}
    first = compiled_validator(schema)
    assert compiled_validator(schema) is first
    assert compiled_validator(dict(schema)) is first  # same content, another object: the same compiled form


def test_validate_against_raises_an_aeon_error_listing_the_problems() -> None:
    with pytest.raises(ValidationError) as info:
        validate_against(ARGS, {}, "the arguments of add_one")
    assert str(info.value).startswith("the arguments of add_one does not match its schema: at $:")
    assert info.value.errors == ["at $: 'value' is a required property"]


def test_check_schema_rejects_what_is_not_a_schema() -> None:
    with pytest.raises(ValidationError, match="invalid JSON Schema"):
        check_schema({"type": 12})
    with pytest.raises(ValidationError, match="must be an object"):
        check_schema(["type"])
    check_schema(ARGS)


def test_a_valid_instance_never_imports_the_reference_library() -> None:
    probe = (
        "import sys; from aeon_kernel.schemas import schema_errors; "
        "assert schema_errors({'type': 'integer'}, 3) == []; print('jsonschema' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
