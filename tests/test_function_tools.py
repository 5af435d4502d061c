"""Tools made of typed functions (issue 28, part 1): ``@aeon_kernel.tool`` and ``Tool.from_function``.

The property that matters is that the schema the kernel validates arguments against is the function's own
validation: Hypothesis generates signatures and candidate arguments, and the kernel's verdict on each must be
pydantic's (the same signature, called with the arguments as JSON, strictly); whatever the schema accepts, the tool
then calls the function with, converted to its types.
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import inspect
import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Annotated, Any, Literal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Field, TypeAdapter
from pydantic import ValidationError as PydanticValidationError
from typing_extensions import TypedDict

from aeon_kernel import AeonConfig, ConfigError, DeadlineError, Engine, FunctionTool, Tool, hookimpl, tool
from aeon_kernel.errors import ToolRegistrationError
from aeon_kernel.invocation import ToolContext, checked, invoke_tool
from aeon_kernel.schemas import schema_errors
from aeon_kernel.testing import RecordingSink, tool_conformance

# --- the types generated signatures use (module level: pydantic resolves annotations from here) --------------------


class Color(enum.StrEnum):
    red = "red"
    green = "green"


class Level(enum.IntEnum):
    low = 1
    high = 2


class Point(BaseModel):
    x: int
    y: float = 0.0
    tags: list[str] = []


class Segment(BaseModel):
    start: Point
    end: Point | None = None


BASE_TYPES: list[Any] = [int, float, str, bool, Color, Level, Literal["a", "b", 3], Point, Segment]
#: a valid default for each base type (a wrapped one: None for an optional, [] for a list)
DEFAULTS: dict[Any, Any] = {
    int: 3,
    float: 1.5,
    str: "s",
    bool: False,
    Color: Color.red,
    Level: Level.low,
    Literal["a", "b", 3]: "a",
    Point: Point(x=1),
    Segment: Segment(start=Point(x=0)),
}

types = st.recursive(
    st.sampled_from(BASE_TYPES),
    lambda inner: st.one_of(inner.map(lambda t: t | None), inner.map(lambda t: list[t])),  # type: ignore[valid-type]
    max_leaves=3,
)


def default_of(annotation: Any) -> Any:
    if annotation in DEFAULTS:
        return DEFAULTS[annotation]
    return [] if getattr(annotation, "__origin__", None) is list else None


#: JSON values of every shape, integral floats left out (see test_an_integral_float_is_an_integer)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(-1e15, 1e15).map(lambda f: f + 0.5 if f.is_integer() else f),
    st.text(st.characters(exclude_categories=("Cs",)), max_size=5),
    st.sampled_from(["red", "green", "blue", "a", "b", "3", "1", "true", ""]),
    st.sampled_from([1, 2, 3, 0]),
)
json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.sampled_from(["x", "y", "tags", "start", "end", "z"]), inner, max_size=4),
    ),
    max_leaves=8,
)


def point_like(
    x: st.SearchStrategy[Any], other: st.SearchStrategy[Any] = json_values
) -> st.SearchStrategy[Any]:
    return st.fixed_dictionaries({"x": x}, optional={"y": other, "tags": other, "z": json_values})


#: the JSON form of valid values of each base type
VALID: dict[Any, st.SearchStrategy[Any]] = {
    int: st.integers(),
    float: st.integers() | st.floats(allow_nan=False, allow_infinity=False),
    str: st.text(st.characters(exclude_categories=("Cs",)), max_size=5),
    bool: st.booleans(),
    Color: st.sampled_from(["red", "green"]),
    Level: st.sampled_from([1, 2]),
    Literal["a", "b", 3]: st.sampled_from(["a", "b", 3]),
}
VALID[Point] = point_like(VALID[int], st.one_of(VALID[float], st.lists(VALID[str], max_size=2)))
VALID[Segment] = st.fixed_dictionaries({"start": VALID[Point]}, optional={"end": st.none() | VALID[Point]})


def values_for(annotation: Any) -> st.SearchStrategy[Any]:
    """Values of ``annotation``'s JSON form: valid ones mostly, and any JSON value now and then."""
    args = getattr(annotation, "__args__", ())
    if annotation in VALID:
        valid = VALID[annotation]
    elif getattr(annotation, "__origin__", None) is list:
        valid = st.lists(values_for(args[0]), max_size=3)
    else:  # X | None
        valid = st.none() | values_for(args[0])
    return st.one_of(valid, valid, TRICKY, json_values)


