"""Issue 27: the local servers ``aeon`` starts serve only the user who started them, and stop when told to.

Items 5 and 8. ``aeon inspect``, step-through (``aeon run --inspect``) and ``aeon mcp serve --http`` run as real
processes. Another process that does not hold the session's secret — run as the account ``nobody`` where this
test is root (``su``), else as this user — asks them for pages, static files, JSON, the step-through controls and
MCP tool calls, with no secret and with a wrong one: every request is refused (403 for the inspector, 401 for MCP)
and the run does not move. With the secret they work: the inspector's URL sets an HttpOnly, SameSite=Strict
cookie and sends the browser on to the page without the token; MCP clients send ``Authorization: Bearer``.

Then each is stopped as a supervisor stops it (SIGTERM), and as Ctrl-C stops it when it was started with SIGINT
ignored, as a shell starts a background job (``cmd &``): ``aeon inspect`` and ``aeon mcp serve`` exit with
status 0, step-through with 130 (as any run on Ctrl-C: the run kept, resumable), and no process — theirs or one
they started — is left.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import signal
import socket
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import anyio
import pytest

from tests.support.browser import needs_browser
from tests.support.builders import answer, llm_step, plan, tool_step
from tests.support.servers import as_someone_else, curl, descendants, gone, read_as_someone_else, started

ROOT = Path(__file__).resolve().parents[2]
NOTES_SERVER = ROOT / "tests" / "support" / "mcp_server.py"
#: asks for what THREE_STEPS does: the sum, then the echo (each tool's review finds its calls asked for)
REQUEST = "add 5 and 10, then say hello"
THREE_STEPS = plan(
    tool_step("1", "calculator", {"expression": "5 + 10"}),
    tool_step("2", "echo", {"message": "hello"}),
    llm_step("3"),
)
KEY = "the-content-of-key-txt-7f3a"
COOKIE_FLAGS = re.compile(r"^aeon-inspect-(\d+)=([A-Za-z0-9_-]{43}); Path=/; HttpOnly; SameSite=Strict$")


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A directory whose aeon.toml selects the scripted model (a 3-step plan, then the answer) and grants the
    ``files`` tool reading ``ws/``, with an MCP server of its own (so that a stopped server's child can be seen
    to stop too); the CLI records into ``data/``."""
    (tmp_path / "responses.json").write_text(json.dumps([THREE_STEPS, answer("The sum is 15")]))
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "key.txt").write_text(KEY)
    (tmp_path / "aeon.toml").write_text(
        '[llm]\nuse = "scripted"\nresponses = "responses.json"\n'
        '[tools.files]\ngrant = ["read"]\nroot = "ws"\n'
        '[tools.mcp]\ngrant = ["call"]\n[tools.mcp.servers.notes]\n'
        f"command = [{json.dumps(sys.executable)}, {json.dumps(str(NOTES_SERVER))}]\n"
    )
    return tmp_path


def environment(project: Path, **extra: str) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key not in ("AEON_CONFIG", "AEON_MCP_TOKEN")}
    return {**env, "AEON_DATA_DIR": str(project / "data"), "PYTHONFAULTHANDLER": "1", **extra}


def aeon_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "aeon_cli", *args]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def closed(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) != 0


