"""Permissions (issue 17): a tool that declares any is off until granted, and gets only what it was granted."""

from __future__ import annotations

from typing import Any

import pytest

from aeon_kernel import ConfigError, Engine, Register, Tool, hookimpl
from aeon_kernel.config import parse_config
from aeon_kernel.errors import ToolRegistrationError
from aeon_kernel.invocation import ToolContext, invoke_tool
from tests.support.builders import plan, tool_step

CALLS: list[dict[str, Any]] = []


class VaultTool(Tool):
    """Reads and writes a pretend vault: which permission a call needs depends on its operation."""

    name: str = "vault"
    description: str = "Read or write the vault."
    input_schema: dict[str, Any] = {
        "type": "object",
        "properties": {"operation": {"enum": ["read", "write"]}},
        "required": ["operation"],
        "additionalProperties": False,
    }
    output_schema: dict[str, Any] = {"type": "object"}
    permissions: dict[str, str] = {"read": "read the vault", "write": "write the vault"}
    colour: str = "grey"

    def required_permissions(self, arguments: dict[str, Any]) -> frozenset[str]:
        return frozenset({arguments["operation"]})

    def invoke(self, **kwargs: Any) -> dict[str, Any]:
        CALLS.append(kwargs)
        return {"done": kwargs["operation"]}


class VaultPlugin:
    @hookimpl
    def aeon_register_tools(self, register: Register) -> None:
        register("vault", VaultTool)


def engine(tools: dict[str, Any] | None = None, **config: Any) -> Engine:
    data = {"tools": tools or {}, **config}
    return Engine(parse_config(data), plugins=[VaultPlugin()])


def names(engine: Engine) -> list[str]:
    return [tool.name for tool in engine.tools]


def test_a_tool_that_declares_permissions_is_off_until_granted() -> None:
    with engine() as e:
        assert names(e) == ["calculator", "echo"]  # the vault is registered, not built
        assert "vault" in e.registries["tools"]
    with engine({"vault": {"grant": ["read"]}}) as e:
        assert "vault" in names(e)
        vault = e.tools.get("vault")
        assert vault is not None and vault.granted == {"read"}


def test_a_call_needing_an_ungranted_permission_is_refused_before_the_tool_runs() -> None:
    CALLS.clear()
    vault = VaultTool(granted=frozenset({"read"}))
    allowed = invoke_tool(vault, {"operation": "read"}, ToolContext("run", "1"))
    refused = invoke_tool(vault, {"operation": "write"}, ToolContext("run", "2"))
    assert allowed.result == {"done": "read"}
    assert refused.result is None and refused.error is not None
    assert refused.error["type"] == "PermissionDeniedError"
    assert refused.error["permissions"] == ["write"] and refused.error["tool"] == "vault"
    assert "add 'write' to grant in [tools.vault]" in refused.error["message"]
    assert CALLS == [{"operation": "read"}]


def test_a_refused_call_fails_its_step_and_the_run_goes_on(tmp_path: Any) -> None:
    """Through a whole run: the refusal is the step's recorded error; the tool never ran."""
    import json

    CALLS.clear()
    responses = tmp_path / "responses.json"
    script = [
        json.dumps(
            plan(tool_step("1", "vault", {"operation": "write"}), tool_step("2", "echo", {"message": "hi"}))
        )
    ]
    responses.write_text(json.dumps(script))
    with engine({"vault": {"grant": ["read"]}}, llm={"use": "scripted", "responses": str(responses)}) as e:
        result = e.run("write the vault, then say hi")
    steps = {step["step_id"]: step for step in result["plan"]["steps"]}
    assert steps["1"]["status"] == "failed" and steps["2"]["status"] == "complete"
    assert "the call needs 'write', which was not granted" in steps["1"]["failure"]
    refusal = result["final_state"]["tool_history"][0]["error"]
    assert refusal["type"] == "PermissionDeniedError" and refusal["permissions"] == ["write"]
    assert CALLS == []


@pytest.mark.parametrize(
    ("tools", "complaint"),
    [
        ({"enabled": ["vault"]}, r"can do nothing until it is granted .*'read': read the vault"),
        ({"vault": {"colour": "red"}}, r"add grant = \[...\] to \[tools.vault\]"),
        (
            {"vault": {"grant": ["read"]}, "echo": {"grant": ["read"]}},
            r"echo has no permission 'read' \(it has: none\)",
        ),
        ({"vault": {"grant": ["delete"]}}, r"no permission 'delete' \(it has: read, write\)"),
        ({"vault": {"grant": "read"}}, "grant must be a list of permission names"),
        ({"vault": {"grant": [""]}}, "grant must be a list of permission names"),
    ],
    ids=[
        "enabled-not-granted",
        "options-not-granted",
        "grant-to-a-tool-without",
        "unknown",
        "not-a-list",
        "blank",
    ],
)
def test_grants_that_cannot_be_honoured_are_config_errors(tools: dict[str, Any], complaint: str) -> None:
    with engine(tools) as e, pytest.raises(ConfigError, match=complaint):
        _ = e.tools
    with engine(tools) as e:  # aeon plugins --check reports it too
        problems = [p for p in e.check_components() if p["kind"] == "tools"]
        assert problems and any(__import__("re").search(complaint, p["error"]) for p in problems), problems


def test_a_factory_that_drops_the_grant_is_refused() -> None:
    """A tool built without the grant it was given would refuse every call; say so when it is built."""

    class Careless:
        @hookimpl
        def aeon_register_tools(self, register: Register) -> None:
            register("vault", lambda granted=frozenset(): VaultTool())

    careless = Engine(parse_config({"tools": {"vault": {"grant": ["read"]}}}), plugins=[Careless()])
    with careless, pytest.raises(ToolRegistrationError, match="did not keep the permissions granted to it"):
        _ = careless.tools


def test_a_toolset_is_built_only_when_granted_and_its_members_are_named_after_it() -> None:
    """A factory may return several tools (an MCP server's, say), named ``<name>.*``. One that declares its
    permissions is not even called while nothing grants them: an ungranted server is never started."""
    built: list[frozenset[str]] = []

    def kit(granted: frozenset[str] = frozenset(), prefix: str = "kit") -> list[Tool]:
        built.append(granted)
        return [VaultTool(name=f"{prefix}.{n}", granted=granted) for n in ("a", "b")]

    kit.permissions = VaultTool.model_fields["permissions"].default  # type: ignore[attr-defined]

    class Kit:
        @hookimpl
        def aeon_register_tools(self, register: Register) -> None:
            register("kit", kit)

    with Engine(parse_config({}), plugins=[Kit()]) as e:
        assert "kit.a" not in names(e) and built == []
    with Engine(parse_config({"tools": {"kit": {"prefix": "kit"}}}), plugins=[Kit()]) as e:
        with pytest.raises(ConfigError, match=r"add grant = \[...\] to \[tools.kit\]"):
            _ = e.tools
        assert built == []
    with Engine(parse_config({"tools": {"kit": {"grant": ["read"]}}}), plugins=[Kit()]) as e:
        assert [n for n in names(e) if n.startswith("kit")] == ["kit.a", "kit.b"]
        assert built == [frozenset({"read"})]
    stray = Engine(parse_config({"tools": {"kit": {"grant": ["read"], "prefix": "other"}}}), plugins=[Kit()])
    with stray, pytest.raises(ToolRegistrationError, match=r"a list of tools named kit\.\*"):
        _ = stray.tools
