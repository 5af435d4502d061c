"""The ``http`` tool against real servers on loopback: what it may reach, what it refuses, and its limits.

Nothing here is mocked except DNS (there is none in a test): an allowlisted server answers the legitimate
requests, and CANARY servers on other ports — IPv4, IPv6 and 127.0.0.2 — count every connection they accept. A
corpus of several hundred hostile URLs (every spelling of loopback, private and link-local addresses, parser
tricks, other schemes, names that resolve inward, redirects to each of them) must each end in a refusal — before
any connection, not after a failed one — and the canaries must count nothing.
"""

from __future__ import annotations

import contextlib
import http.server
import json
import re
import shutil
import socket
import socketserver
import ssl
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit

import pytest
from pydantic import SecretStr

import aeon_plugins.http as http_plugin
from aeon_kernel import ConfigError, Engine, ToolContext, ToolError
from aeon_kernel.config import parse_config
from aeon_kernel.invocation import invoke_tool
from aeon_kernel.kit import scrub_secrets
from aeon_kernel.models import ToolCall
from aeon_plugins.http import HttpTool

SECRET = "canary-secret-123456"
BOTH = frozenset({"get", "post"})
#: words of a ToolError raised after a connection was attempted: a hostile URL must be refused before that
REACHED = (
    "could not reach",
    "refused the connection",
    "no complete answer",
    "did not answer",
    "TLS connection",
    "certificate",
    "could not be resolved",
)


# --- servers -----------------------------------------------------------------------------------------------


class Server(http.server.ThreadingHTTPServer):
    """A real HTTP server in a thread that records every connection and request it gets."""

    daemon_threads = True

    def __init__(self, host: str, port: int, handler: type[http.server.BaseHTTPRequestHandler]) -> None:
        self.address_family = socket.AF_INET6 if ":" in host else socket.AF_INET
        super().__init__((host, port), handler)
        self.lock = threading.Lock()
        self.connections = 0
        self.requests: list[dict[str, Any]] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def server_bind(self) -> None:  # no getfqdn(): it may wait for a DNS server there is none of
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = str(self.server_address[0]), int(self.server_address[1])

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    def process_request(self, request: Any, client_address: Any) -> None:
        with self.lock:
            self.connections += 1
        super().process_request(request, client_address)

    def record(self, request: dict[str, Any]) -> None:
        with self.lock:
            self.requests.append(request)

    def paths(self) -> list[str]:
        with self.lock:
            return [r["path"] for r in self.requests]

    def close(self) -> None:
        self.stop.set()
        self.shutdown()
        self.server_close()


class Handler(http.server.BaseHTTPRequestHandler):
    """The allowlisted server's routes."""

    server: Server
    protocol_version = "HTTP/1.0"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self.serve()

    def do_POST(self) -> None:
        self.serve()

    def serve(self) -> None:
        url = urlsplit(self.path)
        query = {k: v[0] for k, v in parse_qs(url.query).items()}
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length).decode("utf-8", "replace") if length else ""
        received = {"method": self.command, "path": url.path, "headers": dict(self.headers), "body": body}
        self.server.record(received)
        route = url.path
        if route == "/text":
            self.answer(200, b"hello", "text/plain; charset=utf-8")
        elif route == "/json":
            self.answer(200, json.dumps({"answer": 42}).encode(), "application/json")
        elif route == "/latin1":
            self.answer(200, "café".encode("latin-1"), "text/plain; charset=ISO-8859-1")
        elif route == "/binary":
            self.answer(200, b"\xff\xfe\x00ok", "application/octet-stream; charset=base64")
        elif route == "/charset":  # UTF-8 bytes, under whatever charset the query names
            self.answer(200, "café \\u0041 ü".encode(), f"text/plain; charset={query.get('name', '')}")
        elif route == "/big":
            self.answer(200, b"x" * int(query.get("n", "0")), "text/plain")
        elif route == "/stream":  # no Content-Length: the body ends when the connection closes
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.end_headers()
            self.wfile.write(b"y" * int(query.get("n", "0")))
        elif route == "/echo":
            self.answer(200, json.dumps(received).encode(), "application/json")
        elif route == "/slow":
            self.server.stop.wait(5)
            self.answer(200, b"late", "text/plain")
        elif route == "/drip":  # a byte of headers at a time: each read is quick, the whole is endless
            self.wfile.write(b"HTTP/1.0 200 OK\r\n")
            while not self.server.stop.wait(0.05):
                try:
                    self.wfile.write(b"X")
                    self.wfile.flush()
                except OSError:
                    break
        elif route == "/badstatus":  # a broken status line that quotes the credential it was sent
            self.wfile.write(f"HTTP/1.1 xyz {self.headers.get('Authorization')}\r\n\r\n".encode())
        elif route == "/redirect":
            target = query.get("to", "/text")
            self.send_response(int(query.get("code", "302")))
            self.send_header("Location", target.encode("utf-8").decode("latin-1"))
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif route == "/loop":
            self.send_response(302)
            self.send_header("Location", "/loop")
            self.send_header("Content-Length", "0")
            self.end_headers()
        else:
            self.answer(404, b"no such route", "text/plain")

    def answer(self, status: int, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class CanaryHandler(Handler):
    """Answers anything with 200: a request that gets here was one the tool should have refused."""

    def serve(self) -> None:
        self.server.record({"method": self.command, "path": self.path, "headers": dict(self.headers)})
        self.answer(200, b"canary", "text/plain")

    def do_PUT(self) -> None:
        self.serve()


@pytest.fixture
def allowed() -> Iterator[Server]:
    server = Server("127.0.0.1", 0, Handler)
    yield server
    server.close()


@pytest.fixture
def canary() -> Iterator[Server]:
    server = Server("127.0.0.1", 0, CanaryHandler)
    yield server
    server.close()


@pytest.fixture
def canaries(canary: Server) -> Iterator[list[Server]]:
    """The IPv4 canary, and the same port on ::1 and 127.0.0.2 where they can be bound: every loopback
    address a hostile URL could mean for that port answers."""
    servers = [canary]
    for host in ("::1", "127.0.0.2"):
        with contextlib.suppress(OSError):
            servers.append(Server(host, canary.port, CanaryHandler))
    yield servers
    for server in servers[1:]:
        server.close()


class FakeDNS:
    """``socket.getaddrinfo`` for the tool's module: names from a table, each call recorded."""

    def __init__(self) -> None:
        self.table: dict[str, Callable[[], list[str]]] = {}
        self.calls: list[str] = []

    def add(self, name: str, *addresses: str) -> None:
        self.table[name] = lambda: list(addresses)

    def __call__(self, host: Any, port: Any, *args: Any, **kwargs: Any) -> list[tuple[Any, ...]]:
        self.calls.append(str(host))
        if host not in self.table:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        found: list[tuple[Any, ...]] = []
        for address in self.table[host]():
            if ":" in address:
                found.append((socket.AF_INET6, socket.SOCK_STREAM, 6, "", (address, port, 0, 0)))
            else:
                found.append((socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, port)))
        return found