def request(
    port: int, method: str, path: str, *, cookie: str | None = None, body: str = "", **headers: str
) -> tuple[int, dict[str, str], str]:
    """A request from this test (which read the secret the command printed), with ``cookie`` if given."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        sent = {"Host": f"127.0.0.1:{port}", **{k.replace("_", "-"): v for k, v in headers.items()}}
        if cookie is not None:
            sent["Cookie"] = cookie
        if method == "POST":
            sent.setdefault("Content-Type", "application/x-www-form-urlencoded")
        connection.request(method, path, body=body.encode(), headers=sent)
        response = connection.getresponse()
        found = {name.lower(): value for name, value in response.getheaders()}
        return response.status, found, response.read().decode("utf-8")
    finally:
        connection.close()


@dataclass
class Served:
    """A server command: its process, its port, and the URL it printed (which carries the secret)."""

    process: subprocess.Popen[str]
    port: int
    url: str

    @property
    def token(self) -> str:
        found = re.search(r"[?&]token=([A-Za-z0-9_-]+)", self.url)
        assert found, self.url
        return found[1]

    @property
    def cookie(self) -> str:
        return f"aeon-inspect-{self.port}={self.token}"


@contextmanager
def _serving(
    project: Path, args: list[str], printed_on: str, path: str, ignore_sigint: bool
) -> Iterator[Served]:
    """``aeon ARGS`` until the page's URL (``path``, with its token) is printed on stdout or stderr."""
    with started(
        aeon_command(*args),
        cwd=project,
        env=environment(project),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        ignore_sigint=ignore_sigint,
    ) as process:
        stream = process.stdout if printed_on == "stdout" else process.stderr
        assert stream is not None
        line = stream.readline()
        found = re.search(rf"(http://127\.0\.0\.1:(\d+)/{re.escape(path)}\?token=\S+)", line)
        assert found, line
        yield Served(process, int(found[2]), found[1])


@contextmanager
def inspector(project: Path, *, ignore_sigint: bool = False) -> Iterator[Served]:
    """``aeon inspect --no-browser`` until its URL is printed (stdout); stopped for sure when the block ends."""
    with _serving(project, ["inspect", "--no-browser"], "stdout", "", ignore_sigint) as served:
        yield served


@contextmanager
def stepping(project: Path, *, ignore_sigint: bool = False) -> Iterator[Served]:
    """``aeon run REQUEST --inspect --no-browser --json`` until its URL is printed (stderr), the run paused."""
    args = ["run", REQUEST, "--inspect", "--no-browser", "--json"]
    with _serving(project, args, "stderr", "live", ignore_sigint) as served:
        wait_paused(served, 0)
        yield served


def live(served: Served) -> dict[str, Any]:
    status, _, body = request(served.port, "GET", "/api/live", cookie=served.cookie)
    assert status == 200, body
    found: dict[str, Any] = json.loads(body)
    return found


def wait_paused(served: Served, cycles: int) -> None:
    for _ in range(600):
        now = live(served)
        if now["mode"] == "paused" and now["cycles"] == cycles:
            return
        time.sleep(0.05)
    raise AssertionError(f"the run did not pause after {cycles} cycles: {live(served)}")


@contextmanager
def mcp_http(project: Path, *extra: str, ignore_sigint: bool = False, **env: str) -> Iterator[Served]:
    """``aeon mcp serve --http PORT`` until it listens; ``url`` is the stderr line that names the token."""
    port = free_port()
    errors = project / "mcp-stderr.txt"
    with (
        open(errors, "w") as stderr,
        started(
            aeon_command("mcp", "serve", "--config", "aeon.toml", "--http", str(port), *extra),
            cwd=project,
            env=environment(project, **env),
            stdin=subprocess.DEVNULL,
            stderr=stderr,
            text=True,
            ignore_sigint=ignore_sigint,
        ) as process,
    ):
        deadline = time.monotonic() + 30
        while closed(port):
            if process.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"aeon mcp serve --http did not start: {errors.read_text()[-2000:]}")
            time.sleep(0.05)
        said = errors.read_text()
        yield Served(process, port, said)


# --- who can connect ------------------------------------------------------------------------------------------


