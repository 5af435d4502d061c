"""Policies bind every tool by what it really touches (issue 27, item 4): a ``path`` rule binds every spelling of a
path the ``shell`` tool is given, a ``host`` rule every hop of the ``http`` tool's redirects, and configured HTTP
credentials stay with their host.

Real programs in a real root (with a ``secrets/`` directory and symbolic links into it), real servers on loopback;
what is asserted is what the programs printed and what the servers received.
"""

from __future__ import annotations

import json
import os
import ssl
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import SecretStr

import aeon_plugins.http as http_plugin
import aeon_plugins.policy_rules as rules_plugin
import aeon_plugins.shell as shell_plugin
from aeon_kernel import Engine, Tool, ToolContext
from aeon_kernel.config import parse_config
from aeon_kernel.models import ToolCall
from aeon_plugins.http import HttpTool
from tests.plugins import test_http_tool
from tests.plugins.test_http_tool import FakeDNS, Handler, Server

certificate = test_http_tool.certificate  # the fixture: a self-signed certificate for tls.test

PY = sys.executable
CANARY = "canary-key-6d1f0b8e"  # what secrets/key.txt holds: no output may show it
TOKEN = "token-for-api-only-93c2a7"
NO_SECRETS = {"name": "no-secrets", "path": "secrets/*", "reason": "the secrets directory is off limits"}


def through_the_gate(engine: Engine, tool: Tool, arguments: dict[str, Any]) -> ToolCall:
    """The call as a run makes it: through the ``aeon_invoke_tool`` hook, the engine's policies first."""
    assert engine.policies  # built, and the gate registered
    call: ToolCall = engine.pm.hook.aeon_invoke_tool(
        tool=tool, arguments=arguments, context=ToolContext("run", "step")
    )
    return call


