"""The ``scripted`` LLM adapter: replays a JSON file of responses in order and records every prompt."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from aeon_kernel import ConfigError, LLMAdapter, LLMError
from aeon_plugins.scripted import ScriptedLLM, aeon_register_llm_adapters, load_script


def script_file(tmp_path: Path, content: Any, name: str = "responses.json") -> Path:
    path = tmp_path / name
    path.write_text(content if isinstance(content, str) else json.dumps(content), encoding="utf-8")
    return path


def test_replays_responses_in_order_then_raises(tmp_path: Path) -> None:
    llm = ScriptedLLM(responses=str(script_file(tmp_path, ["first", "second"])))
    assert llm.generate("p1") == {"text": "first", "model": "scripted", "usage": {}}
    assert llm.generate("p2")["text"] == "second"
    with pytest.raises(LLMError, match="no response left: all 2 were used"):
        llm.generate("p3")
    assert [p["prompt"] for p in llm.prompts] == ["p1", "p2", "p3"]  # the failed call is recorded too


def test_records_prompts_system_prompts_and_schemas(tmp_path: Path) -> None:
    schema = {"type": "object"}
    llm = ScriptedLLM(responses=script_file(tmp_path, ["a", "b"]))
    llm.generate("plan this", "you plan", 100, 0.0, json_schema=schema)
    llm.generate("answer")
    assert llm.prompts == [
        {"prompt": "plan this", "system_prompt": "you plan", "json_schema": schema},
        {"prompt": "answer", "system_prompt": None, "json_schema": None},
    ]


def test_non_string_items_are_sent_as_json_text(tmp_path: Path) -> None:
    items = [{"goal": "g", "steps": [{"step_id": "1"}]}, [1, 2], 5, None, True, "plain", "日本"]
    llm = ScriptedLLM(responses=script_file(tmp_path, items))
    texts = [llm.generate(f"p{i}")["text"] for i in range(len(items))]
    assert texts[5:] == ["plain", "日本"]  # strings are sent as they are, not JSON-quoted
    assert [json.loads(text) for text in texts[:5]] == items[:5]
    assert all(isinstance(text, str) for text in texts)


def test_a_list_in_code_works_too() -> None:
    llm = ScriptedLLM(responses=["x", {"answer": "y"}])
    assert llm.generate("p")["text"] == "x"
    assert json.loads(llm.generate("p")["text"]) == {"answer": "y"}


def test_an_empty_script_raises_on_the_first_call(tmp_path: Path) -> None:
    llm = ScriptedLLM(responses=script_file(tmp_path, []))
    with pytest.raises(LLMError):
        llm.generate("p")


def test_the_script_is_read_once(tmp_path: Path) -> None:
    path = script_file(tmp_path, ["original"])
    llm = ScriptedLLM(responses=path)
    path.write_text('["changed"]', encoding="utf-8")
    assert llm.generate("p")["text"] == "original"


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "nowhere" / "responses.json"
    with pytest.raises(ConfigError, match="does not exist") as info:
        ScriptedLLM(responses=str(path))
    assert str(path) in str(info.value)


@pytest.mark.parametrize("content", ["", "[1, 2", "not json", "['single quotes']", "[1,]"])
def test_bad_json(tmp_path: Path, content: str) -> None:
    path = script_file(tmp_path, content)
    with pytest.raises(ConfigError, match="as JSON") as info:
        ScriptedLLM(responses=path)
    assert str(path) in str(info.value)


def test_undecodable_file(tmp_path: Path) -> None:
    path = tmp_path / "responses.json"
    path.write_bytes(b'["\xff\xfe"]')
    with pytest.raises(ConfigError) as info:
        ScriptedLLM(responses=path)
    assert str(path) in str(info.value)


def test_a_directory_is_not_a_script(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        ScriptedLLM(responses=tmp_path)
    assert str(tmp_path) in str(info.value)


@pytest.mark.parametrize("content", [{"responses": ["a"]}, "a string", 5, None])
def test_not_a_list(tmp_path: Path, content: Any) -> None:
    path = script_file(tmp_path, json.dumps(content))
    with pytest.raises(ConfigError, match="JSON array") as info:
        ScriptedLLM(responses=path)
    assert str(path) in str(info.value)


def test_not_a_list_in_code() -> None:
    with pytest.raises(ConfigError, match="JSON array"):
        load_script({"a": 1})  # type: ignore[arg-type]


def test_responses_are_required() -> None:
    with pytest.raises(ConfigError, match="responses"):
        ScriptedLLM()


def test_registered_as_an_llm_adapter(tmp_path: Path) -> None:
    registered: list[tuple[str, Any]] = []
    aeon_register_llm_adapters(lambda name, factory: registered.append((name, factory)))
    assert [name for name, _ in registered] == ["scripted"]
    llm = registered[0][1](responses=str(script_file(tmp_path, ["ok"])))
    assert isinstance(llm, LLMAdapter)
    assert llm.model_id == "scripted"
    assert llm.supports_streaming() is True  # word by word (issue 28)
    assert llm.generate("p")["text"] == "ok"
