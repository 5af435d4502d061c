"""Issue 13, items 5 and 11: whatever a tool returns or a model writes, a run with a durable store ends in a
structured result — never a traceback, never a run left ``running`` — and nothing that is not JSON data enters the
state; two claims in one process never drive one run.

The Hypothesis tests draw arbitrary Python objects (bytes, sets, objects, NaN, huge integers, non-string keys,
lone surrogates, nesting past the limit, cycles) as tool results, and arbitrary text (lone surrogates raw and
escaped, deep nesting, NaN, huge numbers, megabytes) as model output, and run each through a real Engine
(entry-point plugins, config) with the ``sqlite`` state store and the JSONL sink on real files.
"""

from __future__ import annotations

import datetime
import json
import math
import tempfile
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import Field

from aeon_kernel import Engine, RunStoreError, Tool, hookimpl
from aeon_kernel.config import AeonConfig, Choice
from tests.support.builders import answer, llm_step, plan, tool_step

#: Parts of a result exempt from the UTF-8 check: none, since the model client keeps a lone surrogate in model text
#: as its escape and the parser refuses one that a ``\ud800`` escape would bring in.
RAW_MODEL_TEXT: tuple[str, ...] = ()

#: How deep a tool result may nest (``aeon_kernel.invocation.MAX_RESULT_DEPTH``).
MAX_RESULT_DEPTH = 100

# --- what a hostile tool returns --------------------------------------------------------------------------------


class Opaque:
    """An object no encoder knows, whose str() fails too (``default=str`` in an encoder raises)."""

    def __str__(self) -> str:
        raise RuntimeError("no str")

    def __repr__(self) -> str:
        return "Opaque()"


class Exploding(dict):  # type: ignore[type-arg]
    """A dict whose items cannot be read."""

    def items(self) -> Any:
        raise RuntimeError("no items")


def nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(depth - 1):
        value = {"a": value}
    return value


def cyclic() -> dict[str, Any]:
    value: dict[str, Any] = {"a": 1}
    value["self"] = value
    return value


surrogates = st.characters(codec=None, categories=["Cs"])
any_text = st.text(
    alphabet=st.one_of(st.characters(categories=["L", "N", "P", "Zs", "Cc", "So"]), surrogates), max_size=12
)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.sampled_from([4000, 4001, 19]).map(lambda digits: -(10**digits)),  # past 4,000 digits, past 64 bits
    st.floats(),  # NaN and infinities included
    any_text,
    st.binary(max_size=8),
    st.complex_numbers(allow_nan=False, max_magnitude=10),
    st.decimals(allow_nan=True),
    st.datetimes(max_value=datetime.datetime(2100, 1, 1)),
    st.frozensets(st.integers(), max_size=3),
    st.sampled_from([Opaque(), object(), Ellipsis, print, int, b"\xff", bytearray(b"\x80")]),
)
keys = st.one_of(any_text, st.integers(), st.none(), st.booleans(), st.floats(), st.tuples())
python_objects = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.tuples(inner, inner),
        st.dictionaries(keys, inner, max_size=4),
        st.dictionaries(st.text(max_size=6), inner, max_size=4),
    ),
    max_leaves=16,
)
tool_results = st.one_of(
    python_objects,
    st.dictionaries(st.text(max_size=6), python_objects, max_size=4),
    st.integers(min_value=MAX_RESULT_DEPTH - 3, max_value=MAX_RESULT_DEPTH + 3).map(nested),
    st.integers(min_value=200, max_value=6000).map(nested),
    st.builds(cyclic),
    st.builds(lambda: Exploding(a=1)),
    st.integers(min_value=0, max_value=2_000_000).map(lambda n: {"text": "x" * n}),
)