#: what a lax validation would take for another type: numbers as text, 0 and 1 for booleans, an enum's name, ...
TRICKY = st.sampled_from(
    ["3", "1", "1.5", "true", "red", "low", "", 0, 1, 2, 3, 2.5, True, False, None, [], {}]
)


def generated_function(annotations: dict[str, Any], defaults: dict[str, Any]) -> Callable[..., Any]:
    """A function with these keyword parameters that records what it is called with."""
    received: list[dict[str, Any]] = []

    def function(**kwargs: Any) -> dict[str, bool]:
        received.append(kwargs)
        return {"ok": True}

    kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
    parameters = [
        inspect.Parameter(
            name, kind, annotation=annotation, default=defaults.get(name, inspect.Parameter.empty)
        )
        for name, annotation in annotations.items()
    ]
    parameters.sort(key=lambda p: p.default is not inspect.Parameter.empty)  # required ones first
    function.__signature__ = inspect.Signature(parameters, return_annotation=dict[str, bool])  # type: ignore[attr-defined]
    function.__annotations__ = {**annotations, "return": dict[str, bool]}
    function.__doc__ = "A generated tool."
    function.received = received  # type: ignore[attr-defined]
    return function


@st.composite
def signatures_and_arguments(draw: st.DrawFn) -> tuple[Callable[..., Any], dict[str, Any]]:
    count = draw(st.integers(min_value=0, max_value=4))
    annotations = {f"p{i}": draw(types) for i in range(count)}
    defaults = {name: default_of(t) for name, t in annotations.items() if draw(st.booleans())}
    function = generated_function(annotations, defaults)
    # each argument given five times in six, an unknown one once in eleven (sampled_from shrinks to the first)
    given = st.sampled_from([True] * 5 + [False])
    arguments = {name: draw(values_for(t)) for name, t in annotations.items() if draw(given)}
    if draw(st.sampled_from([False] * 10 + [True])):
        arguments["extra"] = draw(json_values)
    return function, arguments


def pydantic_accepts(function: Callable[..., Any], arguments: dict[str, Any]) -> tuple[bool, Any]:
    """The function's own validation of a JSON call: ``validate_call`` with strict=True on the JSON text.

    Except that JSON ``true`` is no member of an integer enum: pydantic 2.14 takes it as 1 even strictly (2.13 did
    not), where the JSON Schema the kernel derives (an ``enum`` of integers) refuses it, as JSON Schema says."""
    try:
        TypeAdapter(function).validate_json(json.dumps(arguments), strict=True)
    except PydanticValidationError:
        return False, None
    received = function.received[-1]  # type: ignore[attr-defined]
    if any(
        _bool_became_enum(arguments[name], value) for name, value in received.items() if name in arguments
    ):
        return False, None
    return True, received


def _bool_became_enum(sent: Any, received: Any) -> bool:
    if isinstance(sent, bool):
        return isinstance(received, enum.Enum)
    if isinstance(sent, list) and isinstance(received, (list, tuple)):
        return any(_bool_became_enum(s, r) for s, r in zip(sent, received, strict=False))
    if isinstance(sent, dict) and isinstance(received, dict):
        return any(_bool_became_enum(sent[k], received[k]) for k in sent.keys() & received.keys())
    return False


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(signatures_and_arguments())
def test_the_derived_schema_accepts_exactly_what_the_function_accepts(
    case: tuple[Callable[..., Any], dict[str, Any]],
) -> None:
    function, arguments = case
    derived = tool(function)
    kernel_accepts = schema_errors(derived.input_schema, arguments) == []
    accepts, expected = pydantic_accepts(function, arguments)
    assert kernel_accepts == accepts, (function.__annotations__, arguments, derived.input_schema)
    if kernel_accepts:  # the tool calls the function with what pydantic would have made of the arguments
        assert derived.invoke(**arguments) == {"ok": True}
        assert function.received[-1] == expected  # type: ignore[attr-defined]