@pytest.fixture
def dns(monkeypatch: pytest.MonkeyPatch) -> FakeDNS:
    fake = FakeDNS()
    # where resolve() looks it up: aeon_plugins.http.connection's socket, the same module as socket's
    monkeypatch.setattr("aeon_plugins.http.connection.socket.getaddrinfo", fake)
    return fake


def kernel_call(tool: HttpTool, arguments: dict[str, Any]) -> ToolCall:
    return invoke_tool(tool, arguments, ToolContext("run", "step"))


def get(tool: HttpTool, url: str, **arguments: Any) -> dict[str, Any]:
    return tool.invoke(method="GET", url=url, **arguments)


# --- the SSRF corpus ---------------------------------------------------------------------------------------

#: host spellings that mean this machine, a private network or a metadata service
HOSTILE_HOSTS = [
    # loopback, canonical and in the forms inet_aton and browsers read
    "127.0.0.1",
    "127.0.0.2",
    "127.255.255.254",
    "127.1",
    "127.0.1",
    "127.000.000.001",
    "127.0.0.01",
    "2130706433",
    "017700000001",
    "0x7f000001",
    "0x7F000001",
    "0x7f.0.0.1",
    "0x7f.1",
    "0177.0.0.1",
    "0177.1",
    "0177.0000.0000.0001",
    "127.0.0.1.",
    "127.0.0.1..",
    "1.2.3.4.127.0.0.1",
    "0",
    "0x",
    "0.0.0.0",
    "0x0.0x0.0x0.0x0",
    "00000000",
    "localhost",
    "LOCALHOST",
    "LOCALHOST.",
    "localhost.",
    "LocalHost",
    "foo.localhost",
    "localhost.localdomain",
    "ⓛⓞⓒⓐⓛⓗⓞⓢⓣ",
    "".join(chr(ord(char) + 0xFEE0) for char in "127.0.0.1"),  # fullwidth digits and full stops
    "127\u30020\u30020\u30021",  # ideographic full stops
    "".join(chr(ord(char) + 0xFEE0) if char.isdigit() else char for char in "127.0.0.1"),
    "[::1]",
    "[0:0:0:0:0:0:0:1]",
    "[0000:0000:0000:0000:0000:0000:0000:0001]",
    "[::ffff:127.0.0.1]",
    "[::ffff:7f00:1]",
    "[0:0:0:0:0:ffff:127.0.0.1]",
    "[::ffff:0:127.0.0.1]",
    "[::127.0.0.1]",
    "[::7f00:1]",
    "[64:ff9b::127.0.0.1]",
    "[64:ff9b::7f00:1]",
    "[2002:7f00:1::]",
    "[::]",
    "[0::0]",
    "[::ffff:0.0.0.0]",
    "[fe80::1]",
    "[fe80::1%25lo]",
    "[fe80::1%lo]",
    "[fc00::1]",
    "[fd00::1]",
    "[fec0::1]",
    "[ff02::1]",
    "[::ffff:169.254.169.254]",
    "[::ffff:a9fe:a9fe]",
    "[::ffff:10.0.0.1]",
    "::1",
    "[::1",
    "::1]",
    # link-local, the cloud metadata service, private, shared, reserved, multicast, broadcast
    "169.254.169.254",
    "169.254.0.1",
    "2852039166",
    "0xa9fea9fe",
    "0251.0376.0251.0376",
    "169.254.43518",
    "metadata.google.internal",
    "metadata",
    "instance-data",
    "10.0.0.1",
    "10.1",
    "012.0.0.1",
    "192.168.1.1",
    "192.168.0.1",
    "3232235777",
    "172.16.0.1",
    "172.31.255.255",
    "100.64.0.1",
    "198.18.0.1",
    "192.0.0.1",
    "192.0.2.1",
    "224.0.0.1",
    "239.255.255.250",
    "240.0.0.1",
    "255.255.255.255",
    # percent-encoded and otherwise escaped hosts
    "%31%32%37.0.0.1",
    "127%2E0%2E0%2E1",
    "%6c%6f%63%61%6c%68%6f%73%74",
    "127.0.0.1%00",
    "127.0.0.1%2f",
    "[::1%5d",
    # names: not listed (never looked up), and listed ones that resolve inward (looked up, then refused)
    "rebind.test",
    "rebind.test.",
    "REBIND.TEST",
    "127.0.0.1.nip.io",
    "api.test",
    "API.TEST.",
    "v6.test",
    "mapped.test",
    "meta.test",
    "mixed.test",
    "zero.test",
    "private.test",
    "nat64.test",
    "sixtofour.test",
    "compat.test",
    "cgnat.test",
    "multicast.test",
    "sitelocal.test",
]

