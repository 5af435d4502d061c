"""Whatever a configuration holds, Aeon answers with a configuration error or a finished run (issue 13).

Hypothesis writes configurations as a user or a template generator might get them wrong: every section, real and
made-up component names, real and made-up options, and values of every JSON/TOML type and then some (NaN, huge
integers, lone surrogates, deep nesting). Each goes through ``parse_config`` and a real Engine with a durable
store and a JSONL log, in a scratch directory. The only acceptable outcomes are an ``AeonError`` (what the CLI
turns into a clear message and exit 2) or a run that ended with a status; anything else is a traceback a user
would see.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from aeon_kernel import AeonError, Engine
from aeon_kernel.config import parse_config
from tests.support.builders import answer, plan, tool_step

#: Options that name files or servers are left out: a random one could write anywhere or wait on the network.
UNSAFE_KEYS = {"path", "responses", "model_path", "base_url", "url", "address", "host", "port", "api_key"}

NAMES = {
    "memory": ["in_memory", "sqlite"],
    "validator": ["schema"],
    "supervisor": ["default"],
    "convergence": ["plan_finished", "model"],
    "planner": ["model", "recursive"],
    "scheduler": ["linear", "multipass"],
    "depth": ["model"],
    "semantic_validator": ["model"],
}

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=-(2**80), max_value=2**80),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
    st.text(alphabet=st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF), min_size=1, max_size=2),
    st.sampled_from(["", "0", "-1", "1e999", "nan", "{}", "[]", "\x00", "é" * 3]),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=4,
)
keys = st.one_of(
    st.sampled_from(
        [
            "ttl",
            "max_tokens",
            "temperature",
            "timeout",
            "max_plan_steps",
            "max_plan_bytes",
            "max_argument_bytes",
            "attempts",
            "ttl_cap",
            "shallow_plan_steps",
            "enabled",
            "use",
            "mode",
            "block",
            "allow",
        ]
    ),
    st.text(max_size=10),
).filter(lambda key: key not in UNSAFE_KEYS)
options = st.dictionaries(keys, values, max_size=3)


def rarely(draw: st.DrawFn) -> bool:
    return draw(st.integers(0, 3)) == 3  # the simplest draw (0) is the sound choice, so shrinking leads to it


@st.composite
def configs(draw: st.DrawFn) -> dict[str, Any]:
    """Mostly sound configurations with one or two things wrong, so that runs get deep as well as refused."""
    data: dict[str, Any] = {}
    for role, names in NAMES.items():
        if rarely(draw):
            table = draw(options) if rarely(draw) else {}
            table["use"] = draw(values) if rarely(draw) else draw(st.sampled_from(names))
            data[role] = table
    for section in ("run", "reasoning", "telemetry", "tools", "plugins", "state"):
        if rarely(draw):
            data[section] = draw(values) if rarely(draw) else draw(options)
    if rarely(draw) and rarely(draw):
        data[draw(st.text(max_size=8))] = draw(values)  # a section that does not exist
    responses = [
        json.dumps(plan(tool_step("1", "calculator", {"expression": "2 + 3"}))),
        answer("5"),
    ] * 4
    extra = draw(options) if rarely(draw) else {}
    data["llm"] = {**extra, "use": "scripted", "responses": responses}
    return data


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=configs())
def test_any_configuration_ends_in_a_config_error_or_a_finished_run(data: dict[str, Any]) -> None:
    with in_scratch_directory():
        try:
            config = parse_config(data)
            with Engine(config) as engine:
                result = engine.run("add 2 and 3", ttl=4)
        except AeonError as exc:
            event(f"refused: {type(exc).__name__}")
            assert str(exc)  # a message the CLI prints with exit 2
            return
    event(f"ran: {result['status']}")
    assert result["status"] in {"completed", "failed", "ttl_expired"}
    json.dumps(result, allow_nan=False)  # what --json prints: JSON, whatever the options were


def test_a_plain_configuration_from_the_same_generator_runs() -> None:
    """The property is not vacuous: the generator's plainest case is a run that completes."""
    data = {
        "llm": {"use": "scripted", "responses": [json.dumps(plan(tool_step("1", "echo", {"message": "hi"})))]}
    }
    with in_scratch_directory(), Engine(parse_config(data)) as engine:
        assert engine.run("say hi", ttl=4)["status"] == "completed"


@contextmanager
def in_scratch_directory() -> Iterator[None]:
    """Relative paths a configuration implies (stores, logs) land in a directory removed afterwards."""
    before = os.getcwd()
    with tempfile.TemporaryDirectory() as scratch:
        os.chdir(scratch)
        try:
            yield
        finally:
            os.chdir(before)
