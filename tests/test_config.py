"""``aeon.toml``: lookup order, errors as ConfigError, secrets that never leak, a stable fingerprint."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

from aeon_kernel import ConfigError
from aeon_kernel.config import CONFIG_ENV, DEFAULT_FILE, ROLES, AeonConfig, Choice, load_config, parse_config

SECRET = "sk-very-secret-value-1234"


@pytest.fixture(autouse=True)
def clean_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test starts in an empty directory with no $AEON_CONFIG."""
    monkeypatch.delenv(CONFIG_ENV, raising=False)
    monkeypatch.chdir(tmp_path)


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def ttl_file(path: Path, ttl: int) -> Path:
    return write(path, f"[run]\nttl = {ttl}\n")


# --- lookup order ---


def test_defaults_when_nothing_is_configured() -> None:
    config = load_config()
    assert config == AeonConfig()
    assert config.source is None
    assert config.ttl == 50
    assert {role: config.choice(role).use for role in ROLES} == {
        "llm": "llama_cpp",
        "memory": "in_memory",
        "validator": "schema",
        "supervisor": "default",
        "convergence": "plan_finished",
        "planner": "model",
        "scheduler": "linear",
        "depth": "model",
        "semantic_validator": "model",
        "executor": "local",
    }
    assert config.telemetry == ()
    assert config.tools_enabled is None


def test_local_file_in_the_working_directory(tmp_path: Path) -> None:
    ttl_file(tmp_path / DEFAULT_FILE, 3)
    config = load_config()
    assert config.ttl == 3
    assert config.source == Path(DEFAULT_FILE)


def test_env_var_beats_the_local_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ttl_file(tmp_path / DEFAULT_FILE, 3)
    from_env = ttl_file(tmp_path / "elsewhere" / "env.toml", 4)
    monkeypatch.setenv(CONFIG_ENV, str(from_env))
    config = load_config()
    assert config.ttl == 4
    assert config.source == from_env