#: listed names (at the canary's port and the default ports) and what they resolve to
INWARD_NAMES = {
    "api.test": ["127.0.0.1"],
    "v6.test": ["::1"],
    "mapped.test": ["::ffff:127.0.0.1"],
    "meta.test": ["169.254.169.254"],
    "mixed.test": ["93.184.215.14", "127.0.0.1"],
    "zero.test": ["0.0.0.0"],
    "private.test": ["10.0.0.1"],
    "nat64.test": ["64:ff9b::7f00:1"],
    "sixtofour.test": ["2002:7f00:1::"],
    "compat.test": ["::7f00:1"],
    "cgnat.test": ["100.64.0.1"],
    "multicast.test": ["224.0.0.1"],
    "sitelocal.test": ["fec0::1"],
}


def hostile_urls(a: int, c: int) -> list[str]:
    """URLs aimed at the canary's port ``c`` (or a default port) that must be refused; ``a`` is the allowed
    server's port, which some tricks borrow."""
    urls = []
    for host in HOSTILE_HOSTS:
        for scheme in ("http", "https"):
            urls += [f"{scheme}://{host}:{c}/", f"{scheme}://{host}/"]
    urls += [
        # userinfo: the part before @ is not the host
        f"http://allowed@127.0.0.1:{c}/",
        f"http://127.0.0.1:{a}@127.0.0.1:{c}/",
        f"http://127.0.0.1:{a}:@127.0.0.1:{c}/",
        f"http://user:pass@127.0.0.1:{a}/",
        f"http://@127.0.0.1:{a}/",
        f"http://127.0.0.1:{a}%40127.0.0.1:{c}/",
        f"http://127.0.0.1:{a}%2f@127.0.0.1:{c}/",
        f"http://[::1]:{a}@127.0.0.1:{c}/",
        f"http://127.0.0.1:{c}@127.0.0.1:{a}/",
        # backslashes (WHATWG reads them as slashes in http URLs)
        f"http://127.0.0.1:{a}\\@127.0.0.1:{c}/",
        f"http://127.0.0.1:{c}\\@127.0.0.1:{a}/",
        f"http:\\\\127.0.0.1:{c}/",
        f"http:/\\127.0.0.1:{c}/",
        f"http://127.0.0.1:{a}\\.127.0.0.1:{c}/",
        f"http://127.0.0.1:{a}/\\..\\",
        # whitespace and control characters (urlsplit drops tabs and newlines without a word)
        f"http://127.0.0.1\t:{c}/",
        f"http://127.0.0.\n1:{c}/",
        f"http://127.0.0.1:{c}\r/",
        f"http://127.0.0.1:{a}/\r\nHost: 127.0.0.1:{c}",
        f"http://127.0.0.1:{a}/ HTTP/1.1\r\nX: y",
        f"http://127.0.0.1:{a} /",
        f" http://127.0.0.1:{c}/",
        f"\x00http://127.0.0.1:{a}/",
        f"http://127.0.0.1:{a}/\x00",
        f"http://127.0.0.1:{a}/\u2028",
        f"http://127.0.0.1:{a}/\u200b",
        f"http://127.0.0.1\u200b:{c}/",
        # ports: out of range, wrapped, signed, padded, doubled
        f"http://127.0.0.1:{c + 65536}/",
        f"http://127.0.0.1:{a}:{c}/",
        f"http://127.0.0.1:+{c}/",
        f"http://127.0.0.1:-{c}/",
        f"http://127.0.0.1:{c}.0/",
        f"http://127.0.0.1:0x{c:x}/",
        "http://127.0.0.1:0/",
        f"http://127.0.0.1:{a}0000/",
        # other schemes, and URLs without a scheme or a host
        "file:///etc/passwd",
        "file://localhost/etc/passwd",
        f"ftp://127.0.0.1:{c}/",
        f"gopher://127.0.0.1:{c}/_GET%20/%20HTTP/1.0",
        f"dict://127.0.0.1:{c}/info",
        f"ldap://127.0.0.1:{c}/",
        f"ws://127.0.0.1:{c}/",
        f"jar:http://127.0.0.1:{c}/x.jar!/",
        "data:text/plain,hello",
        "javascript:alert(1)",
        f"//127.0.0.1:{c}/",
        f"127.0.0.1:{c}",
        f"http:127.0.0.1:{c}/",
        f"http:/127.0.0.1:{c}/",
        f"http:///127.0.0.1:{c}/",
        f"https:127.0.0.1:{c}/",
        "http://",
        "http:///",
        "",
        "x" * 3000,
        f"http://127.0.0.1:{a}/" + "x" * 2100,
    ]
    return urls


def parser_confusions(a: int, c: int) -> list[str]:
    """URLs that some parser reads as the canary and this one as the allowed server: either outcome is
    acceptable (refused, or answered by the allowed server), the canary never."""
    return [
        f"http://127.0.0.1:{a}#@127.0.0.1:{c}/",
        f"http://127.0.0.1:{a}?@127.0.0.1:{c}/",
        f"http://127.0.0.1:{a}/@127.0.0.1:{c}/",
        f"http://127.0.0.1:{a}/..;/127.0.0.1:{c}",
        f"http://127.0.0.1:{a}/%2F%2F127.0.0.1:{c}",
        f"http://127.0.0.1:{a}//127.0.0.1:{c}/",
        f"http://127.0.0.1:{a}/redirect?to=%2F%2F127.0.0.1%3A{c}%2F&code=999",
        f"HTTP://127.0.0.1:{a}/",
        f"http://127.0.0.1.:{a}/",
        f"http://[::ffff:127.0.0.1]:{a}/",
        f"http://127.0.0.1:0{a}/",
        # relative references a browser may read as another host: urljoin keeps them on the redirecting one
        *(
            f"http://127.0.0.1:{a}/redirect?to={quote(target, safe='')}"
            for target in (
                f"http:127.0.0.1:{c}/",
                f"http:/127.0.0.1:{c}/",
                f"http:///127.0.0.1:{c}/",
                f"127.0.0.1:{c}",
                "http:///",
                f"/..//127.0.0.1:{c}/",
            )
        ),
    ]