def test_aeon_inspect_serves_only_the_browser_that_opened_its_url(project: Path) -> None:
    with inspector(project) as served:
        port, token = served.port, served.token
        base = f"http://127.0.0.1:{port}"
        for path in (
            "/",
            "/api/runs",
            "/static/inspector.css",
            "/static/inspector.js",
            "/favicon.ico",
            "/run/x/y",
        ):
            status, headers, body = curl(f"{base}{path}")
            assert status == 403, (as_someone_else(), path, status)
            assert "set-cookie" not in headers and "?token=" in body  # it says what to open, not the secret
        for wrong in ("", "x" * len(token), token[:-1], token + "x", token.upper()):
            status, headers, _ = curl(f"{base}/?token={wrong}")
            assert status == 403 and "set-cookie" not in headers, wrong
        status, _, _ = curl(f"{base}/", "-H", f"Cookie: aeon-inspect-{port}={'A' * len(token)}")
        assert status == 403
        assert curl(f"{base}/", "-H", f"Cookie: aeon-inspect-{port + 1}={token}")[0] == 403  # another's name
        assert curl("-X", "POST", f"{base}/run/x/y")[0] == 403  # any method: the door comes first

        # the URL it printed signs in: the cookie set, the browser sent on without the token
        status, headers, _ = curl(f"{base}/?token={token}&page=1")
        assert status == 303 and headers["location"] == "/?page=1"
        cookie = COOKIE_FLAGS.match(headers["set-cookie"])
        assert cookie and cookie.groups() == (str(port), token), headers["set-cookie"]
        for path in ("/", "/api/runs", "/static/inspector.css"):
            assert curl(f"{base}{path}", "-H", f"Cookie: other=1; {served.cookie}")[0] == 200, path
        assert request(port, "POST", "/", cookie=served.cookie)[0] == 405  # signed in: still read-only
        assert served.token not in Path(f"/proc/{served.process.pid}/cmdline").read_text()


def test_step_through_can_be_read_and_driven_only_with_the_session_s_cookie(project: Path) -> None:
    with stepping(project) as served:
        port = served.port
        base = f"http://127.0.0.1:{port}"
        status, _, page = request(port, "GET", "/live", cookie=served.cookie)
        assert status == 200
        form_token = re.search(r'name="token" value="([^"]+)"', page)
        assert form_token and form_token[1] != served.token  # the page holds the form's token, not the secret
        version = live(served)["version"]
        step = urlencode({"action": "step", "token": form_token[1], "seen": str(version)})
        origin = ("-H", f"Origin: {base}", "-H", "Content-Type: application/x-www-form-urlencoded")
        for path in ("/live", "/api/live", "/live?fragment=1", "/static/inspector.js", "/"):
            assert curl(f"{base}{path}")[0] == 403, path  # nobody else can read the run, nor the form's token
        # even knowing the form's token, a request without the cookie presses nothing
        assert curl("-X", "POST", f"{base}/live/control", *origin, "--data", step)[0] == 403
        wrong = f"aeon-inspect-{port}={'x' * len(served.token)}"
        assert (
            curl("-X", "POST", f"{base}/live/control", *origin, "-H", f"Cookie: {wrong}", "--data", step)[0]
            == 403
        )
        assert (
            curl("-X", "POST", f"{base}/live/control?token={served.token}", *origin, "--data", step)[0] == 403
        )
        time.sleep(0.3)
        assert live(served) == {"version": version, "mode": "paused", "cycles": 0}  # nothing moved

        status, headers, _ = curl(served.url)  # the printed URL: /live?token=...
        assert status == 303 and headers["location"] == "/live"
        assert COOKIE_FLAGS.match(headers["set-cookie"])
        pressed = curl(
            "-X", "POST", f"{base}/live/control", *origin, "-H", f"Cookie: {served.cookie}", "--data", step
        )
        assert pressed[0] == 303
        wait_paused(served, 1)  # exactly one cycle
        stop = urlencode({"action": "stop", "token": form_token[1]})
        assert request(port, "POST", "/live/control", cookie=served.cookie, body=stop)[0] == 303
        _, err = served.process.communicate(timeout=30)
    assert served.process.returncode == 130, err


