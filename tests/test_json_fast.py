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