def redirect_urls(a: int, c: int) -> list[str]:
    """The allowlisted server redirecting to each hostile URL in turn (every redirect status in rotation), and
    to relative forms that land elsewhere."""
    codes = (301, 302, 303, 307, 308)
    targets = [
        u
        for u in hostile_urls(a, c)
        if "://" in u and not u.startswith(("http:///", "https:///")) and u.isprintable() and len(u) < 1000
    ]
    targets += [f"//127.0.0.1:{c}/", f"//localhost:{c}/", f"/\\127.0.0.1:{c}/", f"\\\\127.0.0.1:{c}/"]
    return [
        f"http://127.0.0.1:{a}/redirect?code={codes[i % len(codes)]}&to={quote(target, safe='')}"
        for i, target in enumerate(targets)
    ]


def refusal_problem(tool: HttpTool, arguments: dict[str, Any]) -> str | None:
    """None when the call raised a ToolError that refused the URL before any connection; else what it did."""
    try:
        result = tool.invoke(**arguments)
    except ToolError as exc:
        message = str(exc)
        if message.startswith(("no complete answer", "could not")) or any(w in message for w in REACHED):
            return f"failed after connecting: {message}"
        return None
    except Exception as exc:
        return f"raised {type(exc).__name__}: {exc}"
    return f"answered {result!r:.100}"


def record_problem(call: ToolCall) -> str | None:
    if call.error is None:
        return f"answered {call.result!r:.100}"
    message = call.error["message"]
    if any(w in message for w in REACHED):
        return f"failed after connecting: {message}"
    return None


def test_ssrf_corpus_never_reaches_a_canary(allowed: Server, canaries: list[Server], dns: FakeDNS) -> None:
    a, c = allowed.port, canaries[0].port
    dns.add("rebind.test", "127.0.0.1")
    dns.add("127.0.0.1.nip.io", "127.0.0.1")
    for name, addresses in INWARD_NAMES.items():
        dns.add(name, *addresses)
    listed = [f"127.0.0.1:{a}", *(f"{n}:{c}" for n in INWARD_NAMES), *INWARD_NAMES]
    tool = HttpTool(granted=BOTH, hosts=listed, timeout=2, max_redirects=2)
    direct = hostile_urls(a, c)
    redirects = redirect_urls(a, c)

    offenders = []
    for url in direct + redirects:
        for how, problem in (
            ("invoke", refusal_problem(tool, {"method": "GET", "url": url})),
            ("kernel", record_problem(kernel_call(tool, {"method": "GET", "url": url}))),
            ("POST", refusal_problem(tool, {"method": "POST", "url": url, "body": "{}"})),
        ):
            if problem is not None:
                offenders.append(f"{how} {url!r}: {problem}")
    confusions = parser_confusions(a, c)
    for url in confusions:
        with contextlib.suppress(ToolError):
            assert get(tool, url)["body"] != "canary"

    cases = len(direct) + len(redirects) + len(confusions)
    assert not offenders, (
        f"{len(offenders)} of {3 * (cases - len(confusions))} hostile calls were not refused:\n"
        + ("\n".join(offenders))
    )
    assert cases >= 500
    assert [server.connections for server in canaries] == [0] * len(canaries), [s.requests for s in canaries]
    # names are looked up only when listed; unlisted ones (rebind.test) are refused without asking DNS
    assert set(dns.calls) <= set(INWARD_NAMES), set(dns.calls) - set(INWARD_NAMES)
    assert set(dns.calls) == set(INWARD_NAMES)
    # the allowlisted server answered each redirect's first request (three times: invoke, kernel, POST)
    assert allowed.paths().count("/redirect") >= 3 * len(redirects) - 10
    assert get(tool, f"http://127.0.0.1:{a}/text")["body"] == "hello"
    assert allowed.paths()[-1] == "/text"


def test_a_listed_name_resolving_inward_is_refused_and_named(canary: Server, dns: FakeDNS) -> None:
    dns.add("api.test", "127.0.0.1")
    tool = HttpTool(granted=BOTH, hosts=[f"api.test:{canary.port}"])
    with pytest.raises(ToolError) as info:
        get(tool, f"http://api.test:{canary.port}/")
    message = str(info.value)
    assert "api.test resolves to 127.0.0.1, a loopback address" in message
    assert f'add "127.0.0.1:{canary.port}" to hosts in [tools.http]' in message
    assert canary.connections == 0


def test_the_checked_address_is_the_one_connected_to(allowed: Server, dns: FakeDNS) -> None:
    """DNS rebinding: flip.test answers 127.0.0.1 (listed) first and 127.0.0.2 after. The tool asks once per
    request and connects to what it checked; a canary on 127.0.0.2 at the same port would catch a second look."""
    try:
        rebound = Server("127.0.0.2", allowed.port, CanaryHandler)
    except OSError:
        pytest.skip("127.0.0.2 cannot be bound here")
    answers = iter([["127.0.0.1"]])
    dns.table["flip.test"] = lambda: next(answers, ["127.0.0.2"])
    try:
        tool = HttpTool(granted=BOTH, hosts=[f"flip.test:{allowed.port}", f"127.0.0.1:{allowed.port}"])
        result = get(tool, f"http://flip.test:{allowed.port}/echo")
        assert rebound.connections == 0
        assert result["status"] == 200
        assert json.loads(result["body"])["headers"]["Host"] == f"flip.test:{allowed.port}"
        assert dns.calls == ["flip.test"]  # once for the request, none when connecting
        with pytest.raises(ToolError, match=re.escape("flip.test resolves to 127.0.0.2")):
            get(tool, f"http://flip.test:{allowed.port}/echo")  # the next request looks again, and refuses
        assert dns.calls == ["flip.test", "flip.test"]
        assert rebound.connections == 0
    finally:
        rebound.close()