def is_json(value: Any, depth: int = 0) -> bool:
    """The oracle, written independently of the kernel's check: is ``value`` JSON data the kernel should keep?
    (At most MAX_RESULT_DEPTH containers deep.)"""
    if isinstance(value, (list, tuple, dict)) and depth >= MAX_RESULT_DEPTH:
        return False
    if value is None or isinstance(value, bool):
        return True
    if isinstance(value, int):
        return abs(value) < 10**4000
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, str):
        return utf8(value)
    if type(value) is Exploding:
        return False
    if isinstance(value, (list, tuple)):
        return all(is_json(v, depth + 1) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and utf8(k) and is_json(v, depth + 1) for k, v in value.items())
    return False


def utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


class HostileTool(Tool):
    name: str = "hostile"
    description: str = "Returns whatever it was told to."
    input_schema: dict[str, Any] = {"type": "object", "properties": {}}
    output_schema: dict[str, Any] = {}
    behaviour: Any = Field(default=None, exclude=True)

    def invoke(self, **kwargs: Any) -> Any:
        return self.behaviour()


class HostilePlugin:
    def __init__(self, behaviour: Callable[[], Any]) -> None:
        self.behaviour = behaviour

    @hookimpl
    def aeon_register_tools(self, register: Any) -> None:
        register("hostile", lambda: HostileTool(behaviour=self.behaviour))


class Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no str")

    def __repr__(self) -> str:
        return "Unprintable()"


# --- running a real Engine with a durable store -----------------------------------------------------------------