def test_an_integral_float_is_an_integer() -> None:
    """JSON does not tell 3 from 3.0, nor does JSON Schema's ``integer``: the tool passes the function an int."""

    @tool
    def double(n: int) -> int:
        """Double a number."""
        assert type(n) is int
        return 2 * n

    assert double.validate_input(n=3.0)
    assert double.invoke(n=3.0) == {"result": 6}


# --- what the tool is made of ---------------------------------------------------------------------------------------


class Unit(enum.Enum):
    km = "km"
    mi = "mi"


class Distance(BaseModel):
    value: float
    unit: Unit


@dataclasses.dataclass
class Span:
    start: int
    end: int


class Counts(TypedDict):
    words: int
    characters: int


class Node(BaseModel):
    label: str
    children: list[Node] = []


def test_the_schemas_come_from_the_types_and_the_docstring() -> None:
    @tool
    def measure(
        a: Annotated[Point, Field(description="where it starts")],
        b: Point,
        unit: Unit = Unit.km,
        precision: int | None = None,
    ) -> Distance:
        """Measure the distance between two points.

        The straight line, in the unit asked for.

        Args:
            a: Overridden: Field's description wins.
            b: Where it ends.
            unit: The unit of the result.

        Returns:
            The distance.
        """
        d = ((a.x - b.x) ** 2 + (a.y - b.y) ** 2) ** 0.5
        return Distance(value=d if precision is None else round(d, precision), unit=unit)

    assert isinstance(measure, FunctionTool) and measure.name == "measure"
    assert (
        measure.description
        == "Measure the distance between two points.\n\nThe straight line, in the unit asked for."
    )
    schema = measure.input_schema
    assert schema["required"] == ["a", "b"] and schema["additionalProperties"] is False
    properties = schema["properties"]
    assert properties["a"]["description"] == "where it starts"
    assert properties["b"] == {"$ref": "#/$defs/Point", "description": "Where it ends."}
    assert properties["unit"] == {
        "$ref": "#/$defs/Unit",
        "default": "km",
        "description": "The unit of the result.",
    }
    assert schema["$defs"]["Unit"]["enum"] == ["km", "mi"]
    assert properties["precision"]["anyOf"] == [{"type": "integer"}, {"type": "null"}]
    assert "title" not in properties["precision"]
    assert (
        measure.output_schema["type"] == "object" and measure.output_schema["description"] == "The distance."
    )
    assert measure.output_schema["required"] == ["value", "unit"]
    assert measure.invoke(a={"x": 0}, b={"x": 3, "y": 4}, unit="mi") == {"value": 5.0, "unit": "mi"}


@pytest.mark.parametrize(
    ("annotation", "value", "result"),
    [
        (int, 3, {"result": 3}),
        (str, "hi", {"result": "hi"}),
        (float | None, None, {"result": None}),
        (list[Unit], [Unit.km], {"result": ["km"]}),
        (type(None), None, {"result": None}),
        (Distance, Distance(value=1.5, unit=Unit.mi), {"value": 1.5, "unit": "mi"}),
        (Span, Span(1, 2), {"start": 1, "end": 2}),
        (Counts, {"words": 1, "characters": 2}, {"words": 1, "characters": 2}),
        (dict[str, int], {"a": 1}, {"a": 1}),
        (
            Node,
            Node(label="a", children=[Node(label="b")]),
            {"label": "a", "children": [{"label": "b", "children": []}]},
        ),
        (Any, {"a": 1}, {"result": {"a": 1}}),
    ],
)
def test_the_return_value_is_the_result_object_or_wrapped_as_result(
    annotation: Any, value: Any, result: dict[str, Any]
) -> None:
    """An object (dict, TypedDict, model, dataclass) is the result; anything else is ``{"result": value}``."""

    def function() -> Any:
        """Return the value."""
        return value

    function.__annotations__ = {"return": annotation}
    derived = tool(function)
    assert derived.output_schema["type"] == "object"
    assert derived.invoke() == result
    assert derived.validate_output(result)


TestWordCountConformance = tool_conformance(
    lambda: tool(example={"text": "to be or not to be"})(_word_count)  # type: ignore[arg-type]
)


