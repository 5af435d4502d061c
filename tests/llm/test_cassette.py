"""Recorded replays: record any adapter to a cassette, replay without a model, fail loudly on a miss."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from aeon_cli.main import cli
from aeon_kernel import ConfigError, Engine
from aeon_kernel.config import AeonConfig
from aeon_kernel.llm.cassette import CassetteMissError, RecordingAdapter, ReplayAdapter
from aeon_plugins.scripted import ScriptedLLM
from tests.support.builders import answer, llm_step, plan, tool_step

SUM = plan(tool_step("1", "calculator", {"expression": "5 + 10"}), llm_step("2"))
SCHEMA = {"type": "object"}


def test_record_then_replay_serves_the_same_responses_in_order(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    recorder = RecordingAdapter(ScriptedLLM(["one", "two", "three"]), path)
    assert [recorder.generate("same")["text"], recorder.generate("same")["text"]] == ["one", "two"]
    assert recorder.generate("other", "sys", 10, 0.0, json_schema=SCHEMA)["text"] == "three"
    header, *records = [json.loads(line) for line in path.read_text().splitlines()]
    assert header == {"aeon_cassette": 1, "model": "scripted", "supports_json_schema": False}
    assert records[2]["request"]["json_schema"] == SCHEMA and records[2]["request"]["max_tokens"] == 10

    replay = ReplayAdapter(path)
    assert [replay.generate("same")["text"] for _ in range(3)] == ["one", "two", "two"]  # last one again
    assert replay.generate("other", "sys", 10, 0.0, json_schema=SCHEMA)["text"] == "three"


def test_a_miss_fails_loudly_naming_the_nearest_request(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    RecordingAdapter(ScriptedLLM(["x"]), path).generate("Request: add 5 and 10\nPlan:", temperature=0.2)
    replay = ReplayAdapter(path)
    with pytest.raises(CassetteMissError) as info:
        replay.generate("Request: add 5 and 11\nPlan:", temperature=0.2)
    message = str(info.value)
    assert (
        "['prompt']" in message
        and "-Request: add 5 and 10" in message
        and "+Request: add 5 and 11" in message
    )
    with pytest.raises(CassetteMissError, match=r"\['temperature'\]"):
        replay.generate("Request: add 5 and 10\nPlan:", temperature=0.9)


def test_bad_cassettes_are_config_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        ReplayAdapter(tmp_path / "missing.jsonl")
    (tmp_path / "bad.jsonl").write_text('{"hello": 1}\n')
    with pytest.raises(ConfigError, match="not an Aeon cassette"):
        ReplayAdapter(tmp_path / "bad.jsonl")
    path = tmp_path / "c.jsonl"
    RecordingAdapter(ScriptedLLM(["x"]), path).generate("p")
    with path.open("a") as file:
        file.write("{broken\n")
    with pytest.raises(ConfigError, match="line 3"):
        ReplayAdapter(path)


def test_recording_into_a_cassette_of_another_model_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    path.write_text(json.dumps({"aeon_cassette": 1, "model": "gemma", "supports_json_schema": True}) + "\n")
    with pytest.raises(ConfigError, match="recorded with model 'gemma'"):
        RecordingAdapter(ScriptedLLM([]), path)


def test_a_whole_run_replays_without_building_the_model(tmp_path: Path) -> None:
    cassette = tmp_path / "run.jsonl"
    config = AeonConfig().with_choice("llm", "scripted", responses=[SUM, answer("15")])
    with Engine(config, record=cassette) as engine:
        recorded = engine.run("calculate the sum of 5 and 10")
    # The configured model does not even exist now: replay never builds it.
    with Engine(AeonConfig().with_choice("llm", "no_such_model"), replay=cassette) as engine:
        engine.check_choices()
        replayed = engine.run("calculate the sum of 5 and 10")
    assert replayed["answer"] == recorded["answer"] == "15"
    assert replayed["plan"] == recorded["plan"]


def test_cli_record_and_replay(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "r.json").write_text(json.dumps([SUM, answer("15")]))
    (tmp_path / "aeon.toml").write_text('[llm]\nuse = "scripted"\nresponses = "r.json"\n')
    runner = CliRunner()
    first = runner.invoke(cli, ["run", "add 5 and 10", "--json", "--record", "c.jsonl"])
    assert first.exit_code == 0, first.output
    (tmp_path / "r.json").write_text("[]")  # the scripted model has nothing left to say
    second = runner.invoke(cli, ["run", "add 5 and 10", "--json", "--replay", "c.jsonl"])
    assert second.exit_code == 0 and json.loads(second.stdout)["answer"] == "15"
    miss = runner.invoke(cli, ["run", "something else", "--json", "--replay", "c.jsonl"])
    assert miss.exit_code == 1 and "no recording of this request" in json.loads(miss.stdout)["message"]
