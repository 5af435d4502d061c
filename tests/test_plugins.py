"""Plugin discovery through real entry points (DESIGN rule 3): allow/block before import, failures recorded,
duplicates reported naming both plugins, no global manager, autoload switch."""

from __future__ import annotations

import sys
import textwrap
import uuid
from pathlib import Path
from typing import Any

import pytest

from aeon_kernel import HOOKSPEC_VERSION, ConfigError, Engine, hookimpl
from aeon_kernel.config import AeonConfig
from aeon_kernel.errors import ComponentBuildError, DuplicateComponentError, UnknownComponentError
from aeon_kernel.plugins import Registries, build_plugin_manager


class FakeDistribution:
    """A real installed distribution on a temporary sys.path entry: dist-info metadata and modules."""

    def __init__(self, root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.root = root
        self.tag = uuid.uuid4().hex[:8]
        self.entries: dict[str, str] = {}
        self.markers = root / "imported"
        self.markers.mkdir()
        monkeypatch.syspath_prepend(str(root))
        self._monkeypatch = monkeypatch

    def module(self, entry_name: str, body: str) -> str:
        name = f"aeon_fake_{entry_name}_{self.tag}"
        marker = self.markers / entry_name
        source = f"from pathlib import Path\nPath({str(marker)!r}).touch()\n" + textwrap.dedent(body)
        (self.root / f"{name}.py").write_text(source)
        self.entries[entry_name] = name
        return name

    def install(self, dist: str = "aeon-fake-plugin", version: str = "1.0") -> None:
        info = self.root / f"{dist.replace('-', '_')}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
        lines = "".join(f"{ep} = {mod}\n" for ep, mod in self.entries.items())
        (info / "entry_points.txt").write_text(f"[aeon]\n{lines}")

    def imported(self, entry_name: str) -> bool:
        return (self.markers / entry_name).exists()


GOOD = """
from aeon_kernel import FunctionTool, hookimpl

@hookimpl
def aeon_register_tools(register):
    register("shout", lambda: FunctionTool(
        name="shout", description="upper-case a text",
        input_schema={"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
        output_schema={"type": "object"}, function=lambda text: {"text": text.upper()}))
"""


@pytest.fixture
def dist(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeDistribution:
    monkeypatch.delenv("AEON_DISABLE_PLUGIN_AUTOLOAD", raising=False)
    monkeypatch.delenv("AEON_PLUGINS_ALLOW", raising=False)
    monkeypatch.delenv("AEON_PLUGINS_BLOCK", raising=False)
    (tmp_path / "site").mkdir()
    return FakeDistribution(tmp_path / "site", monkeypatch)


def test_an_installed_plugin_is_discovered_and_described(dist: FakeDistribution) -> None:
    dist.module("shout", GOOD)
    dist.install()
    engine = Engine(AeonConfig())
    assert engine.tools.get("shout") is not None
    described = {p["name"]: p for p in engine.describe_plugins()["plugins"]}
    assert described["shout"] == {
        "name": "shout",
        "distribution": "aeon-fake-plugin",
        "version": "1.0",
        "hookspec_version": None,
        "hooks": ["aeon_register_tools"],
        "components": {"tools": ["shout"]},
    }
    # built-ins arrive through the same entry points, from the aeon-core distribution
    assert described["calculator"]["distribution"] == "aeon-core"


def test_a_plugin_that_fails_to_import_is_reported_and_the_rest_works(dist: FakeDistribution) -> None:
    dist.module("broken", "raise RuntimeError('missing dependency xyz')")
    dist.module("shout", GOOD)
    dist.install()
    engine = Engine(AeonConfig())
    (failure,) = [e for e in engine.describe_plugins()["errors"] if e["plugin"] == "broken"]
    assert failure["stage"] == "import" and "missing dependency xyz" in failure["error"]
    assert failure["distribution"] == "aeon-fake-plugin"
    assert "shout" in engine.tools and "calculator" in engine.tools


def test_blocked_plugins_are_never_imported(dist: FakeDistribution, monkeypatch: pytest.MonkeyPatch) -> None:
    dist.module("shout", GOOD)
    dist.module("evil", "raise SystemExit('must never run')")
    dist.install()
    engine = Engine(AeonConfig(block=("evil",)))
    assert not dist.imported("evil") and dist.entries["evil"] not in sys.modules
    assert "evil" in engine.describe_plugins()["skipped"]
    assert dist.imported("shout")

    monkeypatch.setenv("AEON_PLUGINS_BLOCK", "aeon-fake-plugin")  # by distribution, from the environment
    dist2_engine = Engine(AeonConfig())
    assert "shout" not in dist2_engine.registries["tools"]


def test_allow_list_loads_only_what_it_names(dist: FakeDistribution) -> None:
    dist.module("shout", GOOD)
    dist.module("other", "")
    dist.install()
    engine = Engine(AeonConfig(allow=("shout", "echo")))
    assert sorted(engine.registries["tools"].names()) == ["echo", "shout"]
    assert not dist.imported("other")


def test_autoload_can_be_disabled_by_environment(
    dist: FakeDistribution, monkeypatch: pytest.MonkeyPatch
) -> None:
    dist.module("shout", GOOD)
    dist.install()
    monkeypatch.setenv("AEON_DISABLE_PLUGIN_AUTOLOAD", "1")
    engine = Engine(AeonConfig())
    assert len(engine.registries["tools"]) == 0 and not dist.imported("shout")
    with pytest.raises(UnknownComponentError, match="no LLM adapter named 'llama_cpp'"):
        engine.check_choices()


def test_two_plugins_registering_one_name_is_an_error_naming_both(dist: FakeDistribution) -> None:
    dist.module("impostor", GOOD.replace('"shout"', '"echo"'))
    dist.install()
    engine = Engine(AeonConfig())
    with pytest.raises(DuplicateComponentError) as info:
        engine.registries["tools"].get("echo")
    assert {info.value.first, info.value.second} == {"echo", "impostor"}
    errors = engine.describe_plugins()["errors"]
    assert any("impostor" in e["error"] and "echo" in e["error"] for e in errors)
    assert "calculator" in engine.registries["tools"]  # the rest of the host keeps working


def test_a_plugin_whose_registration_hook_raises_is_reported(dist: FakeDistribution) -> None:
    dist.module(
        "faulty",
        """
from aeon_kernel import hookimpl

@hookimpl
def aeon_register_memory_backends(register):
    raise ValueError("bad config in plugin")
""",
    )
    dist.install()
    engine = Engine(AeonConfig())
    (failure,) = [e for e in engine.describe_plugins()["errors"] if e["plugin"] == "faulty"]
    assert failure["stage"] == "aeon_register_memory_backends" and "bad config" in failure["error"]
    assert engine.memory is not None


def test_a_plugin_with_an_unknown_hook_is_refused_at_registration(dist: FakeDistribution) -> None:
    dist.module(
        "typo",
        """
from aeon_kernel import hookimpl

@hookimpl
def aeon_register_tool(register):
    pass
""",
    )
    dist.install()
    engine = Engine(AeonConfig())
    (failure,) = [e for e in engine.describe_plugins()["errors"] if e["plugin"] == "typo"]
    assert failure["stage"] == "register" and "aeon_register_tools" in failure["error"]  # the suggestion
    assert "typo" not in [p["name"] for p in engine.describe_plugins()["plugins"]]


def test_plugin_names_starting_with_aeon_dot_are_reserved() -> None:
    class Sneaky:
        __name__ = "aeon.planning"

    pm = build_plugin_manager([Sneaky()], autoload=False)
    assert pm.failures[0].stage == "register" and "reserved" in pm.failures[0].error
    assert pm.get_plugin("aeon.planning") is not Sneaky


def test_each_engine_has_its_own_plugin_manager() -> None:
    class Extra:
        from aeon_kernel import hookimpl as _hookimpl

        @_hookimpl
        def aeon_register_tools(self, register: Any) -> None:
            from aeon_plugins.echo import EchoTool

            register("echo2", lambda: EchoTool(name="echo2"))

    one = Engine(AeonConfig(), plugins=[Extra()], autoload=False)
    two = Engine(AeonConfig(), autoload=False)
    assert one.pm is not two.pm
    assert "echo2" in Registries(one.pm)["tools"] and "echo2" not in Registries(two.pm)["tools"]


def test_a_plugin_targeting_another_hookspec_major_version_is_refused(dist: FakeDistribution) -> None:
    dist.module("future", 'AEON_HOOKSPEC_VERSION = "2.0"\n' + GOOD)
    dist.module("current", 'AEON_HOOKSPEC_VERSION = "1.0"\n' + GOOD.replace('"shout"', '"shout2"'))
    dist.install()
    described = Engine(AeonConfig()).describe_plugins()
    (failure,) = [e for e in described["errors"] if e["plugin"] == "future"]
    assert (
        "targets hookspec version '2.0'" in failure["error"] and f"'{HOOKSPEC_VERSION}'" in failure["error"]
    )
    current = next(p for p in described["plugins"] if p["name"] == "current")
    assert current["hookspec_version"] == "1.0" and current["components"] == {"tools": ["shout2"]}


# --- pm.caller: the loop's cheap way to call a hook, equivalent to pm.hook.<name> ---


class Listener:
    def __init__(self, returns: Any = None) -> None:
        self.seen: list[tuple[str, Any]] = []
        self.returns = returns

    @hookimpl
    def aeon_run_end(self, run_id: str, result: dict[str, Any]) -> Any:  # declares a subset of the arguments
        self.seen.append((run_id, result))
        return self.returns


class Wrapper:
    def __init__(self) -> None:
        self.wrapped = 0

    @hookimpl(wrapper=True)
    def aeon_run_end(self, run_id: str, result: dict[str, Any]) -> Any:
        self.wrapped += 1
        return (yield)


class FirstStep:
    @hookimpl
    def aeon_execute_step(self, step: Any, context: Any) -> Any:
        return ("mine", step)


def both_ways(pm: Any, hook: str, **kwargs: Any) -> tuple[Any, Any]:
    return pm.caller(hook)(**kwargs), getattr(pm.hook, hook)(**kwargs)


def test_caller_gives_what_pluggy_gives_as_plugins_come_and_go() -> None:
    pm = build_plugin_manager(autoload=False)
    args = {"run_id": "r1", "result": {"status": "completed"}}
    assert both_ways(pm, "aeon_run_end", **args) == ([], [])  # nobody listens
    first = Listener()
    pm.register(first)
    assert both_ways(pm, "aeon_run_end", **args) == ([], [])
    assert first.seen == [("r1", args["result"])] * 2
    pm.register(Listener(returns=7))
    assert both_ways(pm, "aeon_run_end", **args) == ([7], [7])
    wrapper = Wrapper()
    pm.register(wrapper)
    both_ways(pm, "aeon_run_end", **args)
    assert wrapper.wrapped == 2
    pm.unregister(wrapper)
    pm.unregister(first)
    assert both_ways(pm, "aeon_run_end", **args) == ([7], [7])


def test_caller_of_a_firstresult_hook_returns_the_single_result() -> None:
    pm = build_plugin_manager(autoload=False)
    pm.unregister(name="aeon.planning")
    assert both_ways(pm, "aeon_execute_step", step="s", context=None) == (None, None)
    pm.register(FirstStep())
    assert both_ways(pm, "aeon_execute_step", step="s", context=None) == (("mine", "s"), ("mine", "s"))


def test_caller_errors_propagate_unchanged() -> None:
    class Broken:
        @hookimpl
        def aeon_run_end(self, run_id: str) -> None:
            raise RuntimeError("sink down")

    pm = build_plugin_manager([Broken()], autoload=False)
    with pytest.raises(RuntimeError, match="sink down"):
        pm.caller("aeon_run_end")(run_id="r", result={})


def test_tracing_sees_every_call_made_through_caller() -> None:
    pm = build_plugin_manager([Listener()], autoload=False)
    pm.caller("aeon_run_end")  # cached before tracing starts
    traced: list[str] = []
    pm.add_hookcall_monitoring(lambda name, impls, kwargs: traced.append(name), lambda *a: None)
    pm.caller("aeon_run_end")(run_id="r", result={})
    pm.caller("aeon_run_start")(run_id="r", request="x", state=None, manifest={})
    assert traced == ["aeon_run_end", "aeon_run_start"]


def test_listens_follows_registration() -> None:
    pm = build_plugin_manager(autoload=False)
    assert not pm.listens("aeon_run_end") and pm.listens("aeon_execute_step")  # the kernel's executor
    listener = Listener()
    pm.register(listener)
    assert pm.listens("aeon_run_end")
    pm.unregister(listener)
    assert not pm.listens("aeon_run_end")


def test_the_run_manifest_follows_the_plugins_and_hands_out_copies() -> None:
    from aeon_plugins import echo, in_memory, plan_finished, schema_validator, scripted, supervisor

    config = AeonConfig().with_choice("llm", "scripted", responses=["{}"])
    engine = Engine(
        config,
        plugins=[echo, in_memory, plan_finished, schema_validator, scripted, supervisor],
        autoload=False,
    )
    first = engine.manifest()
    assert "aeon_plugins.echo" in [p["name"] for p in first["plugins"]]
    assert first["config_fingerprint"] == config.fingerprint() and first["model"] == "scripted"
    first["plugins"].clear()  # a hook that changes its manifest changes only its own copy
    first["plugins"].append({"name": "intruder"})
    second = engine.manifest()
    assert "intruder" not in [p["name"] for p in second["plugins"]] and second["plugins"]
    engine.pm.register(Listener(), name="late-listener")
    assert "late-listener" in [p["name"] for p in engine.manifest()["plugins"]]
    engine.pm.unregister(name="late-listener")
    assert [p["name"] for p in engine.manifest()["plugins"]] == [p["name"] for p in second["plugins"]]


# --- building components from their options -----------------------------------------------------------------------


class OptionTools:
    """A tool whose factory takes one option, and one whose factory has a bug of its own."""

    @hookimpl
    def aeon_register_tools(self, register: Any) -> None:
        from aeon_kernel import FunctionTool

        def keyed(api_key: Any) -> FunctionTool:
            return FunctionTool(
                name="keyed",
                description="Knows a key.",
                input_schema={"type": "object"},
                output_schema={"type": "object"},
                function=lambda: {"key_shown": str(api_key), "key": api_key.get_secret_value()},
            )

        def buggy() -> FunctionTool:
            return len(1)  # type: ignore[arg-type, return-value]  # a TypeError inside the factory

        register("keyed", keyed)
        register("buggy", buggy)


def test_unknown_options_are_a_config_error_naming_them() -> None:
    config = AeonConfig(tools_enabled=("keyed",), tool_options={"keyed": {"api_kee": "x"}})
    with pytest.raises(ConfigError) as info:
        _ = Engine(config, plugins=[OptionTools()], autoload=False).tools
    assert "keyed" in str(info.value) and "api_kee" in str(info.value)


def test_a_type_error_inside_a_factory_is_not_blamed_on_the_options() -> None:
    """It is a configuration error naming the component and its plugin (issue 13), with the bug as its cause."""
    config = AeonConfig(tools_enabled=("buggy",))
    with pytest.raises(ComponentBuildError, match="has no len") as info:
        _ = Engine(config, plugins=[OptionTools()], autoload=False).tools
    assert (info.value.kind, info.value.name) == ("tools", "buggy")
    assert "OptionTools" in info.value.provider and "options" not in str(info.value)
    assert isinstance(info.value.__cause__, TypeError)


def test_secrets_in_a_tool_table_are_resolved(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every other section resolved ``$env``/``$file`` references; ``[tools.<name>]`` passed the raw dict."""
    monkeypatch.setenv("AEON_TEST_TOOL_KEY", "s3cret")
    config = AeonConfig(
        tools_enabled=("keyed",), tool_options={"keyed": {"api_key": {"$env": "AEON_TEST_TOOL_KEY"}}}
    )
    tool = Engine(config, plugins=[OptionTools()], autoload=False).tools.get("keyed")
    assert tool is not None
    assert tool.invoke() == {"key_shown": "**********", "key": "s3cret"}