def test_a_page_opened_from_elsewhere_signs_in_through_a_page_of_its_own(project: Path) -> None:
    """A browser sent to the URL by another page (the 0600 file the command opens, as Jupyter does) would not send
    a SameSite=Strict cookie on a redirect of that navigation: it gets a page that goes on by itself instead."""
    with inspector(project) as served:
        status, headers, body = request(
            served.port, "GET", "/?token=" + served.token + "&page=2", Sec_Fetch_Site="cross-site"
        )
        assert status == 200 and COOKIE_FLAGS.match(headers["set-cookie"])
        assert '<meta http-equiv="refresh" content="0; url=/?page=2">' in body and served.token not in body
        assert "script-src 'self'" in headers["content-security-policy"]
        status, headers, _ = request(served.port, "GET", "//evil.example/x?token=" + served.token)
        assert status == 303 and headers["location"] == "/evil.example/x"  # a path here: never another host
        status, headers, _ = request(served.port, "GET", "/\\evil.example?token=" + served.token)
        assert status == 303 and headers["location"] == "/%5Cevil.example"


def _mcp_call(port: int, token: str | None, method: str, params: dict[str, Any]) -> tuple[int, str]:
    """A JSON-RPC request to /mcp made by someone else with curl: the status and the body."""
    message = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
    args = ["-X", "POST", f"http://127.0.0.1:{port}/mcp", "-H", "Content-Type: application/json"]
    args += ["-H", "Accept: application/json, text/event-stream", "--data", message]
    if token is not None:
        args += ["-H", f"Authorization: Bearer {token}"]
    status, _, body = curl(*args)
    return status, body


def _token_of(said: str) -> str:
    found = re.search(r"this session's token: (\S+)", said)
    assert found, said
    return found[1]


def _read_key(port: int, token: str) -> tuple[list[str], Any]:
    """With the SDK's client, sending ``token``: the tools listed, and the files tool's answer for ws/key.txt."""
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    async def main() -> tuple[list[str], Any]:
        client = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
        async with (
            client,
            streamable_http_client(f"http://127.0.0.1:{port}/mcp", http_client=client) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            tools = [tool.name for tool in (await session.list_tools()).tools]
            read_file = await session.call_tool("files", {"operation": "read", "path": "key.txt"})
            assert not read_file.is_error, read_file.content
            return tools, read_file.structured_content

    return anyio.run(main)


def test_mcp_over_http_answers_only_requests_with_the_session_s_token(project: Path) -> None:
    initialize = {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "someone-else", "version": "1"},
    }
    call = {"name": "files", "arguments": {"operation": "read", "path": "key.txt"}}
    with mcp_http(project) as served:
        token = _token_of(served.url)
        assert len(token) >= 43
        for sent in (
            None,
            "",
            "x" * len(token),
            token[:-1],
            token.lower() if token.lower() != token else "y",
        ):
            for method, params in (("initialize", initialize), ("tools/list", {}), ("tools/call", call)):
                status, body = _mcp_call(served.port, sent, method, params)
                assert status == 401, (as_someone_else(), sent, method, status)
                assert KEY not in body and "invalid_token" in body
        status, body = _mcp_call(served.port, token, "initialize", initialize)  # the token: served
        assert status == 200 and '"serverInfo"' in body
        tools, result = _read_key(served.port, token)
        assert {"files", "run", "mcp.notes.add"} <= set(tools)
        assert KEY in json.dumps(result)
        assert token not in Path(f"/proc/{served.process.pid}/cmdline").read_text()


