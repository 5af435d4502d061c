"""`aeon stats`: per cycle, per tool and per run — model, tool and kernel time, tokens — from the records a run
writes (the state store, or a JSONL log)."""

from __future__ import annotations

import importlib
import json
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from aeon_cli.main import cli
from aeon_cli.stats import run_stats
from aeon_kernel import Engine, FunctionTool, LLMAdapter, LLMResponse, hookimpl
from aeon_kernel.config import AeonConfig
from aeon_kernel.testing.pytest_plugin import BUILTIN_PLUGINS
from tests.support.builders import answer, llm_step, plan, tool_step

MODEL_DELAY, TOOL_DELAY = 0.06, 0.04


class SlowModel(LLMAdapter):
    """Plans one slow tool step, then answers; each call takes MODEL_DELAY and reports its tokens."""

    model_id = "slow"

    def __init__(self) -> None:
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
        time.sleep(MODEL_DELAY)
        self.calls += 1
        text = (
            json.dumps(plan(tool_step("1", "nap", {}), llm_step("2")))
            if self.calls == 1
            else answer("rested")
        )
        return {"text": text, "usage": {"prompt_tokens": 100, "completion_tokens": 10 * self.calls}}


def nap() -> dict[str, Any]:
    time.sleep(TOOL_DELAY)
    return {"slept": True}


class SlowPlugin:
    @hookimpl
    def aeon_register_llm_adapters(self, register: Any) -> None:
        register("slow", SlowModel)

    @hookimpl
    def aeon_register_tools(self, register: Any) -> None:
        register(
            "nap",
            lambda: FunctionTool(
                name="nap",
                description="Rest a moment.",
                function=nap,
                input_schema={"type": "object", "properties": {}},
                output_schema={"type": "object"},
            ),
        )


