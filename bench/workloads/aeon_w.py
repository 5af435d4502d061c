"""Aeon: the workloads through the public API only (Engine, orchestrator, built-in plugins).

Components are built once per Engine (one per case here, one per worker in W4); each run is a fresh
``engine.orchestrator(ttl).execute(request, ...)``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from aeon_kernel import Engine, FunctionTool, LLMAdapter, LLMResponse, Register, hookimpl
from aeon_kernel.config import AeonConfig
from aeon_plugins import (
    calculator,
    echo,
    in_memory,
    jsonl,
    plan_finished,
    schema_validator,
    sqlite_state,
    supervisor,
)

from . import common
from .common import Case

NAME = "aeon"
W2_VARIANTS = ("plain", "jsonl", "sqlite", "stream")
BUILTIN_PLUGINS = (
    echo,
    calculator,
    in_memory,
    schema_validator,
    supervisor,
    plan_finished,
    jsonl,
    sqlite_state,
)
W2_RESPONSES = [common.PLAN_TEXT, *(common.step_args_text(i) for i in range(common.PLAN_STEPS))]


def version() -> str:
    import aeon_kernel

    return aeon_kernel.__version__


class InstantLLM(LLMAdapter):
    """Returns prepared JSON texts in order, starting over at the end: reusable across runs."""

    model_id = "instant"

    def __init__(self, responses: list[str] | None = None) -> None:
        self.responses = responses or ["{}"]
        self.calls = 0

    def generate(
        self,
        prompt: str,
        system_prompt: str | None = None,
        max_tokens: int = 2048,
        temperature: float = 0.7,
        *,
        json_schema: dict[str, Any] | None = None,
    ) -> LLMResponse:
        text = self.responses[self.calls % len(self.responses)]
        self.calls += 1
        return {"text": text, "model": self.model_id}


def add_one_tool() -> FunctionTool:
    schema = {
        "type": "object",
        "properties": {"value": {"type": "integer"}},
        "required": ["value"],
        "additionalProperties": False,
    }
    return FunctionTool(
        name=common.TOOL_NAME,
        description="Add one to a number.",
        input_schema=schema,
        output_schema=schema,
        function=common.tool_from_kwargs,
    )


class BenchPlugin:
    """Registers the instant model and the trivial tool, as any third-party plugin would."""

    def __init__(self, responses: list[str] | None) -> None:
        self.responses = responses

    @hookimpl
    def aeon_register_llm_adapters(self, register: Register) -> None:
        register("instant", lambda: InstantLLM(self.responses))

    @hookimpl
    def aeon_register_tools(self, register: Register) -> None:
        register(common.TOOL_NAME, add_one_tool)


def build_engine(
    responses: list[str] | None = None, state_db: Path | None = None, *, keep_runs: bool = False
) -> Engine:
    config = (
        AeonConfig().with_choice("llm", "instant").with_choice("memory", "in_memory", keep_runs=keep_runs)
    )
    if state_db is not None:
        config = config.with_choice("state", "sqlite", path=str(state_db))
    engine = Engine(config, plugins=[*BUILTIN_PLUGINS, BenchPlugin(responses)], autoload=False)
    engine.orchestrator(1)  # build every component now, not in the first timed run
    return engine


def _results(result: dict[str, Any]) -> list[int]:
    assert result["status"] == "completed", result["message"]
    return [step["result"]["value"] for step in result["plan"]["steps"]]


# --- W1: a plan of N deterministic tool steps -------------------------------------------------------------------


def w1(n: int) -> Case:
    engine = build_engine()
    plan_text = common.w1_plan(n)

    def run() -> dict[str, Any]:
        return engine.orchestrator(n + 1).execute("run the plan", initial_plan=json.loads(plan_text))

    def check(result: dict[str, Any]) -> None:
        assert sum(_results(result)) == common.w1_expected_total(n)

    return Case(run=run, units=n, check=check, close=engine.close)


# --- W2: the model plans 10 steps; each step is a thought (instant call) then the tool ---------------------------


def w2_engine(variant: str, tmp: Path) -> tuple[Engine, Any]:
    """The engine for a W2 variant, and what it writes (a path to measure), or None."""
    if variant == "sqlite":
        db = tmp / "aeon-state.db"
        return build_engine(W2_RESPONSES, state_db=db), db
    engine = build_engine(W2_RESPONSES)
    if variant == "jsonl":
        log = tmp / "aeon-log.jsonl"
        engine.add_sink("jsonl", path=str(log))
        return engine, log
    return engine, None


def w2_run(engine: Engine) -> list[int]:
    return _results(engine.orchestrator(2 * common.PLAN_STEPS).execute(common.REQUEST))


def w2_stream(engine: Engine) -> list[int]:
    """The same run as ``engine.stream``: every event read as it comes (issue 28: at most 10 % over plain)."""
    stream = engine.stream(common.REQUEST, 2 * common.PLAN_STEPS)
    for _event in stream:
        pass
    assert stream.result is not None
    return _results(stream.result)


def w2(variant: str, tmp: Path) -> Case:
    engine, written = w2_engine(variant, tmp)

    def check(results: list[int]) -> None:
        assert results == common.W2_EXPECTED, results

    if variant == "stream":
        return Case(run=lambda: w2_stream(engine), units=common.PLAN_STEPS, check=check, close=engine.close)

    return Case(
        run=lambda: w2_run(engine),
        units=common.PLAN_STEPS,
        check=check,
        close=engine.close,
        bytes_written=(lambda: common.file_bytes(written)) if written is not None else None,
    )


# --- W3 and W4 ------------------------------------------------------------------------------------------------------

#: ``import aeon_kernel`` alone is lazy and says little; the second line is what an embedder really writes.
USER_IMPORT = (
    "from aeon_kernel import Engine, FunctionTool, hookimpl; from aeon_kernel.config import AeonConfig"
)
IMPORTS = {
    "import aeon_kernel": "import aeon_kernel",
    "user import": USER_IMPORT,
    "user import, no tool": "from aeon_kernel import Engine, hookimpl; from aeon_kernel.config import AeonConfig",
    # The floor of any import that defines a tool, since a Tool is a pydantic model: pydantic and one model.
    "one pydantic model": "from pydantic import BaseModel\nclass M(BaseModel):\n    x: int",
}


def _aeon() -> list[str]:
    """The installed ``aeon`` console script, or ``python -m aeon_cli`` where there is none."""
    script = Path(sys.executable).with_name("aeon")
    return [str(script)] if script.exists() else [sys.executable, "-m", "aeon_cli"]


COMMANDS = {"aeon --help": [*_aeon(), "--help"]}

_worker_engine: Engine | None = None


def w4_init() -> None:
    """Process-pool initializer: ONE Engine per worker, reused by every run the worker does."""
    global _worker_engine
    _worker_engine = build_engine(W2_RESPONSES)


def w4_run() -> list[int]:
    assert _worker_engine is not None
    return w2_run(_worker_engine)