def test_redirects_are_followed_within_the_allowlist_only(allowed: Server, canary: Server) -> None:
    a = allowed.port
    tool = HttpTool(granted=BOTH, hosts=[f"127.0.0.1:{a}", f"localhost:{a}"])
    result = get(tool, f"http://127.0.0.1:{a}/redirect?to=/json")
    assert (result["status"], result["url"]) == (200, f"http://127.0.0.1:{a}/json")
    result = get(tool, f"http://127.0.0.1:{a}/redirect?to={quote(f'http://localhost:{a}/text')}")
    assert (result["body"], result["url"]) == ("hello", f"http://localhost:{a}/text")
    target = quote(f"http://127.0.0.1:{canary.port}/", safe="")
    with pytest.raises(ToolError) as info:
        get(tool, f"http://127.0.0.1:{a}/redirect?code=307&to={target}")
    assert f"redirected (307) to http://127.0.0.1:{canary.port}/, which was not requested" in str(info.value)
    assert f'add "127.0.0.1:{canary.port}" to hosts in [tools.http]' in str(info.value)
    assert canary.connections == 0


def test_redirect_methods(allowed: Server) -> None:
    a = allowed.port
    tool = HttpTool(granted=BOTH, hosts=[f"127.0.0.1:{a}"])
    for code, method, body in (
        (303, "GET", ""),
        (302, "GET", ""),
        (307, "POST", "data"),
        (308, "POST", "data"),
    ):
        result = tool.invoke(
            method="POST", url=f"http://127.0.0.1:{a}/redirect?code={code}&to=/echo", body="data"
        )
        echoed = json.loads(result["body"])
        assert (echoed["method"], echoed["body"]) == (method, body), code
    only_post = HttpTool(granted=frozenset({"post"}), hosts=[f"127.0.0.1:{a}"])
    with pytest.raises(ToolError, match=re.escape('add "get" to grant in [tools.http]')):
        only_post.invoke(method="POST", url=f"http://127.0.0.1:{a}/redirect?code=303&to=/echo", body="x")


def test_a_redirect_loop_ends_after_max_redirects(allowed: Server) -> None:
    tool = HttpTool(granted=BOTH, hosts=[f"127.0.0.1:{allowed.port}"], max_redirects=3)
    with pytest.raises(ToolError, match="redirected more than max_redirects = 3 times"):
        get(tool, f"http://127.0.0.1:{allowed.port}/loop")
    assert allowed.paths() == ["/loop"] * 4


# --- legitimate requests -----------------------------------------------------------------------------------


def test_get_and_post_reach_the_allowlisted_server(allowed: Server) -> None:
    a = allowed.port
    tool = HttpTool(granted=BOTH, hosts=[f"127.0.0.1:{a}"])
    text = get(tool, f"http://127.0.0.1:{a}/text#fragment")
    assert text == {
        "status": 200,
        "url": f"http://127.0.0.1:{a}/text",
        "content_type": "text/plain; charset=utf-8",
        "body": "hello",
        "bytes": 5,
    }
    assert tool.validate_output(text)
    assert json.loads(get(tool, f"http://127.0.0.1:{a}/json")["body"]) == {"answer": 42}
    assert get(tool, f"http://127.0.0.1:{a}/latin1")["body"] == "café"
    assert get(tool, f"http://127.0.0.1:{a}/binary")["body"] == "\ufffd\ufffd\x00ok"
    assert get(tool, f"http://127.0.0.1:{a}/missing")["status"] == 404
    posted = tool.invoke(method="POST", url=f"http://127.0.0.1:{a}/echo", body='{"q": "é"}')
    echoed = json.loads(posted["body"])
    assert (echoed["method"], echoed["body"]) == ("POST", '{"q": "é"}')
    assert echoed["headers"]["Content-Type"] == "application/json"
    assert echoed["headers"]["Host"] == f"127.0.0.1:{a}"
    custom = get(tool, f"http://127.0.0.1:{a}/echo?x=1", headers={"Accept": "text/csv", "X-Trace": "abc"})
    assert json.loads(custom["body"])["headers"]["X-Trace"] == "abc"
    assert allowed.paths() == ["/text", "/json", "/latin1", "/binary", "/missing", "/echo", "/echo"]


@pytest.mark.parametrize(
    ("charset", "body"),
    [
        # Python knows them, but they are no charset a body is in: UTF-8 instead
        ("idna", "café \\u0041 ü"),
        ("IDNA", "café \\u0041 ü"),
        ("punycode", "café \\u0041 ü"),
        ("unicode_escape", "café \\u0041 ü"),  # would read the backslash escape
        ("raw-unicode-escape", "café \\u0041 ü"),
        ("undefined", "café \\u0041 ü"),
        ("base64", "café \\u0041 ü"),
        ("rot13", "café \\u0041 ü"),
        ("hex", "café \\u0041 ü"),
        ("x-no-such-charset", "café \\u0041 ü"),
        # real charsets are still honoured
        ("utf-8", "café \\u0041 ü"),
        ("latin-1", "cafÃ© \\u0041 Ã¼"),
        ("ascii", "caf\ufffd\ufffd \\u0041 \ufffd\ufffd"),
    ],
)
def test_a_charset_that_is_not_a_text_encoding_falls_back_to_utf8(
    allowed: Server, charset: str, body: str
) -> None:
    tool = HttpTool(granted=BOTH, hosts=[f"127.0.0.1:{allowed.port}"])
    result = get(tool, f"http://127.0.0.1:{allowed.port}/charset?name={charset}")
    assert (result["status"], result["body"]) == (200, body)
    assert result["content_type"] == f"text/plain; charset={charset}"