def test_explicit_path_beats_everything(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ttl_file(tmp_path / DEFAULT_FILE, 3)
    monkeypatch.setenv(CONFIG_ENV, str(ttl_file(tmp_path / "env.toml", 4)))
    explicit = ttl_file(tmp_path / "explicit.toml", 5)
    assert load_config(explicit).ttl == 5
    assert load_config(str(explicit)).ttl == 5


def test_an_empty_env_var_is_ignored(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CONFIG_ENV, "")
    ttl_file(tmp_path / DEFAULT_FILE, 6)
    assert load_config().ttl == 6


def test_missing_explicit_file(tmp_path: Path) -> None:
    ttl_file(tmp_path / DEFAULT_FILE, 3)  # never silently falls back to the local file
    with pytest.raises(ConfigError, match="does not exist") as info:
        load_config(tmp_path / "missing.toml")
    assert "missing.toml" in str(info.value)


def test_env_var_pointing_nowhere(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CONFIG_ENV, "/nonexistent/aeon.toml")
    with pytest.raises(ConfigError, match=CONFIG_ENV) as info:
        load_config()
    assert "/nonexistent/aeon.toml" in str(info.value)


# --- file errors ---


@pytest.mark.parametrize("text", ["[run\nttl = 1", "ttl = ", "[run]\nttl = 1\nttl = 2\n", "= 5"])
def test_bad_toml_names_the_file(tmp_path: Path, text: str) -> None:
    path = write(tmp_path / "broken.toml", text)
    with pytest.raises(ConfigError, match="not valid TOML") as info:
        load_config(path)
    assert "broken.toml" in str(info.value)


def test_undecodable_file_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "latin1.toml"
    path.write_bytes(b'[llm]\nuse = "caf\xe9"\n')
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert "latin1.toml" in str(info.value)


def test_empty_file_means_defaults(tmp_path: Path) -> None:
    path = write(tmp_path / "empty.toml", "")
    config = load_config(path)
    assert config.ttl == 50
    assert config.source == path


# --- sections ---


def test_unknown_sections(tmp_path: Path) -> None:
    path = write(tmp_path / "a.toml", "[llm]\nuse = 'scripted'\n[lmm]\nuse = 'x'\n[extra]\n")
    with pytest.raises(ConfigError, match="unknown section") as info:
        load_config(path)
    assert "'extra'" in str(info.value) and "'lmm'" in str(info.value)
    assert "a.toml" in str(info.value)


@pytest.mark.parametrize("ttl", [0, -1, "5", 1.5, True, [5]])
def test_bad_ttl(ttl: Any) -> None:
    with pytest.raises(ConfigError, match="ttl must be a positive integer"):
        parse_config({"run": {"ttl": ttl}})


def test_run_options() -> None:
    config = parse_config({"run": {"ttl": 1, "max_tokens": 64, "temperature": 0}})
    assert (config.ttl, config.max_tokens, config.temperature) == (1, 64, 0.0)


def test_unknown_run_key() -> None:
    with pytest.raises(ConfigError, match="ttll"):
        parse_config({"run": {"ttll": 5}})


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("max_tokens", "abc"),
        ("max_tokens", 0),
        ("max_tokens", True),
        ("max_tokens", 1.5),
        ("temperature", "hot"),
        ("temperature", [1]),
        ("temperature", -0.5),
        ("temperature", True),
    ],
)
def test_bad_run_values_are_config_errors(key: str, value: Any) -> None:
    with pytest.raises(ConfigError, match=key):
        parse_config({"run": {key: value}})


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("[run]\ntemperature = nan\n", "run.temperature = nan"),
        ("[run]\ntemperature = inf\n", "run.temperature = inf"),
        ('[llm]\nuse = "openai"\ntimeout = -inf\n', "llm.timeout = -inf"),
        ('[memory]\nuse = "in_memory"\n[memory.deep]\nlimits = [1.0, nan]\n', "memory.deep.limits[1] = nan"),
        ("[tools.calculator]\nprecision = +inf\n", "tools.calculator.precision = inf"),
    ],
)
def test_non_finite_numbers_are_config_errors(tmp_path: Path, text: str, where: str) -> None:
    """TOML has nan and inf; JSON (a request body, the log) has neither, and no option means them."""
    path = write(tmp_path / "nan.toml", text)
    with pytest.raises(ConfigError, match=re.escape(f"{path}: {where} is not a finite number")):
        load_config(path)


def test_a_non_finite_temperature_given_in_code_is_refused() -> None:
    for value in (float("nan"), float("inf")):
        with pytest.raises(ConfigError, match="temperature"):
            parse_config({"run": {"temperature": value}})


@pytest.mark.parametrize("section", ["run", "llm", "telemetry", "tools", "plugins"])
def test_sections_must_be_tables(section: str) -> None:
    with pytest.raises(ConfigError, match=rf"\[{section}\] must be a table"):
        parse_config({section: 5})


@pytest.mark.parametrize("use", ["", 5, ["scripted"], True])
def test_role_use_must_be_a_name(use: Any) -> None:
    with pytest.raises(ConfigError, match=r"\[llm\] use must be a component name"):
        parse_config({"llm": {"use": use}})


def test_scripted_llm_with_options(tmp_path: Path) -> None:
    path = write(tmp_path / DEFAULT_FILE, '[llm]\nuse = "scripted"\nresponses = "responses.json"\n')
    config = load_config()
    assert config.source == Path(DEFAULT_FILE)
    assert path.exists()
    assert config.choice("llm") == Choice("scripted", {"responses": "responses.json"})
    assert config.choice("memory") == Choice("in_memory", {})


def test_telemetry_sinks_with_options(tmp_path: Path) -> None:
    text = '[telemetry]\nuse = ["jsonl"]\n[telemetry.jsonl]\npath = "logs/run.jsonl"\n'
    config = load_config(write(tmp_path / "t.toml", text))
    assert config.telemetry == (Choice("jsonl", {"path": "logs/run.jsonl"}),)


