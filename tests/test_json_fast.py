"""The fast JSON paths (issue 31) write and read exactly what ``json`` does: ``json_encoder`` builds the C encoder
once instead of per call, ``decode_own`` reads the text ``encode_value`` wrote without ``json.loads``'s layers."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aeon_kernel.kit import decode_own, encode_value, json_encoder

scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.text(max_size=8)
    | st.sampled_from(["\ud800", "é", "日本", '"\\', "\x00", "\u2028"])
)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.tuples(inner, inner)
        | st.dictionaries(st.text(max_size=4) | st.integers(), inner, max_size=4)
    ),
    max_leaves=16,
)
OPTIONS = [
    {},
    {"ensure_ascii": False},
    {"allow_nan": False},
    {"ensure_ascii": False, "allow_nan": False},
    {"ensure_ascii": False, "default": str},
]


def outcome(encode: Any, value: Any) -> str | type[BaseException]:
    try:
        return str(encode(value))
    except (TypeError, ValueError) as exc:
        return type(exc)


@settings(max_examples=300, deadline=None)
@given(values | st.sets(st.integers(), max_size=2), st.sampled_from(OPTIONS))
def test_json_encoder_writes_what_json_writes(value: Any, options: dict[str, Any]) -> None:
    assert outcome(json_encoder(**options), value) == outcome(json.JSONEncoder(**options).encode, value)


@settings(max_examples=300, deadline=None)
@given(values)
def test_decode_own_reads_back_what_encode_value_wrote_as_json_loads_does(value: Any) -> None:
    try:
        text = encode_value("k", value)
    except Exception:
        return  # refused values are the memory contract's business (tests/plugins/test_in_memory.py)
    decoded, expected = decode_own(text), json.loads(text)
    assert json.dumps(decoded) == json.dumps(expected)  # NaN-free by encode_value, so equal as text


def test_a_cycle_is_an_error_not_a_hang() -> None:
    loop: list[Any] = []
    loop.append(loop)
    with pytest.raises(RecursionError):
        json_encoder()(loop)


def nested(depth: int, inner: Any) -> Any:
    for _ in range(depth):
        inner = [inner]
    return inner


json_texts = st.one_of(
    st.builds(lambda v, ascii: json.dumps(v, ensure_ascii=ascii), values, st.booleans()),
    st.builds(lambda depth, v: json.dumps(nested(depth, v)), st.integers(0, 40), scalars),
    st.builds(
        lambda mantissa, exponent: f'{{"x": [{mantissa}e{exponent}]}}',
        st.integers(1, 10**120).map(str),
        st.integers(-400, 400),
    ),
    st.builds(lambda digits: f"[{digits}.5]", st.integers(1, 400).map(lambda n: "9" * n)),
    st.sampled_from(
        ['"\\ud800"', '{"\\uDFFF": 1}', '"\\ud83d\\ude00"', '["\\u00e9"]', "[1e999]", "[-1e309]"]
    ),
)


@settings(max_examples=400, deadline=None)
@given(json_texts)
def test_loads_strict_refuses_exactly_what_a_full_check_refuses(text: str) -> None:
    """loads_strict skips check_depth for text that cannot fail it (issue 31): it must refuse the same texts."""
    from aeon_kernel.llm.output import _reject_constant, check_depth, loads_strict

    decode = json.JSONDecoder(
        parse_constant=_reject_constant
    ).decode  # no shortcut: infinities reach check_depth

    def full(text: str) -> str | None:
        try:
            check_depth(decode(text))
        except (ValueError, RecursionError) as exc:
            return type(exc).__name__
        return None

    try:
        loads_strict(text)
        fast = None
    except ValueError as exc:
        fast = type(exc).__name__
    assert (fast is None) == (full(text) is None), text[:200]