def _word_count(text: str) -> Counts:
    """Count the words and characters of a text."""
    return {"words": len(text.split()), "characters": len(text)}


@pytest.mark.parametrize(
    "docstring",
    [
        # Google
        """Repeat a text.

        Args:
            text: The text to repeat.
            times: How many times.
        """,
        # NumPy
        """Repeat a text.

        Parameters
        ----------
        text : str
            The text to repeat.
        times : int
            How many times.
        """,
        # Sphinx
        """Repeat a text.

        :param text: The text to repeat.
        :param times: How many times.
        """,
    ],
    ids=["google", "numpy", "sphinx"],
)
def test_each_docstring_style_describes_the_parameters(docstring: str) -> None:
    def repeat(text: str, times: int = 2) -> str:
        return text * times

    repeat.__doc__ = docstring
    derived = tool(repeat)
    assert derived.description == "Repeat a text."
    assert derived.input_schema["properties"]["text"]["description"] == "The text to repeat."
    assert derived.input_schema["properties"]["times"]["description"] == "How many times."
    assert derived.invoke(text="ab") == {"result": "abab"}


def test_options_and_the_long_constructor() -> None:
    def lookup(key: str) -> dict[str, str]:
        """Look a key up."""
        return {"value": key.upper()}

    derived = Tool.from_function(
        lookup,
        name="vault.lookup",
        description="Look a secret up.",
        permissions={"read": "read secrets"},
        timeout=5,
        example={"key": "k"},
        sensitive_results=frozenset({"value"}),
    )
    assert (derived.name, derived.description, derived.timeout) == ("vault.lookup", "Look a secret up.", 5)
    assert derived.permissions == {"read": "read secrets"} and derived.granted == frozenset()
    assert derived.example == {"key": "k"} and derived.sensitive_results == {"value"}
    assert tool(name="x")(lookup).name == "x"


# --- errors at definition time ----------------------------------------------------------------------------------


def _variadic(*texts: str) -> int:
    """Count."""
    return len(texts)


def _keywords(**texts: str) -> int:
    """Count."""
    return len(texts)


def _positional(text: str, /) -> int:
    """Count."""
    return len(text)


def _unannotated(text, n: int) -> int:  # type: ignore[no-untyped-def]
    """Count."""
    return n


def _socket(connection: socket.socket) -> int:
    """Send."""
    return 0


def _callback(callback: Callable[[int], int]) -> int:
    """Call back."""
    return callback(1)


def _no_return(text: str):  # type: ignore[no-untyped-def]
    """Count."""
    return {}


def _returns_socket(text: str) -> socket.socket:
    """Open."""
    raise NotImplementedError


def _undocumented(text: str) -> int:
    return 0


@pytest.mark.parametrize(
    ("function", "message"),
    [
        (
            _variadic,
            "the parameter 'texts' is variadic positional, but a tool is called with named arguments only",
        ),
        (_keywords, "the parameter 'texts' is variadic keyword"),
        (_positional, "the parameter 'text' is positional-only"),
        (_unannotated, "the parameter 'text' has no type annotation"),
        (_socket, "the parameter 'connection' (<class 'socket.socket'>) has no JSON Schema"),
        (_callback, "the parameter 'callback' (collections.abc.Callable[[int], int]) has no JSON Schema"),
        (_no_return, "_no_return has no return annotation: annotate it (-> dict[str, Any] for any object)"),
        (_returns_socket, "the return (<class 'socket.socket'>) has no JSON Schema"),
        (_undocumented, "_undocumented has no docstring: write one"),
    ],
)
def test_what_cannot_be_a_tool_is_an_error_naming_it(function: Callable[..., Any], message: str) -> None:
    with pytest.raises(ToolRegistrationError) as raised:
        tool(function)
    assert message in str(raised.value)
    assert str(raised.value).startswith(function.__qualname__)


def test_bad_options_are_errors_at_definition_time() -> None:
    with pytest.raises(ToolRegistrationError, match="has no option timout"):
        tool(timout=3)(_word_count)
    with pytest.raises(ToolRegistrationError, match="tool names are letters"):
        tool(name="word count")(_word_count)
    with pytest.raises(ToolRegistrationError, match="greater than 0"):
        tool(timeout=0)(_word_count)