def test_telemetry_accepts_a_single_name_and_sinks_without_options() -> None:
    assert parse_config({"telemetry": {"use": "jsonl"}}).telemetry == (Choice("jsonl", {}),)
    assert parse_config({"telemetry": {"use": ["a", "b"]}}).telemetry == (Choice("a", {}), Choice("b", {}))


@pytest.mark.parametrize("use", [5, [1], {"a": 1}, [["jsonl"]]])
def test_bad_telemetry_use(use: Any) -> None:
    with pytest.raises(ConfigError, match=r"\[telemetry\] use must be a list"):
        parse_config({"telemetry": {"use": use}})


def test_telemetry_sink_options_must_be_a_table() -> None:
    with pytest.raises(ConfigError, match=r"\[telemetry.jsonl\] must be a table"):
        parse_config({"telemetry": {"use": ["jsonl"], "jsonl": "run.jsonl"}})


def test_tools_enabled_and_options(tmp_path: Path) -> None:
    text = '[tools]\nenabled = ["calculator", "echo"]\n[tools.calculator]\nprecision = 3\n'
    config = load_config(write(tmp_path / "t.toml", text))
    assert config.tools_enabled == ("calculator", "echo")
    assert config.tool_options == {"calculator": {"precision": 3}}


@pytest.mark.parametrize(
    ("tools", "complaint"),
    [
        ({"calcualtor": {"precision": 3}}, "which no loaded plugin registers"),
        ({"enabled": ["echo"], "calculator": {"precision": 3}}, r"which is not in \[tools\] enabled"),
    ],
    ids=["misspelt-tool", "tool-not-enabled"],
)
def test_options_for_a_tool_that_is_not_built_are_a_config_error(
    tools: dict[str, Any], complaint: str
) -> None:
    """They were silently ignored: a misspelt [tools.<name>] table never reached any tool."""
    from aeon_kernel.engine import Engine

    with Engine(parse_config({"tools": tools})) as engine, pytest.raises(ConfigError, match=complaint):
        _ = engine.tools
    with Engine(parse_config({"tools": tools})) as engine:  # aeon plugins --check lists it; aeon run stops
        problems = [p for p in engine.check_components() if p["kind"] == "tools"]
        assert len(problems) == 1 and re.search(complaint, problems[0]["error"]), problems
        with pytest.raises(ConfigError, match=complaint):
            engine.build_selected()


def test_tools_enabled_may_be_empty() -> None:
    assert parse_config({"tools": {"enabled": []}}).tools_enabled == ()


@pytest.mark.parametrize("enabled", ["calculator", 5, [1], [None]])
def test_bad_tools_enabled(enabled: Any) -> None:
    with pytest.raises(ConfigError, match=r"\[tools\] enabled must be a list"):
        parse_config({"tools": {"enabled": enabled}})


def test_tool_options_must_be_tables() -> None:
    with pytest.raises(ConfigError, match=r"\[tools.calculator\] must be a table"):
        parse_config({"tools": {"calculator": 5}})


def test_plugins_allow_and_block() -> None:
    config = parse_config({"plugins": {"allow": ["a"], "block": ["b", "c"]}})
    assert (config.allow, config.block) == (("a",), ("b", "c"))
    assert parse_config({}).allow is None


@pytest.mark.parametrize(("key", "value"), [("allow", "a"), ("block", "b"), ("block", [1]), ("allow", 5)])
def test_bad_plugin_lists(key: str, value: Any) -> None:
    with pytest.raises(ConfigError, match=rf"\[plugins\] {key} must be a list"):
        parse_config({"plugins": {key: value}})


def test_unknown_plugin_keys_are_refused() -> None:
    # A typo here would otherwise silently leave a plugin unblocked.
    with pytest.raises(ConfigError, match="blok"):
        parse_config({"plugins": {"blok": ["some-plugin"]}})