def run_engine(
    responses: list[Any],
    plugins: Sequence[Any] = (),
    ttl: int = 6,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """One run through a real Engine with the sqlite store and the JSONL sink; the result, and what the store and
    the log hold afterwards. The responses go through a file (ASCII-escaped), so a lone surrogate in them reaches
    the model's text as it is."""
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        (home / "responses.json").write_text(json.dumps(responses), encoding="utf-8")
        config = AeonConfig(
            ttl=ttl,
            state=Choice("sqlite", {"path": str(home / "state.db")}),
            telemetry=(Choice("jsonl", {"path": str(home / "run.jsonl")}),),
        ).with_choice("llm", "scripted", responses=str(home / "responses.json"))
        with Engine(config, plugins=list(plugins)) as engine:
            result = engine.run("do something")
            store = engine.state_store
            assert store is not None
            runs = [summary.to_dict() for summary in store.list_runs()]
            stored = store.load(result["run_id"]).state.model_dump(mode="json")
        log = home / "run.jsonl"
        lines = (
            [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
            if log.exists()
            else []
        )
    return result, {"runs": runs, "stored": stored, "lines": lines}


def assert_structured(
    result: dict[str, Any], after: dict[str, Any], raw_model_text: tuple[str, ...] = ()
) -> None:
    """A finished run, stored as finished, logged cycle by cycle, and JSON data throughout."""
    assert result["status"] in {"completed", "failed", "ttl_expired"}
    (listed,) = after["runs"]
    assert listed["run_id"] == result["run_id"] and listed["status"] == result["status"]  # never left running
    assert after["stored"] == result["final_state"]  # the store holds what the run returned
    cycles = result["final_state"]["cycle"]
    assert [line["step_number"] for line in after["lines"] if "step_number" in line] == list(
        range(1, cycles + 1)
    )
    state = {k: v for k, v in result["final_state"].items() if k not in raw_model_text}
    kept = {**{k: v for k, v in result.items() if k != "final_state"}, "final_state": state}
    assert_json_data(kept)


def assert_json_data(value: Any, path: str = "") -> None:
    """Plain JSON data: str keys, finite numbers, text with a UTF-8 form — what --json prints and a log holds."""
    if isinstance(value, dict):
        for key, item in value.items():
            assert isinstance(key, str) and utf8(key), f"{path}: key {key!r}"
            assert_json_data(item, f"{path}[{key!r}]")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            assert_json_data(item, f"{path}[{index}]")
    else:
        assert value is None or isinstance(value, (bool, int, float, str)), f"{path}: {type(value).__name__}"
        assert not isinstance(value, float) or math.isfinite(value), f"{path}: {value!r}"
        assert not isinstance(value, str) or utf8(value), f"{path}: {value!r}"


STEPS = plan(tool_step("1", "hostile", {}), llm_step("2"), goal="use the hostile tool")


#: A tool that raises: with a message holding lone surrogates, or an exception that cannot even be printed.
RAISES = st.one_of(any_text.map(lambda text: ValueError(text)), st.builds(Unprintable))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=st.one_of(tool_results, RAISES))
def test_whatever_a_tool_returns_the_run_ends_structured_and_the_state_holds_json(value: Any) -> None:
    def behaviour() -> Any:
        if isinstance(value, Exception):
            raise value
        return value

    # "done" states no number: where the result holds one, the kernel asks again, then answers with the result
    result, after = run_engine([STEPS, answer("done"), answer("done")], [HostilePlugin(behaviour)])
    assert_structured(result, after)
    (call, *_) = result["final_state"]["tool_history"]
    first = result["final_state"]["plan"]["steps"][0]
    if isinstance(value, dict) and is_json(value):
        assert call["result"] == json.loads(json.dumps(value)) and first["status"] == "complete"
        assert result["status"] == "completed"
    else:  # a tool failure record: the step failed, the value was left out
        assert call["result"] is None and call["error"]["message"].startswith("hostile")
        assert first["status"] == "failed" and first["result"] is None
        assert result["status"] == "failed"


# --- what a hostile model writes --------------------------------------------------------------------------------


def with_text(text: str) -> list[dict[str, Any]]:
    """Plans and answers carrying ``text`` in every place the model fills in."""
    return [
        plan(tool_step("1", "echo", {"message": text}), goal=text),
        plan(llm_step(text or "x"), goal="g"),
        {"goal": "g", "steps": [{"step_id": "1", "description": text, "agent": "llm"}]},
        {"answer": text},
        {"message": text},
    ]


model_texts = st.one_of(
    any_text,
    st.text(alphabet=surrogates, min_size=1, max_size=3),
    any_text.flatmap(lambda t: st.sampled_from(with_text(t))).map(
        lambda v: json.dumps(v)
    ),  # escaped surrogates
    any_text.flatmap(lambda t: st.sampled_from(with_text(t))).map(
        lambda v: json.dumps(v, ensure_ascii=False)
    ),
    st.integers(min_value=1, max_value=20_000).map(lambda n: "[" * n + "]" * n),
    st.integers(min_value=1, max_value=200).map(lambda n: json.dumps({"answer": nested(n)})),
    st.integers(min_value=1, max_value=200).map(
        lambda n: json.dumps(plan(tool_step("1", "echo", {"message": nested(n)}), goal="g"))
    ),
    st.sampled_from(
        [
            '{"answer": NaN}',
            '{"answer": [Infinity]}',
            '{"message": -Infinity}',
            '{"answer": ' + "9" * 5000 + "}",
            '{"answer": "\\ud800"}',
            '{"goal": "\\udfff", "steps": [{"step_id": "\\ud800", "description": "d", "agent": "llm"}]}',
            json.dumps({"answer": "x" * 1_000_000}),
        ]
    ),
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(outputs=st.lists(model_texts, min_size=1, max_size=5), ttl=st.integers(min_value=1, max_value=6))
def test_whatever_the_model_writes_the_run_ends_structured_and_the_state_holds_json(
    outputs: list[str], ttl: int
) -> None:
    result, after = run_engine(outputs, ttl=ttl)
    assert_structured(result, after, raw_model_text=RAW_MODEL_TEXT)


# --- item 11: one run, one claim --------------------------------------------------------------------------------


class Counter(Tool):
    """A side effect with no idempotency of its own: every call counts."""

    name: str = "count"
    description: str = "Count that step n ran."
    input_schema: dict[str, Any] = {"type": "object", "properties": {"n": {"type": "integer"}}}
    output_schema: dict[str, Any] = {}
    calls: Any = Field(exclude=True)  # the plugin's list itself (a typed field would be copied)

    def invoke(self, **kwargs: Any) -> dict[str, Any]:
        self.calls.append(kwargs["n"])
        return {"n": kwargs["n"]}


class CounterPlugin:
    def __init__(self) -> None:
        self.calls: list[int] = []

    @hookimpl
    def aeon_register_tools(self, register: Any) -> None:
        register("count", lambda: Counter(calls=self.calls))


FIVE_COUNTS = plan(*[tool_step(str(i), "count", {"n": i}) for i in range(1, 6)], goal="count to five")


def counting_engine(home: Path, counter: CounterPlugin, responses: list[Any] | None = None) -> Engine:
    config = AeonConfig(state=Choice("sqlite", {"path": str(home / "state.db")})).with_choice(
        "llm", "scripted", responses=[FIVE_COUNTS] if responses is None else responses
    )
    return Engine(config, plugins=[counter])


@pytest.fixture
def interrupted(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    """A run stopped after its plan and first step (released, resumable)."""
    counter = CounterPlugin()
    with counting_engine(tmp_path, counter) as engine:
        cycles = engine.orchestrator().iter("count")
        run_id = [next(cycles).run_id for _ in range(2)][-1]
        cycles.close()  # type: ignore[attr-defined]  # a generator
    assert counter.calls == [1]
    yield tmp_path, run_id


def race(resumers: list[Callable[[], Any]]) -> list[Any]:
    """Start every resumer at the same moment; what each returned or raised."""
    barrier = threading.Barrier(len(resumers))
    outcomes: list[Any] = [None] * len(resumers)

    def go(index: int) -> None:
        barrier.wait()
        try:
            outcomes[index] = resumers[index]()
        except Exception as exc:
            outcomes[index] = exc

    threads = [threading.Thread(target=go, args=(i,)) for i in range(len(resumers))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return outcomes


def resume_to_the_end(engine: Engine, run_id: str) -> dict[str, Any]:
    """Claim, then (after the others have tried) run to the end."""
    run = engine.orchestrator().start_resume(run_id)
    with run:
        threading.Event().wait(0.2)  # the other claim is tried while this one holds the run
        return run.execute().to_dict()


def test_two_threads_of_one_engine_resume_a_run_once(interrupted: tuple[Path, str]) -> None:
    home, run_id = interrupted
    counter = CounterPlugin()
    with counting_engine(home, counter, responses=[]) as engine:
        outcomes = race([lambda: resume_to_the_end(engine, run_id)] * 2)
        errors = [o for o in outcomes if isinstance(o, Exception)]
        results = [o for o in outcomes if isinstance(o, dict)]
        assert len(results) == 1 and len(errors) == 1, outcomes
        assert isinstance(errors[0], RunStoreError)
        assert "being run by another run of this process" in str(errors[0])
        assert results[0]["status"] == "completed"
        assert sorted(counter.calls) == [2, 3, 4, 5]  # every remaining step ran once
        (summary,) = engine.state_store.list_runs()  # type: ignore[union-attr]
        assert summary.status == "completed"


def test_two_engines_in_one_process_resume_a_run_once(interrupted: tuple[Path, str]) -> None:
    home, run_id = interrupted
    counter = CounterPlugin()
    with counting_engine(home, counter, []) as one, counting_engine(home, counter, []) as two:
        outcomes = race([lambda: resume_to_the_end(one, run_id), lambda: resume_to_the_end(two, run_id)])
    errors = [o for o in outcomes if isinstance(o, Exception)]
    assert len(errors) == 1 and isinstance(errors[0], RunStoreError), outcomes
    assert sorted(counter.calls) == [2, 3, 4, 5]


def test_a_run_being_driven_cannot_be_resumed_beside_it(tmp_path: Path) -> None:
    """The run a thread is still driving (started here, not resumed) is not resumable by another until it stops."""
    counter = CounterPlugin()
    with counting_engine(tmp_path, counter) as engine:
        run = engine.start("count")
        run.next()  # the plan: the run is in the store, held by this run
        with pytest.raises(RunStoreError, match="another run of this process"):
            engine.orchestrator().start_resume(run.run_id)
        run.close()  # stopped: released, and now resumable
        assert engine.orchestrator().start_resume(run.run_id).execute().status == "completed"
    assert counter.calls == [1, 2, 3, 4, 5]