def test_localhost_listed_means_loopback(allowed: Server) -> None:
    a = allowed.port
    tool = HttpTool(granted=BOTH, hosts=[f"localhost:{a}"])
    for url in (f"http://localhost:{a}/text", f"http://LOCALHOST.:{a}/text", f"http://127.0.0.1:{a}/text"):
        assert get(tool, url)["body"] == "hello", url
    with pytest.raises(ToolError, match="not on the allowlist"):
        get(tool, f"http://127.0.0.1:{a + 1 if a < 65535 else a - 1}/text")


def test_engine_builds_the_tool_only_when_granted(
    allowed: Server, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    with Engine(parse_config({}), plugins=[http_plugin]) as engine:
        assert "http" not in [t.name for t in engine.tools]  # nothing granted: no network at all
    hosts = [f"127.0.0.1:{allowed.port}"]
    unusable = parse_config({"tools": {"http": {"hosts": hosts}}})
    with Engine(unusable, plugins=[http_plugin]) as engine, pytest.raises(ConfigError, match="add grant"):
        _ = engine.tools
    monkeypatch.setenv("AEON_TEST_HTTP_TOKEN", f"Bearer {SECRET}\n")
    options = {
        "grant": ["get"],
        "hosts": hosts,
        "timeout": 2,
        "headers": {"Authorization": {"$env": "AEON_TEST_HTTP_TOKEN"}},
    }
    with Engine(parse_config({"tools": {"http": options}}), plugins=[http_plugin]) as engine:
        tool = engine.tools.get("http")
        assert isinstance(tool, HttpTool)
        assert tool.input_schema["properties"]["method"] == {"enum": ["GET"]}
        call = kernel_call(tool, {"method": "GET", "url": f"http://127.0.0.1:{allowed.port}/echo"})
        assert call.error is None and call.result is not None
        assert call.result["status"] == 200
        assert SECRET not in json.dumps(call.result)
        denied = kernel_call(
            tool, {"method": "POST", "url": f"http://127.0.0.1:{allowed.port}/echo", "body": "x"}
        )
        assert denied.result is None and denied.error is not None
        assert denied.error["type"] == "PermissionDeniedError"
    assert allowed.requests[-1]["headers"]["Authorization"] == f"Bearer {SECRET}"
    assert [r["method"] for r in allowed.requests] == ["GET"]  # the POST never left


# --- limits ------------------------------------------------------------------------------------------------


def test_response_size_limit(allowed: Server) -> None:
    a = allowed.port
    tool = HttpTool(granted=BOTH, hosts=[f"127.0.0.1:{a}"], max_response_bytes=1000)
    assert get(tool, f"http://127.0.0.1:{a}/big?n=1000")["bytes"] == 1000
    with pytest.raises(ToolError, match="1,001 bytes, more than max_response_bytes = 1,000"):
        get(tool, f"http://127.0.0.1:{a}/big?n=1001")
    assert get(tool, f"http://127.0.0.1:{a}/stream?n=1000")["bytes"] == 1000
    with pytest.raises(ToolError, match="more than max_response_bytes = 1,000 allows"):
        get(tool, f"http://127.0.0.1:{a}/stream?n=5000000")


@pytest.mark.parametrize("route", ["/slow", "/drip"])
def test_a_stalling_server_is_cut_off_at_the_timeout(allowed: Server, route: str) -> None:
    tool = HttpTool(granted=BOTH, hosts=[f"127.0.0.1:{allowed.port}"], timeout=0.5)
    started = time.monotonic()
    with pytest.raises(ToolError, match=re.escape("within timeout = 0.5 s; raise timeout in [tools.http]")):
        get(tool, f"http://127.0.0.1:{allowed.port}{route}")
    assert time.monotonic() - started < 1.5


def test_the_kernel_records_the_tools_own_timeout_message(allowed: Server) -> None:
    tool = HttpTool(granted=BOTH, hosts=[f"127.0.0.1:{allowed.port}"], timeout=0.5)
    started = time.monotonic()
    call = kernel_call(tool, {"method": "GET", "url": f"http://127.0.0.1:{allowed.port}/drip"})
    assert time.monotonic() - started < 1.5
    assert call.error is not None and call.error["type"] == "ToolError", call.error
    assert "raise timeout in [tools.http]" in call.error["message"]


def test_a_tls_handshake_that_stalls_is_cut_off(allowed: Server) -> None:
    """https to a plain HTTP server that never answers a TLS hello in time: the deadline ends the handshake."""
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen()
    try:
        port = silent.getsockname()[1]
        tool = HttpTool(granted=BOTH, hosts=[f"127.0.0.1:{port}"], timeout=0.5)
        started = time.monotonic()
        with pytest.raises(ToolError, match=re.escape("timeout = 0.5 s")):
            get(tool, f"https://127.0.0.1:{port}/")
        assert time.monotonic() - started < 1.5
    finally:
        silent.close()
    tool = HttpTool(granted=BOTH, hosts=[f"127.0.0.1:{allowed.port}"], timeout=2)
    with pytest.raises(ToolError, match=re.escape("TLS connection to 127.0.0.1")):
        get(tool, f"https://127.0.0.1:{allowed.port}/text")  # the server speaks plain HTTP


@pytest.fixture
def certificate(tmp_path: Path) -> tuple[Path, Path]:
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
         "-keyout", str(key), "-out", str(cert), "-days", "1", "-subj", "/CN=tls.test",
         "-addext", "subjectAltName=DNS:tls.test"],
        check=True,
        capture_output=True,
    )  # fmt: skip
    return cert, key