def slow_run(tmp_path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    builtins = [importlib.import_module(name) for name in BUILTIN_PLUGINS]
    config = AeonConfig().with_choice("llm", "slow")
    log = tmp_path / "run.jsonl"
    with Engine(config, plugins=[*builtins, SlowPlugin()], autoload=False) as engine:
        engine.add_sink("jsonl", path=str(log))
        result = engine.run("rest, then say so")
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    return result, [line for line in lines if "step_number" in line]


def test_model_tool_and_kernel_time_add_up_to_each_cycle(tmp_path: Path) -> None:
    result, entries = slow_run(tmp_path)
    assert result["status"] == "completed"
    figures = run_stats(entries)
    plan_cycle, tool_cycle, answer_cycle = figures["cycles"]
    assert plan_cycle["model_ms"] >= MODEL_DELAY * 1000 and plan_cycle["llm_calls"] == 1
    assert tool_cycle["tool_ms"] >= TOOL_DELAY * 1000 and tool_cycle["model_ms"] == 0
    assert answer_cycle["model_ms"] >= MODEL_DELAY * 1000
    for cycle in figures["cycles"]:
        parts = cycle["model_ms"] + cycle["tool_ms"] + cycle["kernel_ms"]
        assert parts == pytest.approx(cycle["duration_ms"], abs=1.0)  # llm_ms is rounded to whole ms
    run = figures["run"]
    assert run["cycles"] == 3 and run["llm_calls"] == 2 and run["tool_calls"] == 1
    assert (run["prompt_tokens"], run["completion_tokens"]) == (200, 30)
    assert figures["tools"] == [
        {
            "tool": "nap",
            "calls": 1,
            "failures": 0,
            "total_ms": tool_cycle["tool_ms"],
            "max_ms": tool_cycle["tool_ms"],
            "mean_ms": tool_cycle["tool_ms"],
        }
    ]


def test_each_model_call_records_its_duration(tmp_path: Path) -> None:
    result, _ = slow_run(tmp_path)
    durations = [call["duration_ms"] for call in result["final_state"]["llm_outputs"]]
    assert len(durations) == 2 and all(d >= MODEL_DELAY * 1000 for d in durations)


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    sums = plan(tool_step("1", "calculator", {"expression": "5 + 10"}), llm_step("2"))
    (tmp_path / "responses.json").write_text(json.dumps([sums, answer("The sum is 15")]))
    (tmp_path / "aeon.toml").write_text('[llm]\nuse = "scripted"\nresponses = "responses.json"\n')
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("AEON_CONFIG", raising=False)
    return tmp_path


def test_stats_of_a_cli_run_from_the_default_store_and_from_its_log(project: Path) -> None:
    runner = CliRunner()
    done = runner.invoke(cli, ["run", "calculate the sum of 5 and 10", "--json", "--log", "run.jsonl"])
    assert done.exit_code == 0, done.output
    run_id = json.loads(done.stdout)["run_id"]
    stored = runner.invoke(cli, ["stats", run_id, "--json"])
    logged = runner.invoke(cli, ["stats", run_id, "--log", "run.jsonl", "--json"])
    assert stored.exit_code == 0 and logged.exit_code == 0, stored.output + logged.output
    from_store, from_log = json.loads(stored.stdout), json.loads(logged.stdout)
    assert from_store == from_log  # the same cycle records, whichever way they are read
    assert [c["phase"] for c in from_store["cycles"]] == ["plan", "step", "step"]
    assert from_store["tools"][0]["tool"] == "calculator" and from_store["run"]["llm_calls"] == 2
    table = runner.invoke(cli, ["stats", run_id]).stdout
    assert f"run {run_id}: 3 cycles" in table and "calculator" in table and "kernel" in table


def test_stats_errors_say_what_is_wrong(project: Path) -> None:
    runner = CliRunner()
    missing = runner.invoke(cli, ["stats", "no-such-run"])
    assert missing.exit_code == 2 and "no-such-run" in missing.stderr and "Traceback" not in missing.output
    (project / "other.jsonl").write_text('{"manifest": {}}\n')
    empty = runner.invoke(cli, ["stats", "r1", "--log", "other.jsonl"])
    assert empty.exit_code == 2 and "holds no cycle of run 'r1'" in empty.stderr
    (project / "bad.jsonl").write_text("not json\n")
    bad = runner.invoke(cli, ["stats", "r1", "--log", "bad.jsonl"])
    assert bad.exit_code == 2 and "line 1: not JSON" in bad.stderr


def test_the_model_speeds_are_shown_where_the_model_measured_them() -> None:
    """Issue 31: prompt evaluation and decoding in tokens per second (llama_cpp's usage), and how many prompt
    tokens the KV cache saved; none for a model that does not time itself."""
    from aeon_cli.stats import render

    timed = {"prompt_tokens": 300, "completion_tokens": 40, "prompt_eval_tokens": 100, "prompt_eval_ms": 200}
    entries = [
        {"step_number": 1, "phase": "plan", "duration_ms": 900.0, "usage": {**timed, "decode_ms": 500}},
        {
            "step_number": 2,
            "phase": "step",
            "duration_ms": 100.0,
            "usage": {"prompt_tokens": 5, "decode_ms": 0},
        },
    ]
    run = run_stats(entries)["run"]
    assert (run["prompt_tokens_per_s"], run["decode_tokens_per_s"]) == (500.0, 80.0)
    assert (
        "model: prompt 500 tokens/s (100 evaluated, 205 from the KV cache, 200.0ms); decoding 80.0 tokens/s"
        in (render("r", run_stats(entries)))
    )
    assert "decoding 80.0 tokens/s (40 tokens, 500.0ms)" in render("r", run_stats(entries))
    entries[0]["usage"]["drafted_tokens"] = 25  # guessed by draft lookups, checked in batches
    assert "decoding 80.0 tokens/s (40 tokens, 25 of them drafted, 500.0ms)" in render(
        "r", run_stats(entries)
    )
    untimed = run_stats([entries[1]])
    assert untimed["run"]["decode_tokens_per_s"] is None and "tokens/s" not in render("r", untimed)


def test_a_flow_runs_stats_show_each_stage_and_task_profile(tmp_path: Path) -> None:
    """Spec 004 §10.4: per stage its time, CPU time, peak RSS, context size and queue wait; per task the sums."""
    import yaml

    flow = {
        "name": "profiled",
        "profile": True,
        "nodes": [
            {"id": "in", "role": "start"},
            {"id": "fork", "role": "split"},
            {"id": "a", "role": "linear"},
            {"id": "b", "role": "linear", "context": "global"},
            {"id": "join", "role": "merge", "impl": "collect"},
            {"id": "out", "role": "exit"},
        ],
        "edges": [
            ["in", "fork"],
            ["fork", "a"],
            ["fork", "b"],
            ["a", "join"],
            ["b", "join"],
            ["join", "out"],
        ],
    }
    (tmp_path / "flow").mkdir()
    (tmp_path / "flow" / "flow.yaml").write_text(yaml.safe_dump(flow, sort_keys=False))
    log = tmp_path / "flow.jsonl"
    with Engine.from_config_dir(tmp_path / "flow", AeonConfig().with_choice("memory", "in_memory")) as engine:
        engine.engine.add_sink("jsonl", path=str(log))
        result = engine.run({"x": 1})
    assert result.status == "success"
    entries = [json.loads(line) for line in log.read_text().splitlines()[1:]]
    stats = run_stats(entries)
    stages = {f"{s['task']}/{s['node']}": s for s in stats["stages"]}
    assert list(stages) == ["t1/in", "t1/fork", "t1.1/a", "t1.2/b", "t1/join", "t1/out"]
    assert all(
        s["rss_peak_kb"] > 0 and s["queued_ms"] is not None and s["queued_ms"] >= 0 for s in stages.values()
    )
    assert (
        stages["t1.2/b"]["context_chars"] > 0 and stages["t1.1/a"]["context_chars"] == 0
    )  # b reads the layers
    assert {t["task"]: t["stages"] for t in stats["tasks"]} == {"t1": 4, "t1.1": 1, "t1.2": 1}
    shown = CliRunner().invoke(cli, ["stats", result.run_id, "--log", str(log)])
    assert shown.exit_code == 0, shown.output
    assert "task/node" in shown.output and "t1.2/b" in shown.output and "peak rss" in shown.output