# --- async functions ---------------------------------------------------------------------------------------------


async def _slow_echo(text: str, delay: float = 0.0) -> str:
    """Echo a text, after a while."""
    await asyncio.sleep(delay)
    return text


def test_an_async_tool_runs_from_the_kernels_synchronous_invoke() -> None:
    echo = tool(_slow_echo)
    assert echo.invoke(text="hi") == {"result": "hi"}
    assert echo.input_schema["properties"]["delay"] == {"default": 0.0, "type": "number"}


def test_an_async_tool_runs_inside_a_running_event_loop() -> None:
    """An async embedder that calls into the engine: the coroutine gets a loop of its own, on a worker thread."""
    echo = tool(_slow_echo)

    async def main() -> dict[str, Any]:
        return echo.invoke(text="inside")

    assert asyncio.run(main()) == {"result": "inside"}


def test_an_async_tool_is_cancelled_at_its_timeout() -> None:
    cancelled = threading.Event()

    @tool(timeout=0.2)
    async def wait(seconds: float) -> bool:
        """Wait."""
        try:
            await asyncio.sleep(seconds)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return True

    assert wait.enforces_timeout and not tool(_word_count).enforces_timeout
    with pytest.raises(DeadlineError, match=r"did not finish within its timeout of 0\.2 s: cancelled"):
        wait.invoke(seconds=5)
    assert cancelled.is_set()
    started = time.perf_counter()
    call = invoke_tool(wait, {"seconds": 5}, ToolContext("run", "1"))
    assert time.perf_counter() - started < 2
    assert call.error is not None and "cancelled" in call.error["message"]
    assert invoke_tool(wait, {"seconds": 0}, ToolContext("run", "1")).result == {"result": True}


# --- results are still validated by the kernel ------------------------------------------------------------------


def test_a_return_value_that_is_not_what_the_annotation_says_is_a_failed_call() -> None:
    @tool
    def count(text: str) -> int:
        """Count, badly."""
        return "many"  # type: ignore[return-value]

    @tool
    def unserializable(text: str) -> dict[str, int]:
        """Return what is not JSON."""
        return {"a": object()}  # type: ignore[dict-item]

    for broken in (count, unserializable):
        arguments = {"text": "a b"}
        call = checked(broken, arguments, "1", invoke_tool(broken, arguments, ToolContext("run", "1")))
        assert call.result is None and call.error is not None, call
    call = checked(count, {"text": "a"}, "1", invoke_tool(count, {"text": "a"}, ToolContext("run", "1")))
    assert "count result invalid" in call.error["message"]  # type: ignore[index]


# --- in an engine, and from a plugin -------------------------------------------------------------------------------


def plan(tool_name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        "goal": "Count the words",
        "steps": [{"step_id": "1", "description": "Count", "tool": tool_name, "arguments": arguments}],
    }


def scripted(*responses: Any, **tool_options: dict[str, Any]) -> AeonConfig:
    config = AeonConfig(tool_options=tool_options)
    return config.with_choice("llm", "scripted", responses=list(responses))


@tool
def word_count(text: str) -> Counts:
    """Count the words and the characters in a text.

    Args:
        text: The text to count.
    """
    return {"words": len(text.split()), "characters": len(text)}


@tool(permissions={"net": "fetch pages from the web"})
def fetch_page(url: str) -> str:
    """Fetch a web page."""
    return f"<html>{url}</html>"


def test_an_engine_runs_a_plan_that_calls_a_function_tool() -> None:
    def shout(text: str) -> str:
        """Upper-case a text."""
        return text.upper()

    config = scripted(plan("word_count", {"text": "to be or not to be"}), {"answer": "6 words"})
    sink = RecordingSink()
    with Engine(config, tools=[word_count, shout, fetch_page]) as engine:
        engine.pm.register(sink, name="sink:recording")
        assert {"word_count", "shout"} <= set(engine.tools.list_all())
        assert "fetch_page" not in engine.tools  # it needs a permission nobody granted
        result = engine.run("how many words are in 'to be or not to be'?")
        assert engine.registries["tools"].providers()["word_count"] == "engine_tools"
    assert result["status"] == "completed", result
    (call,) = sink.of("aeon_tool_called")
    assert call.tool_name == "word_count" and call.result == {"words": 6, "characters": 18}
    assert result["final_state"]["plan"]["steps"][0]["result"] == {"words": 6, "characters": 18}


