"""Issue 13, items 6 (the CLI), 7, 8 and the JSONL path of 15: what a hostile model, a broken plugin or a bad
path must not do to Aeon — crash the terminal output, end in a traceback, or end Aeon at all."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from aeon_cli.main import cli
from aeon_kernel import ConfigError, Engine, hookimpl
from aeon_kernel.config import AeonConfig, Choice
from aeon_kernel.errors import ComponentBuildError
from aeon_kernel.kinds import KINDS
from aeon_plugins.jsonl import JsonlSink
from tests.cli.test_main import SUM
from tests.support.builders import answer
from tests.test_plugins import GOOD, FakeDistribution


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working directory whose aeon.toml selects the scripted model (a plan, then the answer)."""
    (tmp_path / "responses.json").write_text(json.dumps([SUM, answer("The sum is 15")]))
    (tmp_path / "aeon.toml").write_text(SCRIPTED)
    monkeypatch.chdir(tmp_path)
    for name in ("AEON_CONFIG", "AEON_DISABLE_PLUGIN_AUTOLOAD", "AEON_PLUGINS_ALLOW", "AEON_PLUGINS_BLOCK"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


SCRIPTED = '[llm]\nuse = "scripted"\nresponses = "responses.json"\n'


@pytest.fixture
def dist(project: Path, monkeypatch: pytest.MonkeyPatch) -> FakeDistribution:
    """An installed distribution, seen by this process (for the in-process CLI) through its entry points."""
    (project / "site").mkdir()
    return FakeDistribution(project / "site", monkeypatch)


def invoke(*args: str) -> Result:
    """The CLI in this process: it may exit with any status, never with an exception of its own."""
    result = CliRunner().invoke(cli, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output
    return result


# --- item 6: output never fails on text the terminal cannot encode ----------------------------------------------

LONE = "add 5 and 10 \ud800 and \udcff"  # lone surrogates: no encoding accepts them


def test_run_json_prints_lone_surrogates_as_valid_json(project: Path) -> None:
    result = invoke("run", LONE, "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["status"] == "completed" and data["final_state"]["request"] == LONE


def test_the_live_view_prints_lone_surrogates(project: Path) -> None:
    result = invoke("run", LONE)
    assert result.exit_code == 0, result.output
    assert "COMPLETED" in result.output and "\\ud800" in result.output


def test_runs_lists_a_request_with_lone_surrogates(project: Path) -> None:
    (project / "aeon.toml").write_text(SCRIPTED + '[state]\nuse = "sqlite"\npath = "state.db"\n')
    assert invoke("run", LONE, "--json").exit_code == 0
    listed = invoke("runs", "--json")  # the request as the store keeps it (not this test's business)
    assert listed.exit_code == 0 and json.loads(listed.stdout)[0]["request"].startswith("add 5 and 10")
    assert invoke("runs").exit_code == 0


@pytest.mark.parametrize("encoding", ["latin-1", "ascii"])
def test_output_on_a_terminal_that_cannot_encode_it(project: Path, encoding: str) -> None:
    """A non-UTF-8 terminal: the JSON falls back to escapes (the same value), the live view to backslashes."""
    request = "add 5 and 10, café ☕ 𝄞"

    def aeon_on(*args: str) -> tuple[int, str, str]:
        proc = subprocess.run(
            [sys.executable, "-m", "aeon_cli", *args],
            cwd=project,
            capture_output=True,
            timeout=120,
            env={**os.environ, "PYTHONIOENCODING": encoding},
        )
        return proc.returncode, proc.stdout.decode(encoding), proc.stderr.decode(encoding)

    status, out, err = aeon_on("run", request, "--json")
    assert status == 0 and "Traceback" not in err, err
    assert json.loads(out)["final_state"]["request"] == request
    status, out, err = aeon_on("run", request)
    assert status == 0 and "Traceback" not in err, err
    assert "COMPLETED" in out


FLOW = """\
name: echo
start: intake
nodes:
  - {id: intake, role: start, impl: identity}
  - {id: done, role: exit}
edges:
  - [intake, done]
"""


def test_flow_run_prints_lone_surrogates(project: Path) -> None:
    (project / "flow").mkdir()
    (project / "flow" / "flow.yaml").write_text(FLOW)
    value = {"text": "x\ud800y", "other": "\udcff"}
    as_json = invoke("flow", "run", "flow", "--input", json.dumps(value), "--json")
    assert as_json.exit_code == 0, as_json.output
    assert json.loads(as_json.stdout)["output"] == value
    plain = invoke("flow", "run", "flow", "--input", json.dumps(value))
    assert plain.exit_code == 0 and "\\ud800" in plain.stdout, plain.output


# --- item 7: a component that cannot be built is a configuration error, and --check builds them all ------------


class Broken:
    """Factories that fail in every way a factory can."""

    @hookimpl
    def aeon_register_tools(self, register: Any) -> None:
        def exploding() -> Any:
            raise RuntimeError("tool factory exploded")

        def keyed(api_key: Any) -> Any:  # quotes its secret option in its error, as careless code does
            raise ValueError(f"bad key {api_key.get_secret_value()!r} (raw: {api_key.get_secret_value()})")

        register("exploding", exploding)
        register("quitter", lambda: sys.exit(4))
        register("interrupted", self._interrupt)
        register("not_a_tool", lambda: "a string")
        register("keyed", keyed)

    @staticmethod
    def _interrupt() -> Any:
        raise KeyboardInterrupt

    @hookimpl
    def aeon_register_memory_backends(self, register: Any) -> None:
        register("wrong_memory", lambda: {"not": "a memory"})

    @hookimpl
    def aeon_register_llm_adapters(self, register: Any) -> None:
        register("wrong_llm", object)

    @hookimpl
    def aeon_register_depth_heuristics(self, register: Any) -> None:
        def broken_depth() -> Any:
            raise OSError("heuristics file missing")

        register("broken_depth", broken_depth)


def _wrong_hook(kind: str) -> Any:
    def register_wrong(register: Any) -> None:
        register("wrong", object)

    return staticmethod(hookimpl(specname=f"aeon_register_{kind}")(register_wrong))


#: the kinds whose factories' results are checked: those with a contract, and the plain callables
CONTRACTS = [kind.name for kind in KINDS if kind.contract is not None]

#: ``wrong``: for every kind with a contract, a factory returning a plain object
WrongOfEveryKind = type(
    "WrongOfEveryKind",
    (),
    {f"aeon_register_{kind}": _wrong_hook(kind) for kind in (*CONTRACTS, "nodes", "retrieval_policies")},
)


def broken_engine(**options: Any) -> Engine:
    config = AeonConfig(**options).with_choice("llm", "scripted", responses=[SUM, answer("15")])
    return Engine(config, plugins=[Broken()])


def test_a_tool_factory_that_raises_is_a_config_error_naming_it() -> None:
    with pytest.raises(ComponentBuildError) as info:
        _ = broken_engine(tools_enabled=("exploding",)).tools
    error = info.value
    assert isinstance(error, ConfigError) and (error.kind, error.name) == ("tools", "exploding")
    assert error.provider.startswith("Broken-")
    assert "the tool 'exploding' (from Broken-" in str(error)
    assert "RuntimeError: tool factory exploded" in str(error)
    assert isinstance(error.__cause__, RuntimeError)


def test_sys_exit_in_a_factory_is_a_config_error_and_ctrl_c_still_stops() -> None:
    with pytest.raises(ComponentBuildError, match=r"SystemExit: 4"):
        _ = broken_engine(tools_enabled=("quitter",)).tools
    with pytest.raises(KeyboardInterrupt):
        _ = broken_engine(tools_enabled=("interrupted",)).tools


@pytest.mark.parametrize("kind", [*CONTRACTS, "nodes", "retrieval_policies"])
def test_what_a_factory_returns_is_checked_against_its_kinds_contract(kind: str) -> None:
    engine = Engine(AeonConfig(), plugins=[WrongOfEveryKind()], autoload=False)
    builds = engine.registries[kind].bound("wrong")
    with pytest.raises(
        ComponentBuildError, match=r"could not be built: its factory returned a builtins\.object"
    ):
        builds()


def test_the_wrong_type_names_the_contract() -> None:
    engine = Engine(AeonConfig().with_choice("memory", "wrong_memory"), plugins=[Broken()])
    with pytest.raises(
        ComponentBuildError,
        match=r"returned a builtins\.dict, which is not an instance of aeon_kernel\.Memory",
    ) as info:
        _ = engine.memory
    assert info.value.kind == "memory_backends" and info.value.name == "wrong_memory"


def test_a_factorys_error_never_quotes_a_secret_option(monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "sk- tab'quote-é-0123456789"
    monkeypatch.setenv("AEON_TEST_TOOL_SECRET", secret)
    engine = broken_engine(
        tools_enabled=("keyed",), tool_options={"keyed": {"api_key": {"$env": "AEON_TEST_TOOL_SECRET"}}}
    )
    with pytest.raises(ComponentBuildError) as info:
        _ = engine.tools
    message = str(info.value)
    assert "ValueError: bad key" in message
    for form in (secret, repr(secret)[1:-1], "0123456789"):
        assert form not in message


def test_check_components_lists_each_broken_component_once() -> None:
    config = AeonConfig(
        tools_enabled=("exploding", "calculator"), telemetry=(Choice("jsonl", {"path": "."}),)
    ).with_choice("llm", "wrong_llm")
    with Engine(config, plugins=[Broken()]) as engine:
        problems = engine.check_components()
    # the model once, though the supervisor and the planner need it too; the tool; the sink
    assert [(p["stage"], p["kind"], p["name"]) for p in problems] == [
        ("build", "llm_adapters", "wrong_llm"),
        ("build", "tools", "exploding"),
        ("build", "telemetry_sinks", "jsonl"),
    ]
    assert (
        problems[0]["plugin"].startswith("Broken-")
        and "not an instance of aeon_kernel.LLMAdapter" in problems[0]["error"]
    )
    assert problems[2]["plugin"] == "jsonl" and problems[2]["distribution"] == "aeon-core"


def test_a_run_builds_what_its_scheduler_needs_before_it_starts() -> None:
    """A multi-pass run builds its depth heuristic in its first cycle: ``aeon run`` builds it before (exit 2)."""
    config = AeonConfig(tools_enabled=("calculator",)).with_choice("scheduler", "multipass")
    config = config.with_choice("depth", "broken_depth")
    engine = Engine(config.with_choice("llm", "scripted", responses=[]), plugins=[Broken()])
    with pytest.raises(ComponentBuildError, match="OSError: heuristics file missing") as info:
        engine.build_selected()
    assert info.value.kind == "depth_heuristics"


BROKEN_TOOL = """
from aeon_kernel import hookimpl

@hookimpl
def aeon_register_tools(register):
    def exploding():
        raise RuntimeError("tool factory exploded")
    register("exploding", exploding)
"""


def test_a_broken_tool_plugin_fails_run_with_exit_2_and_check_finds_it(dist: FakeDistribution) -> None:
    dist.module("exploding", BROKEN_TOOL)
    dist.install()
    run = invoke("run", "x", "--json")
    assert run.exit_code == 2 and run.stdout == ""
    assert "Error: the tool 'exploding' (from exploding) could not be built: RuntimeError" in run.stderr
    assert "block the plugin 'exploding'" in run.stderr
    assert invoke("plugins").exit_code == 0  # without --check, nothing is built
    check = invoke("plugins", "--check")
    assert check.exit_code == 1 and "1 plugin problem" in check.stderr
    (problem,) = json.loads(check.stdout)["errors"]
    assert problem["plugin"] == "exploding" and problem["distribution"] == "aeon-fake-plugin"
    assert (problem["stage"], problem["kind"], problem["name"]) == ("build", "tools", "exploding")
    (dist.root.parent / "aeon.toml").write_text(SCRIPTED + '[tools]\nenabled = ["calculator"]\n')
    assert invoke("run", "add 5 and 10", "--json").exit_code == 0  # not enabled: not built
    assert invoke("plugins", "--check").exit_code == 0


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        ('[memory]\nuse = "sqlite"\npath = 7\n', "the memory backend 'sqlite'"),
        ('[state]\nuse = "sqlite"\npath = "s.db"\ntimeout = "abc"\n', "the state store 'sqlite'"),
        (
            '[telemetry]\nuse = ["jsonl"]\n[telemetry.jsonl]\npath = "logs"\n',
            "the JSONL log 'logs' cannot be written: it is a directory",
        ),
    ],
)
def test_bad_options_inside_constructors_are_setup_errors(project: Path, toml: str, message: str) -> None:
    (project / "logs").mkdir()
    (project / "aeon.toml").write_text(SCRIPTED + toml)
    run = invoke("run", "x", "--json")
    assert run.exit_code == 2 and message in run.stderr, run.output
    check = invoke("plugins", "--check")
    assert check.exit_code == 1
    assert [e["stage"] for e in json.loads(check.stdout)["errors"] if message in e["error"]] == ["build"]


def test_a_non_ascii_api_key_is_a_setup_error_that_does_not_show_the_key(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AEON_TEST_KEY", "sk-clé-secrète-0123456789")
    (project / "aeon.toml").write_text(
        '[llm]\nuse = "openai"\nmodel = "m"\nbase_url = "http://127.0.0.1:9"\n'
        'api_key = { "$env" = "AEON_TEST_KEY" }\n'
    )
    run = invoke("run", "x", "--json")
    assert run.exit_code == 2 and "openai" in run.stderr, run.output
    assert "secrète" not in run.output and "0123456789" not in run.output


def test_a_memory_factory_returning_the_wrong_type_is_a_setup_error(dist: FakeDistribution) -> None:
    dist.module(
        "wrongmem",
        "from aeon_kernel import hookimpl\n\n"
        "@hookimpl\ndef aeon_register_memory_backends(register):\n    register('wrongmem', dict)\n",
    )
    dist.install()
    (dist.root.parent / "aeon.toml").write_text(SCRIPTED + '[memory]\nuse = "wrongmem"\n')
    run = invoke("run", "x", "--json")
    assert run.exit_code == 2
    assert "the memory backend 'wrongmem' (from wrongmem) could not be built" in run.stderr
    assert "returned a builtins.dict, which is not an instance of aeon_kernel.Memory" in run.stderr


# --- item 8: a plugin never ends Aeon, whatever it raises; the user's Ctrl-C still does ------------------------


@pytest.mark.parametrize(
    ("body", "error"),
    [
        ("import sys\nsys.exit(3)\n", "SystemExit(3): the plugin called sys.exit()"),
        ("raise SystemExit\n", "SystemExit(None)"),
        ("raise KeyboardInterrupt('from the plugin')\n", "KeyboardInterrupt: from the plugin"),
    ],
)
def test_a_plugin_that_exits_at_import_is_a_recorded_failure(
    dist: FakeDistribution, body: str, error: str
) -> None:
    dist.module("quitter", body)
    dist.module("shout", GOOD)
    dist.install()
    try:
        engine = Engine(AeonConfig())
    except BaseException as exc:  # not up to pytest: a KeyboardInterrupt would end the whole session
        pytest.fail(f"loading the plugins raised {exc!r}")
    (failure,) = [e for e in engine.describe_plugins()["errors"] if e["plugin"] == "quitter"]
    assert failure["stage"] == "import" and failure["error"].startswith(error)
    assert "shout" in engine.tools and "calculator" in engine.tools
    listed = invoke("plugins")
    assert listed.exit_code == 0 and any(
        e["plugin"] == "quitter" for e in json.loads(listed.stdout)["errors"]
    )
    assert invoke("plugins", "--check").exit_code == 1
    run = invoke("run", "calculate the sum of 5 and 10", "--json")
    assert run.exit_code == 0 and json.loads(run.stdout)["answer"] == "The sum is 15"


def test_a_registration_hook_that_exits_is_a_recorded_failure(dist: FakeDistribution) -> None:
    dist.module(
        "quitter",
        """
import sys
from aeon_kernel import hookimpl

@hookimpl
def aeon_register_tools(register):
    register("half", lambda: None)
    sys.exit("bye")
""",
    )
    dist.install()
    engine = Engine(AeonConfig())
    (failure,) = [e for e in engine.describe_plugins()["errors"] if e["plugin"] == "quitter"]
    assert failure["stage"] == "aeon_register_tools" and "SystemExit('bye')" in failure["error"]
    assert invoke("run", "calculate the sum of 5 and 10", "--json").exit_code == 2  # "half" builds None
    assert invoke("plugins").exit_code == 0


def test_a_plugin_object_that_exits_when_registered_is_a_recorded_failure() -> None:
    class Exits:
        __name__ = "exits"

        def __getattr__(self, name: str) -> Any:
            raise SystemExit(9)

    engine = Engine(AeonConfig(), plugins=[Exits()], autoload=False)
    (failure,) = engine.describe_plugins()["errors"]
    assert (
        failure["plugin"] == "exits"
        and failure["stage"] == "register"
        and "SystemExit(9)" in failure["error"]
    )
    assert not engine.pm.has_plugin("exits")


@pytest.fixture
def python_sigint() -> Iterator[None]:
    """Ctrl-C raises KeyboardInterrupt in the main thread, as in an ordinary ``aeon`` process."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


CTRL_C = "import os, signal, time\nos.kill(os.getpid(), signal.SIGINT)\ntime.sleep(5)\n"


def test_a_ctrl_c_while_plugins_load_still_stops(dist: FakeDistribution, python_sigint: None) -> None:
    dist.module("slow", CTRL_C)
    dist.install()
    with pytest.raises(KeyboardInterrupt):
        Engine(AeonConfig())
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # put back


def test_a_ctrl_c_a_plugin_swallows_is_raised_again(dist: FakeDistribution, python_sigint: None) -> None:
    swallowing = "try:\n" + "".join(f"    {line}\n" for line in CTRL_C.splitlines())
    dist.module("swallow", swallowing + "except KeyboardInterrupt:\n    pass\n")
    dist.install()
    with pytest.raises(KeyboardInterrupt):
        Engine(AeonConfig())


# --- item 15: a JSONL path that cannot be a log is an error at setup ----------------------------------------------


def test_a_jsonl_path_that_cannot_be_a_log_is_a_config_error(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("")
    with pytest.raises(ConfigError, match="it is a directory"):
        JsonlSink(tmp_path)
    with pytest.raises(ConfigError, match="is not a directory"):
        JsonlSink(tmp_path / "a-file" / "sub" / "log.jsonl")
    if os.geteuid() != 0:  # root writes anyway
        (tmp_path / "locked").mkdir(mode=0o500)
        with pytest.raises(ConfigError, match="not writable"):
            JsonlSink(tmp_path / "locked" / "log.jsonl")
    JsonlSink(tmp_path / "new" / "log.jsonl").close()
    assert not (tmp_path / "new").exists()  # still nothing created before the first line


def test_the_jsonl_log_keeps_lines_with_lone_surrogates(tmp_path: Path) -> None:
    from tests.plugins.test_jsonl_sink import STATE, entry

    sink = JsonlSink(tmp_path / "log.jsonl")
    sink.aeon_pass_event(run_id="r", pass_number=1, event="report", record={"text": "a\ud800b"})
    sink.aeon_cycle_end(entry=entry(1, llm_output={"text": "\udcff"}), state=STATE)
    sink.close()
    first, second = [json.loads(line) for line in (tmp_path / "log.jsonl").read_text().splitlines()]
    assert first["record"]["text"] == "a\ud800b" and second["llm_output"]["text"] == "\udcff"