def test_https_checks_the_certificate_against_the_name_not_the_pinned_address(
    allowed: Server, certificate: tuple[Path, Path], dns: FakeDNS, monkeypatch: pytest.MonkeyPatch
) -> None:
    cert, key = certificate
    server = Server("127.0.0.1", 0, Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    names: list[str | None] = []
    context.sni_callback = lambda _socket, name, _context: names.append(name)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    dns.add("tls.test", "127.0.0.1")
    dns.add("other.test", "127.0.0.1")
    port = server.port
    hosts = [f"tls.test:{port}", f"other.test:{port}", f"127.0.0.1:{port}"]
    try:
        tool = HttpTool(granted=BOTH, hosts=hosts, timeout=2)
        with pytest.raises(ToolError, match=r"certificate of tls\.test:\d+ could not be verified"):
            get(tool, f"https://tls.test:{port}/text")  # self-signed: not trusted by default
        monkeypatch.setenv("SSL_CERT_FILE", str(cert))
        http_plugin._tls.cache_clear()
        result = get(tool, f"https://tls.test:{port}/echo")
        assert json.loads(result["body"])["headers"]["Host"] == f"tls.test:{port}"
        assert names[-1] == "tls.test"
        for url in (f"https://other.test:{port}/text", f"https://127.0.0.1:{port}/text"):
            with pytest.raises(ToolError, match="could not be verified"):
                get(tool, url)  # the same server and address, but not the certificate's name
    finally:
        http_plugin._tls.cache_clear()
        server.close()


# --- secrets -----------------------------------------------------------------------------------------------


def test_a_secret_header_is_sent_and_never_shown(allowed: Server, canary: Server) -> None:
    a = allowed.port
    tool = HttpTool(
        granted=BOTH,
        hosts=[f"127.0.0.1:{a}"],
        headers={"Authorization": SecretStr(SECRET), "X-Api-Key": "plain-key-0123456789", "X-Client": "aeon"},
        timeout=0.5,
    )
    echoed = get(tool, f"http://127.0.0.1:{a}/echo")
    received = allowed.requests[-1]["headers"]
    assert (received["Authorization"], received["X-Api-Key"], received["X-Client"]) == (
        SECRET,
        "plain-key-0123456789",
        "aeon",
    )
    assert SECRET not in json.dumps(echoed) and "plain-key-0123456789" not in json.dumps(echoed)
    assert json.loads(echoed["body"])["headers"]["Authorization"] == "***"
    assert scrub_secrets(SECRET) == "***"  # registered with the kernel's scrubbers when the tool was built
    messages = []
    for url in (
        f"http://127.0.0.1:{a}/badstatus",  # the server quotes it back in a broken status line
        f"http://127.0.0.1:{canary.port}/{SECRET}",  # refused, with the secret in the URL
        f"http://127.0.0.1:{a}/slow",
        f"http://127.0.0.1:{a}/redirect?to={quote(f'http://127.0.0.1:{canary.port}/{SECRET}', safe='')}",
    ):
        with pytest.raises(ToolError) as info:
            get(tool, url)
        messages.append(str(info.value))
        record = kernel_call(tool, {"method": "GET", "url": url})
        assert record.error is not None
        messages.append(json.dumps(record.error))
    with pytest.raises(ToolError) as info:
        get(tool, f"http://127.0.0.1:{a}/echo", headers={"Authorization": "mine"})
    messages.append(str(info.value))
    assert "was not requested" in messages[6]
    for text in (
        *messages,
        repr(tool),
        str(tool),
        tool.model_dump_json(),
        repr(tool.model_dump()),
        str(tool.describe()),
    ):
        assert SECRET not in text and "plain-key-0123456789" not in text, text
    assert "headers" not in tool.model_dump()
    assert canary.connections == 0


# --- arguments and options ---------------------------------------------------------------------------------


def test_arguments_that_are_refused_before_sending(allowed: Server) -> None:
    a = allowed.port
    tool = HttpTool(granted=BOTH, hosts=[f"127.0.0.1:{a}"], headers={"X-Team": "core"})
    url = f"http://127.0.0.1:{a}/echo"
    for arguments, problem in (
        ({"method": "GET", "url": url, "body": "x"}, "has no body"),
        ({"method": "DELETE", "url": url}, "method must be one of GET, POST"),
        ({"method": "GET", "url": url, "headers": {"Host": "127.0.0.1:1"}}, "set by the tool itself"),
        ({"method": "GET", "url": url, "headers": {"content-length": "5"}}, "set by the tool itself"),
        (
            {"method": "GET", "url": url, "headers": {"Transfer-Encoding": "chunked"}},
            "set by the tool itself",
        ),
        ({"method": "GET", "url": url, "headers": {"Connection": "keep-alive"}}, "set by the tool itself"),
        ({"method": "GET", "url": url, "headers": {"x-team": "other"}}, "configured in \\[tools.http\\]"),
        ({"method": "GET", "url": url, "headers": {"X-A": "b\r\nHost: evil"}}, "printable ASCII"),
        ({"method": "GET", "url": url, "headers": {"Bad Name": "b"}}, "not a valid header name"),
        ({"method": "GET", "url": url, "headers": {f"X-{i}": "v" for i in range(17)}}, "at most 16 headers"),
        ({"method": "POST", "url": url, "body": "\ud800"}, "lone surrogate"),
    ):
        with pytest.raises(ToolError, match=problem):
            tool.invoke(**arguments)
    only_get = HttpTool(granted=frozenset({"get"}), hosts=[f"127.0.0.1:{a}"])
    with pytest.raises(ToolError, match='add "post" to grant'):
        only_get.invoke(method="POST", url=url, body="x")
    assert allowed.requests == []


def test_schemas_and_resources() -> None:
    assert HttpTool(granted=frozenset({"get"}), hosts=["a.test"]).input_schema["properties"]["method"] == {
        "enum": ["GET"]
    }
    both = HttpTool(granted=BOTH, hosts=["a.test"])
    assert both.input_schema["properties"]["method"] == {"enum": ["GET", "POST"]}
    assert both.input_schema["additionalProperties"] is False
    assert both.output_schema["additionalProperties"] is False
    assert both.validate_input(**(both.example or {}))
    assert "Allowed hosts: a.test." in both.description
    assert both.required_permissions({"method": "POST", "url": "x"}) == {"post"}
    assert both.resources({"method": "GET", "url": "HTTPS://API.Example.COM./x"}) == {
        "host": ["api.example.com"],
        "url": ["HTTPS://API.Example.COM./x"],
    }
    assert both.resources({"method": "GET", "url": "http://2130706433/"})["host"] == ["2130706433"]
    assert HttpTool().granted == frozenset()  # built, but the engine never registers it ungranted


@pytest.mark.parametrize(
    ("hosts", "problem"),
    [
        ([], "needs an allowlist"),
        (["https://api.example.com"], "list hosts, not URLs"),
        (["api.example.com:99999"], "outside 1 to 65535"),
        (["api.example.com:http"], "does not end in a port"),
        (["2130706433"], "not a canonical IPv4 address"),
        (["0.0.0.0"], "not an address a request can go to"),
        (["[::]:80"], "not an address a request can go to"),
        (["10.0.0.0/33"], "not a host, an address or a network"),
        (["bad host"], "not a valid host name"),
        ([""], "each entry is a host name or address"),
    ],
)
def test_unusable_hosts_are_config_errors(hosts: list[str], problem: str) -> None:
    with pytest.raises(ConfigError, match=problem):
        HttpTool(granted=BOTH, hosts=hosts)


@pytest.mark.parametrize(
    "host", ["127.1", "2130706433", "0x7f000001", "0177.0.0.1", "127.0.0.01", "0", "1.2.3.4.5", "example.0x1"]
)
def test_numbers_that_are_not_canonical_addresses_are_refused(host: str) -> None:
    tool = HttpTool(granted=BOTH, hosts=[host.replace(".", "-") + ".test"])
    with pytest.raises(ToolError, match="is a number but not a canonical IPv4 address"):
        get(tool, f"http://{host}/")


def test_allowlist_entries() -> None:
    tool = HttpTool(
        granted=BOTH,
        hosts=[
            "Example.COM.",
            "api.test:8443",
            "10.1.2.3:8080",
            "[::1]:9000",
            "192.168.0.0/24",
            "bücher.test",
        ],
    )
    allowed = (
        "http://example.com/",
        "https://EXAMPLE.com./",
        "https://example.com:443/",
        "https://api.test:8443/",
        "http://api.test:8443/",
        "http://10.1.2.3:8080/",
        "http://[::1]:9000/",
        "http://[0:0:0:0:0:0:0:1]:9000/",
        "http://192.168.0.77/",
        "http://bücher.test/",
        "http://xn--bcher-kva.test/",
    )
    for url in allowed:
        tool._allowed(http_plugin.parse_url(url))
    refused = (
        "http://example.com:8080/",
        "https://example.com:80/",
        "http://www.example.com/",
        "https://api.test/",
        "http://10.1.2.3/",
        "http://10.1.2.4:8080/",
        "http://[::1]/",
        "http://192.168.1.1/",
        "http://192.168.0.77:8080/",
    )
    for url in refused:
        with pytest.raises(ToolError, match="not on the allowlist"):
            tool._allowed(http_plugin.parse_url(url))


@pytest.mark.parametrize(
    ("headers", "problem"),
    [
        ({"Host": "x"}, "set by the tool itself"),
        ({"Bad Name": "x"}, "not a valid header name"),
        ({"X-A": "a\nb"}, "printable ASCII"),
        ({"Authorization": SecretStr("Bearer abc\ndef")}, "line break"),
        ({"Authorization": SecretStr("Bearer abc\u00e9def")}, "printable ASCII"),
        ({"Cookie": "abc\u00e9def"}, "printable ASCII"),
        ({"other.test": {"Authorization": "x"}}, "must be an entry of hosts"),
        ({"https://a.test": {"Authorization": "x"}}, "must be an entry of hosts"),
        ({"a.test:8443": {"Authorization": "x"}}, "must be an entry of hosts"),
        ({"a.test": {"Host": "x"}}, 'headers."a.test": Host is set by the tool itself'),
        ({"A.TEST.": {"Host": "x"}}, "set by the tool itself"),
        ({"a.test": {"Authorization": SecretStr("Bearer abc\ndef")}}, "line break"),
    ],
)
def test_unusable_headers_are_config_errors(headers: dict[str, Any], problem: str) -> None:
    with pytest.raises(ConfigError, match=problem) as info:
        HttpTool(granted=BOTH, hosts=["a.test"], headers=headers)
    assert "def" not in str(info.value)


def test_headers_scoped_to_a_host_are_secrets_too(allowed: Server) -> None:
    a = allowed.port
    tool = HttpTool(
        granted=BOTH,
        hosts=[f"127.0.0.1:{a}"],
        headers={f"127.0.0.1:{a}": {"X-Api-Key": "scoped-key-0123456789", "X-Client": "aeon"}},
    )
    echoed = get(tool, f"http://127.0.0.1:{a}/echo")
    received = allowed.requests[-1]["headers"]
    assert (received["X-Api-Key"], received["X-Client"]) == ("scoped-key-0123456789", "aeon")
    assert json.loads(echoed["body"])["headers"]["X-Api-Key"] == "***"
    with pytest.raises(ToolError, match="configured in"):
        get(tool, f"http://127.0.0.1:{a}/echo", headers={"x-api-key": "mine"})
    for text in (repr(tool), str(tool), tool.model_dump_json(), json.dumps(echoed)):
        assert "scoped-key-0123456789" not in text