def test_a_tool_that_declares_permissions_is_off_until_granted() -> None:
    with Engine(scripted(), tools=[fetch_page]) as engine:
        assert "fetch_page" not in engine.tools
        (entry,) = [t for t in engine.components.tool_overview() if t["name"] == "fetch_page"]
        assert entry["why_off"] == "nothing granted: add grant = [...] to [tools.fetch_page]"
    with Engine(scripted(fetch_page={"grant": ["net"]}), tools=[fetch_page]) as engine:
        granted = engine.tools.get("fetch_page")
        assert granted is not None and granted.granted == {"net"} and fetch_page.granted == frozenset()
        assert granted.invoke(url="x") == {"result": "<html>x</html>"}
    denied = pytest.raises(ConfigError, match=r"\[tools.fetch_page\] grant names \['disk'\]")
    with Engine(scripted(fetch_page={"grant": ["disk"]}), tools=[fetch_page]) as engine, denied:
        engine.tools  # noqa: B018
    optioned = pytest.raises(ConfigError, match="unexpected keyword argument 'timeout'")
    with (
        Engine(scripted(fetch_page={"grant": ["net"], "timeout": 3}), tools=[fetch_page]) as engine,
        optioned,
    ):
        engine.tools  # noqa: B018 - a tool given as an instance takes no option but its grant


def test_a_tool_given_to_the_engine_is_called_only_when_granted() -> None:
    config = scripted(
        plan("fetch_page", {"url": "https://example.org"}), {"answer": "done"}, fetch_page={"grant": ["net"]}
    )
    sink = RecordingSink()
    with Engine(config, tools=[fetch_page]) as engine:
        engine.pm.register(sink, name="sink:recording")
        result = engine.run("fetch it")
    assert result["status"] == "completed", result
    (call,) = sink.of("aeon_tool_called")
    assert call.result == {"result": "<html>https://example.org</html>"}


class WordTools:
    """A plugin that registers a decorated function, as a plugin's entry-point module would."""

    @hookimpl
    def aeon_register_tools(self, register: Any) -> None:
        register("word_count", word_count)
        register(
            "words_shout", lambda: FunctionTool.from_function(_shout, name="words_shout")
        )  # a factory still


def _shout(text: str) -> str:
    """Upper-case a text."""
    return text.upper()


def test_a_plugin_registers_a_decorated_function_with_the_same_register_call() -> None:
    config = scripted(plan("word_count", {"text": "a b c"}), {"answer": "3"})
    with Engine(config, plugins=[WordTools()]) as engine:
        assert engine.tools.get("word_count") is word_count
        assert engine.tools.get("words_shout") is not None
        assert engine.registries["tools"].providers()["word_count"].startswith("WordTools")
        result = engine.run("count")
    assert result["status"] == "completed" and result["answer"] == {"words": 3, "characters": 5}


def test_a_tool_registered_under_another_name_is_refused() -> None:
    class Misnamed:
        @hookimpl
        def aeon_register_tools(self, register: Any) -> None:
            register("counter", word_count)

    misnamed = pytest.raises(ToolRegistrationError, match="returned 'word_count'")
    with Engine(scripted(), plugins=[Misnamed()]) as engine, misnamed:
        engine.tools  # noqa: B018


def test_the_engine_refuses_what_cannot_be_a_tool() -> None:
    with pytest.raises(ToolRegistrationError, match="has no return annotation"):
        Engine(scripted(), tools=[_no_return])


def test_a_function_tool_costs_no_asyncio_and_no_docstring_parser_until_built() -> None:
    probe = (
        "import sys\n"
        "from aeon_kernel import tool\n"
        "assert 'docstring_parser' not in sys.modules\n"
        "@tool\n"
        "def f(x: int) -> int:\n"
        "    '''Double.'''\n"
        "    return 2 * x\n"
        "assert f.invoke(x=2) == {'result': 4}\n"
        "print(sorted(m for m in ('asyncio', 'docstring_parser') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['docstring_parser']"