def test_the_documented_example_parses(tmp_path: Path) -> None:
    text = """
[run]
ttl = 50

[llm]
use = "scripted"
responses = "responses.json"

[memory]
use = "in_memory"

[telemetry]
use = ["jsonl"]
[telemetry.jsonl]
path = "run.jsonl"

[tools]
enabled = ["calculator", "echo"]

[plugins]
block = ["some-plugin"]
"""
    config = load_config(write(tmp_path / "example.toml", text))
    assert config.choice("llm").use == "scripted"
    assert config.telemetry == (Choice("jsonl", {"path": "run.jsonl"}),)
    assert config.block == ("some-plugin",)


def test_with_choice_returns_a_copy() -> None:
    config = AeonConfig()
    changed = config.with_choice("llm", "scripted", responses="r.json")
    assert changed.choice("llm") == Choice("scripted", {"responses": "r.json"})
    assert config.choice("llm").use == "llama_cpp"


# --- secrets ---

SECRET_TOML = """
[llm]
use = "openai"
model = "gpt"
api_key = { "$env" = "AEON_TEST_API_KEY" }
"""


def test_env_secret_resolves_to_a_masked_secretstr(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AEON_TEST_API_KEY", SECRET)
    config = load_config(write(tmp_path / "s.toml", SECRET_TOML))
    assert config.choice("llm").options["api_key"] == {"$env": "AEON_TEST_API_KEY"}  # unresolved until built
    options = config.choice("llm").resolved_options()
    key = options["api_key"]
    assert isinstance(key, SecretStr)
    assert key.get_secret_value() == SECRET
    assert SECRET not in str(key) and SECRET not in repr(key) and SECRET not in str(options)
    assert str(key) == "**********"
    assert options["model"] == "gpt"
    assert SECRET not in repr(config)


def test_file_secret_is_read_and_stripped(tmp_path: Path) -> None:
    secret_file = write(tmp_path / "secrets" / "key.txt", f"  {SECRET}\n")
    choice = Choice("openai", {"api_key": {"$file": str(secret_file)}})
    key = choice.resolved_options()["api_key"]
    assert isinstance(key, SecretStr)
    assert key.get_secret_value() == SECRET
    assert SECRET not in str(key)


def test_secrets_are_resolved_at_any_depth(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AEON_TEST_API_KEY", SECRET)
    options = {
        "headers": {"Authorization": {"$env": "AEON_TEST_API_KEY"}, "plain": "x"},
        "keys": [{"$env": "AEON_TEST_API_KEY"}, "literal"],
        "not_a_reference": {"$env": "AEON_TEST_API_KEY", "other": 1},
    }
    resolved = Choice("openai", options).resolved_options()
    assert resolved["headers"]["Authorization"].get_secret_value() == SECRET
    assert resolved["headers"]["plain"] == "x"
    assert resolved["keys"][0].get_secret_value() == SECRET
    assert resolved["keys"][1] == "literal"
    assert resolved["not_a_reference"] == {"$env": "AEON_TEST_API_KEY", "other": 1}


def test_missing_env_var_names_it_without_leaking_other_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AEON_TEST_PRESENT", SECRET)
    monkeypatch.delenv("AEON_TEST_ABSENT", raising=False)
    choice = Choice("openai", {"a": {"$env": "AEON_TEST_PRESENT"}, "b": {"$env": "AEON_TEST_ABSENT"}})
    with pytest.raises(ConfigError) as info:
        choice.resolved_options()
    message = str(info.value)
    assert "AEON_TEST_ABSENT" in message
    assert "openai.b" in message  # says which option
    assert SECRET not in message
    assert SECRET not in repr(info.value.to_dict())


def test_missing_secret_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope.txt"
    with pytest.raises(ConfigError, match="cannot read secret file") as info:
        Choice("openai", {"api_key": {"$file": str(missing)}}).resolved_options()
    assert "nope.txt" in str(info.value)


def test_an_env_secret_is_stripped_of_surrounding_whitespace(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AEON_TEST_API_KEY", f" {SECRET}\r\n")
    key = Choice("openai", {"api_key": {"$env": "AEON_TEST_API_KEY"}}).resolved_options()["api_key"]
    assert key.get_secret_value() == SECRET


@pytest.mark.parametrize(
    ("inside", "complaint"),
    [
        ("\n", "a line break"),
        ("\r", "a line break"),
        ("\t", "a control character"),
        ("\x7f", "a control character"),
    ],
)
def test_a_control_character_inside_a_secret_is_a_config_error_naming_the_option(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, inside: str, complaint: str
) -> None:
    value = f"sk-very-{inside}secret-value-1234"
    monkeypatch.setenv("AEON_TEST_API_KEY", value)
    for reference in ({"$env": "AEON_TEST_API_KEY"}, {"$file": str(write(tmp_path / "key", value))}):
        with pytest.raises(ConfigError, match=f"openai.api_key: .* contains {complaint} inside it") as info:
            Choice("openai", {"api_key": reference}).resolved_options()
        assert "very-" not in str(info.value) and "secret-value" not in str(info.value)


@pytest.mark.parametrize(
    "reference", [{"$env": 5}, {"$env": ""}, {"$env": None}, {"$file": 5}, {"$file": ""}]
)
def test_malformed_references_are_config_errors(reference: dict[str, Any]) -> None:
    with pytest.raises(ConfigError, match=r"\$(env|file) must"):
        Choice("openai", {"api_key": reference}).resolved_options()


# --- fingerprint ---


def test_fingerprint_is_stable_and_ignores_secret_values(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write(tmp_path / "s.toml", SECRET_TOML)
    monkeypatch.setenv("AEON_TEST_API_KEY", SECRET)
    first = load_config(path).fingerprint()
    assert first == load_config(path).fingerprint()
    monkeypatch.setenv("AEON_TEST_API_KEY", "a-completely-different-secret")
    assert load_config(path).fingerprint() == first
    monkeypatch.delenv("AEON_TEST_API_KEY")
    assert load_config(path).fingerprint() == first  # never resolves secrets
    assert SECRET not in first
    assert len(first) == 16
    int(first, 16)


def test_fingerprint_ignores_key_order_and_source(tmp_path: Path) -> None:
    a = write(tmp_path / "a.toml", '[llm]\nuse = "scripted"\nx = 1\ny = 2\n')
    b = write(tmp_path / "b.toml", '[llm]\ny = 2\nuse = "scripted"\nx = 1\n')
    assert load_config(a).fingerprint() == load_config(b).fingerprint()


@pytest.mark.parametrize(
    "other",
    [
        {"llm": {"use": "scripted", "x": 2}},
        {"llm": {"use": "openai", "x": 1}},
        {"llm": {"use": "scripted", "x": 1}, "run": {"ttl": 7}},
        {"llm": {"use": "scripted", "x": 1}, "telemetry": {"use": ["jsonl"]}},
        {"llm": {"use": "scripted", "x": 1}, "tools": {"enabled": ["echo"]}},
    ],
)
def test_fingerprint_changes_with_the_configuration(other: dict[str, Any]) -> None:
    base = parse_config({"llm": {"use": "scripted", "x": 1}}).fingerprint()
    assert parse_config(other).fingerprint() != base


def test_plugin_lists_given_as_none_in_code_mean_not_set() -> None:
    """Found by the fuzz test: ``{"block": None}`` (possible from code, not from TOML) raised a TypeError."""
    config = parse_config({"plugins": {"block": None, "allow": None}})
    assert config.block == () and config.allow is None


def test_a_component_chosen_in_code_is_kept_by_multipass_as_one_chosen_in_aeon_toml() -> None:
    """Found measuring ``[planner] samples`` in multi-pass: ``with_choice`` then ``multipass()`` dropped the
    chosen planner and its options for the default ``recursive`` one."""
    chosen = (
        AeonConfig()
        .with_choice("planner", "recursive", samples=2)
        .with_choice("convergence", "plan_finished")
    )
    config = chosen.multipass()
    assert config.choices["planner"].options == {"samples": 2}
    assert config.choices["convergence"].use == "plan_finished"
    assert config.choices["scheduler"].use == "multipass"
    assert AeonConfig().multipass().choices["planner"].use == "recursive"  # what nothing chose is the default