# --- shell: a path rule binds every spelling -------------------------------------------------------------------


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A workspace with secrets, notes, links into the secrets, a link out of the workspace, and one above it."""
    workspace = tmp_path / "workspace"
    (workspace / "secrets").mkdir(parents=True)
    (workspace / "notes").mkdir()
    (workspace / "secrets" / "key.txt").write_text(CANARY)
    (workspace / "notes" / "a.txt").write_text("plain notes")
    os.symlink("secrets/key.txt", workspace / "link.txt")
    os.symlink("secrets", workspace / "shortcut")
    os.symlink("..", workspace / "up")  # leads out of the root, and back in by name
    os.symlink("/etc", workspace / "etc")
    return workspace


def shell_engine(root: Path, *deny: dict[str, Any], **rules: Any) -> tuple[Engine, Tool]:
    config = {
        "tools": {"shell": {"grant": ["run"], "programs": ["cat", "grep", PY], "root": str(root)}},
        "policy": {"rules": {"deny": list(deny), **rules}},
    }
    engine = Engine(parse_config(config), plugins=[shell_plugin, rules_plugin])
    tool = engine.tools.get("shell")
    assert tool is not None
    return engine, tool


#: programs that read the path in the form they are given it
READ = {
    "option": "import sys; print(open(sys.argv[1].split('=', 1)[1]).read())",
    "short": "import sys; print(open(sys.argv[1][2:]).read())",
    "colon": "import sys; print(open(sys.argv[1].split(':', 1)[1]).read())",
    "at": "import sys; print(open(sys.argv[1][1:]).read())",
    "glob": "import glob, sys; print(open(glob.glob(sys.argv[1])[0]).read())",
    "url": "import sys, urllib.parse; print(open(urllib.parse.urlsplit(sys.argv[1]).path).read())",
    "home": "import os, sys; print(open(os.path.expanduser(sys.argv[1])).read())",
}


def spellings(root: Path) -> list[tuple[str, list[str], str]]:
    """(program, args, the rule that must refuse it) for every way of naming secrets/key.txt, and outside paths."""
    return [
        ("cat", ["secrets/key.txt"], "no-secrets"),
        ("cat", ["secrets/../secrets/key.txt"], "no-secrets"),
        ("cat", [f"{root}/secrets/key.txt"], "no-secrets"),
        ("cat", ["./secrets//key.txt"], "no-secrets"),
        ("cat", ["notes/../secrets/./key.txt"], "no-secrets"),
        ("cat", ["link.txt"], "no-secrets"),  # a link into the secrets
        ("cat", ["shortcut/key.txt"], "no-secrets"),  # a link to the directory
        ("cat", ["shortcut/../secrets/key.txt"], "no-secrets"),
        ("cat", [f"up/{root.name}/secrets/key.txt"], "no-secrets"),  # out of the root, and back in
        ("cat", ["-n", "--", "secrets/key.txt"], "no-secrets"),
        (PY, ["-c", READ["option"], "--file=secrets/key.txt"], "no-secrets"),
        (PY, ["-c", READ["short"], "-fsecrets/key.txt"], "no-secrets"),
        (PY, ["-c", READ["colon"], "HEAD:secrets/key.txt"], "no-secrets"),
        (PY, ["-c", READ["at"], "@secrets/key.txt"], "no-secrets"),
        (PY, ["-c", READ["glob"], "secr*/k?y.txt"], "no-secrets"),  # a glob the program expands
        (PY, ["-c", READ["glob"], "*/key.txt"], "no-secrets"),
        (PY, ["-c", READ["url"], f"file://{root}/secrets/key.txt"], "no-secrets"),
        (PY, ["-c", READ["home"], "~/secrets/key.txt"], "no-secrets"),  # HOME is the root
        (PY, ["-c", "print(open('secrets/key.txt').read())"], "no-secrets"),  # a path inside code
        ("grep", ["-r", "canary", "secrets"], "no-secrets"),  # a directory: what is beneath it
        ("grep", ["-r", "canary", "."], "no-secrets"),
        ("grep", ["-R", "canary", "notes/.."], "no-secrets"),
        ("cat", ["/etc/hostname"], "outside-root"),  # outside the root: no rule can say, so refused
        ("cat", ["etc/hostname"], "outside-root"),  # a link out of the root
        ("cat", [f"{root.parent}/elsewhere.txt"], "outside-root"),
    ]


def test_every_spelling_of_a_denied_path_is_refused_and_nothing_leaks(root: Path) -> None:
    engine, tool = shell_engine(root, NO_SECRETS)
    with engine:
        assert tool.invoke(program="cat", args=["secrets/key.txt"])["stdout"] == CANARY  # readable, unjudged
        for program, args, rule in spellings(root):
            direct = tool.invoke(program=program, args=args)
            call = through_the_gate(engine, tool, {"program": program, "args": args})
            assert call.error is not None and call.result is None, (args, call.result)
            assert (call.error["type"], call.error["rule"]) == ("PolicyDeniedError", rule), (args, call.error)
            assert CANARY not in json.dumps(call.model_dump(mode="json")), args
            if rule == "no-secrets" and program != "grep":  # the spelling does reach the file unjudged
                assert CANARY in direct["stdout"], (args, direct)


def test_what_the_rule_leaves_alone_still_runs(root: Path) -> None:
    engine, tool = shell_engine(root, NO_SECRETS)
    with engine:
        for program, args, printed in (
            ("cat", ["notes/a.txt"], "plain notes"),
            ("cat", ["-n", "notes/./a.txt"], "plain notes"),
            ("grep", ["-r", "plain", "notes"], "plain notes"),
            (PY, ["-c", "print(1/2)"], "0.5"),
            (PY, ["-c", READ["option"], "--file=notes/a.txt"], "plain notes"),
        ):
            call = through_the_gate(engine, tool, {"program": program, "args": args})
            assert call.error is None and call.result is not None, (args, call.error)
            assert printed in call.result["stdout"]


def test_outside_the_root_an_allow_rule_must_name_the_path(root: Path) -> None:
    (root.parent / "shared.txt").write_text("shared text")
    allow = [{"name": "shared", "path": str(root.parent / "shared.txt")}]
    engine, tool = shell_engine(root, NO_SECRETS, allow=allow)
    with engine:
        call = through_the_gate(engine, tool, {"program": "cat", "args": [str(root.parent / "shared.txt")]})
        assert call.result is not None and call.result["stdout"] == "shared text"
        call = through_the_gate(engine, tool, {"program": "cat", "args": ["/etc/hostname"]})
        assert call.error is not None and call.error["rule"] == "outside-root"
    # a path rule for another tool does not bind the shell
    engine, tool = shell_engine(root, {**NO_SECRETS, "tool": "files"})
    with engine:
        call = through_the_gate(engine, tool, {"program": "cat", "args": ["/etc/hostname"]})
        assert call.error is None or call.error["type"] != "PolicyDeniedError"


def test_a_directory_too_large_to_check_is_refused_while_a_path_rule_applies(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(shell_plugin, "MAX_WALK_ENTRIES", 3)
    for index in range(5):
        (root / "notes" / f"{index}.txt").write_text("x")
    monkeypatch.setattr(shell_plugin, "MAX_GLOB_MATCHES", 3)
    engine, tool = shell_engine(root, NO_SECRETS)
    with engine:
        # a tree, a glob, an option cluster with a path at each of its 4000 letters: too many to look at
        for args in (["-r", "x", "notes"], ["notes/*.txt"], ["-" + "n" * 4000]):
            call = through_the_gate(engine, tool, {"program": "grep", "args": ["x", *args]})
            assert call.error is not None and call.error["rule"] == "unresolved-path", args
            shown = args[-1] if len(args[-1]) <= 80 else args[-1][:77] + "..."
            assert tool.resources({"program": "grep", "args": args})["unresolved"] == [shown]
    assert "unresolved" not in tool.resources({"program": "cat", "args": ["notes/[01].txt"]})


SEGMENT = st.sampled_from(["/", "//", "/./", "/.//"])
PREFIX = st.sampled_from(["", "./", ".//", "notes/../", "shortcut/../", "up/{name}/", "{root}/", "~/"])
DIRECTORY = st.sampled_from(["secrets", "shortcut", "notes/../secrets", "./shortcut/."])
WRAP = st.sampled_from(["{}", "--file={}", "-f{}", "-nf{}", "HEAD:{}", "@{}", "x={}", "a,{}"])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(prefix=PREFIX, directory=DIRECTORY, segment=SEGMENT, wrap=WRAP)
def test_any_spelling_of_the_secret_is_refused(
    root: Path, prefix: str, directory: str, segment: str, wrap: str
) -> None:
    path = prefix.format(name=root.name, root=root) + directory + segment + "key.txt"
    argument = wrap.format(path)
    engine, tool = shell_engine(root, NO_SECRETS)
    with engine:
        call = through_the_gate(engine, tool, {"program": "cat", "args": [argument]})
    assert call.error is not None and call.error["rule"] == "no-secrets", (argument, call.error)


# --- http: every hop judged, credentials kept to their host ----------------------------------------------------


@pytest.fixture
def dns(monkeypatch: pytest.MonkeyPatch) -> FakeDNS:
    fake = FakeDNS()
    monkeypatch.setattr("aeon_plugins.http.connection.socket.getaddrinfo", fake)
    for name in ("api.test", "other.test", "evil.test", "tls.test"):
        fake.add(name, "127.0.0.1")
    return fake


@pytest.fixture
def servers() -> Iterator[dict[str, Server]]:
    """api.test, other.test (both listed) and evil.test (listed too: only a policy keeps requests from it)."""
    started = {name: Server("127.0.0.1", 0, Handler) for name in ("api", "other", "evil")}
    yield started
    for server in started.values():
        server.close()


def hosts(servers: dict[str, Server]) -> list[str]:
    names = [f"{name}.test:{server.port}" for name, server in servers.items()]
    return names + [f"127.0.0.1:{server.port}" for server in servers.values()]  # they resolve to loopback


def url(servers: dict[str, Server], name: str, path: str) -> str:
    return f"http://{name}.test:{servers[name].port}{path}"


def redirect(to: str, code: int = 302) -> str:
    return f"/redirect?code={code}&to={quote(to, safe='')}"


def http_engine(servers: dict[str, Server], policy: dict[str, Any], **options: Any) -> tuple[Engine, Tool]:
    tool_options = {"grant": ["get", "post"], "hosts": hosts(servers), "timeout": 5, **options}
    config = {"tools": {"http": tool_options}, "policy": {"rules": policy}}
    engine = Engine(parse_config(config), plugins=[http_plugin, rules_plugin])
    tool = engine.tools.get("http")
    assert tool is not None
    return engine, tool


NO_EVIL = {"deny": [{"name": "no-evil", "tool": "http", "host": "evil.test", "reason": "not there"}]}
ONLY_API = {"default": "deny", "allow": [{"name": "api-only", "host": "api.test"}]}


@pytest.mark.parametrize("code", [301, 302, 303, 307, 308])
@pytest.mark.parametrize("hops", [1, 2, 3])
@pytest.mark.parametrize(("policy", "rule"), [(NO_EVIL, "no-evil"), (ONLY_API, "default")])
def test_a_redirect_to_a_host_a_policy_denies_is_refused_at_that_hop(
    servers: dict[str, Server], dns: FakeDNS, code: int, hops: int, policy: dict[str, Any], rule: str
) -> None:
    """api.test redirects (through itself, ``hops`` times) to evil.test, which the tool's hosts allow and the
    policy denies: refused at the hop, before any connection to evil.test; the credential went to api.test only."""
    engine, tool = http_engine(servers, policy, headers={"Authorization": SecretStr(TOKEN)})
    target = url(servers, "evil", "/echo")
    for _ in range(hops):
        target = url(servers, "api", redirect(target, code))
    with engine:
        call = through_the_gate(engine, tool, {"method": "POST", "url": target, "body": "data"})
    assert call.error is not None and call.result is None
    assert (call.error["type"], call.error["rule"]) == ("PolicyDeniedError", rule), call.error
    assert "redirected" in call.error["message"] and "evil.test" in call.error["message"]
    assert servers["evil"].connections == 0 and servers["evil"].requests == []
    received = servers["api"].requests
    assert len(received) == hops and all(r["headers"]["Authorization"] == TOKEN for r in received)
    assert TOKEN not in json.dumps(call.model_dump(mode="json"))


def test_a_redirect_the_policy_allows_is_followed(servers: dict[str, Server], dns: FakeDNS) -> None:
    engine, tool = http_engine(servers, NO_EVIL)
    with engine:
        call = through_the_gate(
            engine,
            tool,
            {"method": "GET", "url": url(servers, "api", redirect(url(servers, "other", "/text")))},
        )
    assert call.result is not None and call.result["body"] == "hello"
    assert servers["other"].paths() == ["/text"]


def test_a_policy_still_judges_the_first_url(servers: dict[str, Server], dns: FakeDNS) -> None:
    engine, tool = http_engine(servers, NO_EVIL)
    with engine:
        call = through_the_gate(engine, tool, {"method": "GET", "url": url(servers, "evil", "/text")})
    assert call.error is not None and call.error["rule"] == "no-evil"
    assert servers["evil"].connections == 0


def received(server: Server) -> list[str | None]:
    """The Authorization header of each request ``server`` got (None: none sent)."""
    return [r["headers"].get("Authorization") for r in server.requests]


@pytest.mark.parametrize(
    ("headers", "start", "then", "expected"),
    [
        # set directly: the first request's origin only, never after a redirect elsewhere
        ({"Authorization": TOKEN}, "api", "other", {"api": [TOKEN], "other": [None]}),
        ({"Authorization": TOKEN}, "api", "api", {"api": [TOKEN, TOKEN], "other": []}),
        ({"Authorization": TOKEN}, "other", None, {"api": [], "other": [TOKEN]}),  # as before: a listed host
        # scoped to api.test: there, however the request got there, and nowhere else
        ({"api": {"Authorization": TOKEN}}, "other", None, {"api": [], "other": [None]}),
        ({"api": {"Authorization": TOKEN}}, "api", "other", {"api": [TOKEN], "other": [None]}),
        ({"api": {"Authorization": TOKEN}}, "other", "api", {"api": [TOKEN], "other": [None]}),
        (
            {"Authorization": "Bearer shared", "other": {"Authorization": TOKEN}},
            "api",
            "other",
            {"api": ["Bearer shared"], "other": [TOKEN]},
        ),
    ],
    ids=[
        "unscoped-cross",
        "unscoped-same",
        "unscoped-direct",
        "scoped-elsewhere",
        "scoped-away",
        "scoped-to",
        "both",
    ],
)
def test_configured_headers_go_to_their_host_only(
    servers: dict[str, Server],
    dns: FakeDNS,
    headers: dict[str, Any],
    start: str,
    then: str | None,
    expected: dict[str, list[str | None]],
) -> None:
    configured = {
        (f"{key}.test:{servers[key].port}" if key in servers else key): value
        for key, value in headers.items()
    }
    tool = HttpTool(granted=frozenset({"get"}), hosts=hosts(servers), headers=configured, timeout=5)
    address = url(servers, start, redirect(url(servers, then, "/echo")) if then else "/echo")
    result = tool.invoke(method="GET", url=address)
    assert result["status"] == 200 and TOKEN not in json.dumps(result)
    assert {name: received(servers[name]) for name in ("api", "other")} == expected
    assert servers["evil"].requests == []


def test_a_calls_own_credentials_stay_with_its_first_origin(servers: dict[str, Server], dns: FakeDNS) -> None:
    tool = HttpTool(granted=frozenset({"get"}), hosts=hosts(servers), timeout=5)
    own = {"Authorization": "Bearer mine", "Cookie": "session=1", "X-Trace": "kept"}
    tool.invoke(method="GET", url=url(servers, "api", redirect(url(servers, "other", "/echo"))), headers=own)
    first, second = servers["api"].requests[0]["headers"], servers["other"].requests[0]["headers"]
    assert (first["Authorization"], first["Cookie"], first["X-Trace"]) == ("Bearer mine", "session=1", "kept")
    assert "Authorization" not in second and "Cookie" not in second and second["X-Trace"] == "kept"


def test_no_credential_follows_https_to_http(
    servers: dict[str, Server], dns: FakeDNS, certificate: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    cert, key = certificate
    secure = Server("127.0.0.1", 0, Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    secure.socket = context.wrap_socket(secure.socket, server_side=True)
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    http_plugin._tls.cache_clear()
    try:
        listed = [*hosts(servers), f"tls.test:{secure.port}", f"127.0.0.1:{secure.port}"]
        api = f"api.test:{servers['api'].port}"
        variants: tuple[dict[str, Any], ...] = (
            {"Authorization": SecretStr(TOKEN)},  # unscoped: another origin anyway
            {f"tls.test:{secure.port}": {"Authorization": "Bearer tls"}, api: {"Authorization": TOKEN}},
        )
        for headers in variants:
            tool = HttpTool(granted=frozenset({"get"}), hosts=listed, headers=headers, timeout=5)
            down = f"https://tls.test:{secure.port}{redirect(url(servers, 'api', '/echo'))}"
            assert tool.invoke(method="GET", url=down)["status"] == 200
        assert [r["headers"].get("Authorization") for r in secure.requests] == [TOKEN, "Bearer tls"]
        assert received(servers["api"]) == [None, None]  # scoped to api.test, but not after a downgrade
    finally:
        http_plugin._tls.cache_clear()
        secure.close()
