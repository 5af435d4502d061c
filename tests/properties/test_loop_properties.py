"""SC-007 and robustness: whatever the model writes, the loop ends in a structured result within the TTL and
writes exactly one complete JSONL line per cycle.

The model's output is drawn from random text, truncated and garbled plans, deep nesting, huge numbers and wrong
types. The run goes through a real Engine (entry-point plugins, config) with the JSONL sink on a real file.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aeon_kernel import Engine
from aeon_kernel.config import AeonConfig, Choice
from aeon_kernel.logs import read_log
from tests.plugins.test_jsonl_sink import FR_038_FIELDS

VALID_PLANS = [
    {
        "goal": "add",
        "steps": [
            {
                "step_id": "1",
                "description": "add",
                "tool": "calculator",
                "arguments": {"expression": "5 + 10"},
            },
            {"step_id": "2", "description": "say", "agent": "llm"},
        ],
    },
    {"goal": "echo", "steps": [{"step_id": "a", "description": "echo", "tool": "echo"}]},
    {"goal": "think", "steps": [{"step_id": "x", "description": "think", "agent": "llm"}]},
]

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)


@st.composite
def garbled(draw: st.DrawFn) -> str:
    text = json.dumps(draw(st.sampled_from(VALID_PLANS)))
    cut = draw(st.integers(min_value=0, max_value=len(text)))
    kind = draw(st.sampled_from(["truncate", "insert", "delete"]))
    if kind == "truncate":
        return text[:cut]
    if kind == "insert":
        return text[:cut] + draw(st.text(alphabet='{}[],:"\\ ', min_size=1, max_size=5)) + text[cut:]
    return text[:cut] + text[cut + draw(st.integers(min_value=1, max_value=10)) :]


model_outputs = st.one_of(
    st.text(max_size=200),
    garbled(),
    st.sampled_from(VALID_PLANS).map(json.dumps),
    json_values.map(json.dumps),
    st.integers(min_value=1, max_value=20_000).map(lambda n: "[" * n + "]" * n),
    st.integers(min_value=1, max_value=3000).map(lambda n: '{"goal": ' * n + "1" + "}" * n),
    st.integers(min_value=4000, max_value=6000).map(
        lambda n: json.dumps({"answer": "x"})[:-1] + ', "n": ' + "9" * n + "}"
    ),
    st.just('{"goal": 5, "steps": "nope"}'),
    st.just(
        '{"goal": "g", "steps": [{"step_id": "1", "description": "d", "tool": "calculator", '
        '"arguments": {"expression": "9**9**9"}}]}'
    ),
    st.just('{"answer": NaN}'),
    st.just('{"expression": 1e999}'),
    st.builds(lambda t: json.dumps({"answer": t}), st.text(min_size=1, max_size=30)),
    st.builds(lambda t: json.dumps({"tool": t}), st.sampled_from(["calculator", "echo", "rm", ""])),
)


def run_with(outputs: list[str], ttl: int) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "run.jsonl"
        config = AeonConfig(ttl=ttl, telemetry=(Choice("jsonl", {"path": str(log)}),)).with_choice(
            "llm", "scripted", responses=outputs
        )
        with Engine(config) as engine:
            result = engine.orchestrator().execute("do something")
        return result, list(read_log(log)) if log.exists() else []  # every line's FR-038 fields whole


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(outputs=st.lists(model_outputs, max_size=8), ttl=st.integers(min_value=1, max_value=6))
def test_any_model_output_ends_in_a_structured_result(outputs: list[str], ttl: int) -> None:
    result, lines = run_with(outputs, ttl)

    assert result["status"] in {"completed", "failed", "ttl_expired"}
    cycles = result["final_state"]["cycle"]
    assert 1 <= cycles <= ttl
    manifest, *lines = lines
    assert manifest["manifest"]["run_id"] == result["run_id"]
    assert len(lines) == cycles  # SC-007: one line per cycle, every one complete
    assert [line["step_number"] for line in lines] == list(range(1, cycles + 1))
    for line in lines:
        assert set(line) >= FR_038_FIELDS
        assert line["ttl_remaining"] == ttl - line["step_number"]
    if result["status"] == "ttl_expired":
        assert cycles == ttl
    json.dumps(result)  # the whole result is JSON-ready