def test_mcp_over_http_takes_its_token_from_a_private_file_or_the_environment(project: Path) -> None:
    token_file = project / "mcp.token"
    with mcp_http(project, "--token-file", str(token_file)) as served:
        assert "this session's token" not in served.url and str(token_file) in served.url
        mode = stat.S_IMODE(token_file.stat().st_mode)
        assert mode == 0o600 and not read_as_someone_else(token_file)
        token = token_file.read_text().strip()
        assert len(token) >= 43 and token not in served.url  # written for its owner, never printed
        assert _mcp_call(served.port, None, "tools/list", {})[0] == 401
        assert KEY in json.dumps(_read_key(served.port, token)[1])
    with mcp_http(project, "--token-file", str(token_file)) as again:  # the same file: the same token
        assert KEY in json.dumps(_read_key(again.port, token)[1])

    mine = "t" * 40
    with mcp_http(project, AEON_MCP_TOKEN=mine) as served:
        assert mine not in served.url and "$AEON_MCP_TOKEN" in served.url
        assert _mcp_call(served.port, token, "tools/list", {})[0] == 401
        assert KEY in json.dumps(_read_key(served.port, mine)[1])

    token_file.chmod(0o644)
    short = project / "short.token"
    short.write_text("too-short\n")
    short.chmod(0o600)
    serve = aeon_command("mcp", "serve", "--config", "aeon.toml", "--http", str(free_port()))
    for extra, env, said in (
        (["--token-file", str(token_file)], {}, "chmod 600"),
        (["--token-file", str(short)], {}, "no usable token"),
        ([], {"AEON_MCP_TOKEN": "short"}, "no usable token"),
    ):
        done = subprocess.run(
            [*serve, *extra],
            cwd=project,
            env=environment(project, **env),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 2 and said in done.stderr, done.stderr
        assert "Traceback" not in done.stderr
    stdio = subprocess.run(
        aeon_command("mcp", "serve", "--token-file", str(token_file)),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert stdio.returncode == 2 and "--token-file is for --http" in stdio.stderr


# --- how they stop --------------------------------------------------------------------------------------------


def _stopped_by(served: Served, signum: int, timeout: float = 30) -> tuple[int, str, str]:
    """Send ``signum`` as a supervisor (or Ctrl-C) would; the exit status, stdout and stderr, once every process
    it had started is gone too. (Its stdin, if a pipe, stays open until it has exited: not a client's going.)"""
    children = descendants(served.process.pid)
    served.process.send_signal(signum)
    try:
        served.process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        served.process.send_signal(signal.SIGABRT)  # PYTHONFAULTHANDLER: where each thread is, on stderr
        _, err = served.process.communicate(timeout=30)
        pytest.fail(
            f"{signal.Signals(signum).name} did not stop pid {served.process.pid}: {(err or '')[-3000:]}"
        )
    out, err = served.process.communicate(timeout=timeout)
    assert gone(served.process.pid, children), "a process was left behind"
    assert closed(served.port)
    return served.process.returncode, out or "", err or ""


STOPS = [
    pytest.param(signal.SIGTERM, False, id="SIGTERM"),
    pytest.param(signal.SIGINT, True, id="SIGINT-inherited-ignored"),
]


@pytest.mark.parametrize(("signum", "ignored"), STOPS)
def test_aeon_inspect_stops_on_a_signal(project: Path, signum: int, ignored: bool) -> None:
    with inspector(project, ignore_sigint=ignored) as served:
        if ignored:
            assert "SigIgn" in Path(f"/proc/{served.process.pid}/status").read_text()
        assert request(served.port, "GET", "/", cookie=served.cookie)[0] == 200
        code, _, err = _stopped_by(served, signum)
    assert code == 0, err
    assert "Traceback" not in err


@pytest.mark.parametrize(("signum", "ignored"), STOPS)
def test_mcp_serve_stops_on_a_signal_with_the_servers_it_started(
    project: Path, signum: int, ignored: bool
) -> None:
    with mcp_http(project, ignore_sigint=ignored) as served:
        token = _token_of(served.url)
        assert KEY in json.dumps(_read_key(served.port, token)[1])
        assert descendants(served.process.pid), "the notes MCP server was started"
        code, _, _ = _stopped_by(served, signum)
    errors = (project / "mcp-stderr.txt").read_text()
    assert code == 0, errors
    assert "Traceback" not in errors


@pytest.mark.parametrize(("signum", "ignored"), STOPS)
def test_mcp_serve_over_stdio_stops_on_a_signal(project: Path, signum: int, ignored: bool) -> None:
    with started(
        aeon_command("mcp", "serve", "--config", "aeon.toml"),
        cwd=project,
        env=environment(project),
        stdin=subprocess.PIPE,  # held open: the client has not gone
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        ignore_sigint=ignored,
    ) as process:
        assert process.stderr is not None
        assert "aeon mcp: serving" in process.stderr.readline()
        served = Served(process, free_port(), "")
        code, _, err = _stopped_by(served, signum)
    assert code == 0, err
    assert "Traceback" not in err


@pytest.mark.parametrize(("signum", "ignored"), STOPS)
def test_step_through_stops_on_a_signal_as_on_stop(project: Path, signum: int, ignored: bool) -> None:
    """Paused after one cycle, the command is signalled: it ends as Ctrl-C ends any run (the server closed, the run
    released: status 130, what the store keeps and how to resume it), and ``aeon resume`` finishes the run."""
    with stepping(project, ignore_sigint=ignored) as served:
        status, _, page = request(served.port, "GET", "/live", cookie=served.cookie)
        form_token = re.search(r'name="token" value="([^"]+)"', page)
        assert status == 200 and form_token
        step = urlencode({"action": "step", "token": form_token[1], "seen": str(live(served)["version"])})
        assert request(served.port, "POST", "/live/control", cookie=served.cookie, body=step)[0] == 303
        wait_paused(served, 1)
        code, out, err = _stopped_by(served, signum)
    assert code == 130, err
    assert "Traceback" not in err
    stopped = json.loads(out)
    assert (stopped["status"], stopped["cycles"], stopped["resumable"]) == ("interrupted", 1, True)
    assert f"Resume it with: aeon resume {stopped['run_id']}" in err  # the Ctrl-C report of every `aeon run`
    listed = json.loads(
        subprocess.run(
            aeon_command("runs", "--json"),
            cwd=project,
            env=environment(project),
            capture_output=True,
            timeout=60,
        ).stdout
    )
    assert [(run["run_id"], run["status"], run["cycles"]) for run in listed] == [
        (stopped["run_id"], "running", 1)
    ]
    (project / "responses.json").write_text(json.dumps([answer("The sum is 15")]))  # the plan is made
    resumed = subprocess.run(
        aeon_command("resume", stopped["run_id"], "--json"),
        cwd=project,
        env=environment(project),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert resumed.returncode == 0, resumed.stderr
    result = json.loads(resumed.stdout)
    assert (result["status"], result["answer"]) == ("completed", "The sum is 15")


# --- in Chromium ----------------------------------------------------------------------------------------------


@needs_browser
def test_the_browser_is_sent_to_the_url_through_a_file_only_its_user_can_read(
    browser: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the commands open unless --no-browser: not the URL (a browser's command line is anyone's to read in
    /proc), but a 0600 file that sends the browser on to it. In Chromium the file leads to the page, signed in
    (the cookie HttpOnly and SameSite=Strict), and the file is gone once the server stops."""
    import webbrowser

    from aeon_cli.inspect.local import Browser
    from aeon_cli.inspect.server import serving
    from aeon_cli.inspect.sources import Catalog

    opened: list[str] = []
    monkeypatch.setattr(webbrowser, "open", lambda url: opened.append(url) or True)
    catalog = Catalog([])
    with serving(catalog) as server:
        door = Browser()
        door.open(server.login())
        [uri] = opened
        assert uri.startswith("file://") and server.gate.token not in uri
        file = Path(uri.removeprefix("file://"))
        assert (
            stat.S_IMODE(file.stat().st_mode) == 0o600 and stat.S_IMODE(file.parent.stat().st_mode) == 0o700
        )
        assert not read_as_someone_else(file)
        context = browser.new_context()
        try:
            page = context.new_page()
            page.goto(uri)
            page.wait_for_url(server.url)  # through the file and the sign-in page, to the page itself
            page.wait_for_load_state("load")
            assert page.locator("h1").count() >= 1 and "403" not in page.content()
            [cookie] = context.cookies()
            assert (cookie["name"], cookie["value"]) == (server.gate.cookie, server.gate.token)
            assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
            assert page.evaluate("document.cookie") == ""  # no script can read it
            other = browser.new_context()  # another browser: nothing without the URL
            try:
                refused = other.new_page().goto(server.url)
                assert refused is not None and refused.status == 403
            finally:
                other.close()
        finally:
            context.close()
        door.close()
        assert not file.exists() and not file.parent.exists()
    catalog.close()
