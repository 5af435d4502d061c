"""No secret leaks, in any form (issue 13, items 1, 2 and 9).

Canary keys — with quotes and a backslash, a trailing newline, a line break or NUL inside, non-ASCII characters —
go through every output ``aeon run`` writes: the ``--json`` result, stdout and stderr, the JSONL log, the sqlite
state store's files, the cassette, and the text and traceback of the exceptions the adapter raises. The model is a
real OpenAI-compatible HTTP server on loopback (the scripted server of the adapter's tests) that echoes the
Authorization header back in the ways real servers and proxies do. Keys with control characters must be refused
when the component is built, with a clear error that does not quote them; every other key must appear nowhere, in
no form and in no piece of 8 or more characters.
"""

from __future__ import annotations

import base64
import functools
import json
import os
import random
import resource
import string
import subprocess
import sys
import traceback
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote, quote_plus

import pytest
from click.testing import CliRunner
from pydantic import SecretStr

from aeon_kernel import ConfigError, FunctionTool, LLMError, ToolError, hookimpl
from aeon_kernel.config import SECRET_FILE_LIMIT, resolve_secrets
from aeon_kernel.secrets import (
    MAX_SECRET,
    MIN_FRAGMENT,
    new_secrets_forgotten,
    register_secret,
    scrub_secrets,
    scrub_secrets_data,
    scrub_secrets_json,
)
from aeon_plugins import openai as openai_plugin
from aeon_plugins.openai import BODY_EXCERPT, OpenAIAdapter
from tests.plugins.test_openai_adapter import Reply, Scripted, client, completion, scripted_server
from tests.support.builders import answer, plan, tool_step

ROOT = Path(__file__).resolve().parent.parent

# Each canary has pieces of its own: no two share MIN_FRAGMENT characters, so one never hides another.
#: quotes and a backslash: JSON and repr escape them differently, so neither form equals the raw key
QUOTES = "sk-qT7\"dq\"-'sq'-\\bs-R2vX9mLw4KpZ8nHc"
#: what an injected secret often looks like: stripped, then used
TRAILING = "sk-tR4hJ8wQ2zV6yN1mB5xC\n"
#: refused: a line break, CR, NUL or escape inside a key
INSIDE_NEWLINE = "sk-nL3gW7\nkD9fS2aP6tY"
INSIDE_CR = "sk-cR8uE1\rqM4jX7bV3hG"
INSIDE_NUL = "sk-nU5lZ0\x00wT6rK1cF8p"
INSIDE_ESCAPE = "sk-eS9cA2\x1b[31m-yH5dN0gJ"
#: refused by the openai adapter (an HTTP header carries ASCII only), and never quoted
NON_ASCII = "sk-nÄ7sç-ünï-cødé-W3qL8vR1"


# --- an oracle independent of the scrubber ------------------------------------------------------------------


def _encodings(text: str) -> set[str]:
    """The encodings a message may carry ``text`` in, written out here rather than taken from the scrubber."""
    raw = text.encode("utf-8")
    return {
        text,
        json.dumps(text)[1:-1],
        json.dumps(text, ensure_ascii=False)[1:-1],
        repr(text)[1:-1],
        repr(text + "'\"")[1:-4],  # inside a '-quoted repr: ' escaped
        ascii(text)[1:-1],
        repr(raw)[2:-1],
        repr(raw + b"'\"")[2:-4],
        quote(text, safe=""),
        quote_plus(text),
        raw.hex(),
        json.dumps(json.dumps(text)[1:-1])[1:-1],  # a JSON string inside a JSON document
    }


@functools.cache
def _oracle_pieces(secret: str) -> frozenset[str]:
    """Every piece of MIN_FRAGMENT characters of ``secret`` (and of it stripped, or with its whitespace
    collapsed), in every encoding; and the middle of its base64."""
    pieces = set()
    for value in {secret, secret.strip(), " ".join(secret.split())}:
        for start in range(max(1, len(value) - MIN_FRAGMENT + 1)):
            pieces |= _encodings(value[start : start + MIN_FRAGMENT])
        middle = base64.b64encode(value.encode("utf-8")).decode()[4:-4]
        if len(middle) >= MIN_FRAGMENT:
            pieces.add(middle)
    return frozenset(pieces)


def leaks(data: str | bytes, secret: str) -> set[str]:
    """Every piece of MIN_FRAGMENT characters of ``secret``, in any encoding, that ``data`` contains."""
    pieces = _oracle_pieces(secret)
    if isinstance(data, bytes):
        return {piece for piece in pieces if piece.encode("utf-8") in data}
    return {piece for piece in pieces if piece in data}


def assert_no_leak(outputs: dict[str, str | bytes], secret: str) -> None:
    found = {name: sorted(leaks(data, secret))[:3] for name, data in outputs.items() if leaks(data, secret)}
    assert not found, f"the secret leaked into: {found}"


def everything_written(directory: Path) -> dict[str, bytes]:
    """Every file under ``directory`` (the log, the store and its WAL, the cassette), as bytes."""
    return {
        str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()
    }


# --- servers that echo the key back -------------------------------------------------------------------------


def _echoing(make: Callable[[str], Reply]) -> Callable[[Scripted], Callable[[int], Reply]]:
    """A script answering ``make(the request's Authorization header)``."""
    return lambda srv: lambda n: make(srv.requests[n - 1].headers.get("Authorization", ""))


ECHOES: dict[str, Callable[[str], Reply]] = {
    # a body without OpenAI's error.message: the adapter quotes the JSON, in which the key is escaped
    "detail-json": lambda auth: Reply(401, {"detail": f"no access for {auth}"}),
    # the repr of the header (as a Python proxy's error page would show it): quotes escaped differently
    "message-repr": lambda auth: Reply(400, {"error": {"message": f"rejected header {auth!r}"}}),
    # plain text, the key across the cut to an excerpt: scrubbing after the cut left the key's head
    "text-across-the-cut": lambda auth: Reply(
        401, "x" * (BODY_EXCERPT - 20) + f" {auth} " + "y" * 40, {"Content-Type": "text/plain"}
    ),
    # a 200 whose content echoes the key: model output goes into the state, the log, the store, the cassette
    "echo-200": lambda auth: Reply(200, completion(json.dumps({"goal": auth, "echo": [auth, repr(auth)]}))),
}


@pytest.fixture
def echo_server() -> Iterator[Callable[[str], str]]:
    """Start a server answering with ``ECHOES[name]``; returns its base URL."""
    servers = []

    def start(name: str) -> str:
        holder: dict[str, Scripted] = {}
        context = scripted_server(lambda n: _echoing(ECHOES[name])(holder["srv"])(n))
        holder["srv"] = context.__enter__()
        servers.append(context)
        return holder["srv"].base_url

    yield start
    for context in servers:
        context.__exit__(None, None, None)


# --- aeon run, as a real process ------------------------------------------------------------------------------


def write_config(directory: Path, api_key: str, base_url: str = "http://127.0.0.1:9/v1") -> Path:
    path = directory / "aeon.toml"
    path.write_text(
        "[llm]\n"
        'use = "openai"\n'
        'model = "m"\n'
        f'base_url = "{base_url}"\n'
        f"api_key = {api_key}\n"
        "[state]\n"
        'use = "sqlite"\n'
        'path = "state.db"\n',
        encoding="utf-8",
    )
    return path


def aeon_run(directory: Path, env: dict[str, str], timeout: float = 60) -> subprocess.CompletedProcess[bytes]:
    """``aeon run --json`` with a JSONL log and a cassette, in ``directory``, bounded in time and memory."""

    def limit_memory() -> None:
        # a secret file read without bound (/dev/zero) must fail, not exhaust the host
        resource.setrlimit(resource.RLIMIT_AS, (2 * 1024**3, 2 * 1024**3))

    command = ["run", "--json", "--log", "run.jsonl", "--record", "run.cassette", "--config", "aeon.toml"]
    return subprocess.run(
        [sys.executable, "-m", "aeon_cli", *command, "add 5 and 10"],
        cwd=directory,
        capture_output=True,
        timeout=timeout,
        env={**os.environ, "PYTHONPATH": str(ROOT), **env},
        preexec_fn=limit_memory,
    )


@pytest.mark.parametrize("echo", sorted(ECHOES))
def test_no_form_of_the_key_reaches_any_output_of_aeon_run(
    echo: str, echo_server: Callable[[str], str], tmp_path: Path
) -> None:
    write_config(tmp_path, '{ "$env" = "AEON_CANARY_KEY" }', echo_server(echo))
    proc = aeon_run(tmp_path, {"AEON_CANARY_KEY": QUOTES})
    assert proc.returncode == 1, proc.stderr.decode()  # the run failed, as a run (not a setup error)
    result = json.loads(proc.stdout)
    assert result["status"] == "failed"
    written = everything_written(tmp_path)
    assert {"run.jsonl", "state.db", "run.cassette"} <= set(written)
    assert_no_leak({"stdout": proc.stdout, "stderr": proc.stderr, **written}, QUOTES)
    if echo != "echo-200":  # the server's message is still shown, with the key scrubbed out
        assert "***" in result["message"], result["message"]


def test_a_trailing_newline_is_stripped_and_the_key_is_sent_as_it_is(
    echo_server: Callable[[str], str], tmp_path: Path
) -> None:
    """Before: httpx refused the header and quoted it, escaped (b'Bearer sk-...\\n'), into every output."""
    write_config(tmp_path, '{ "$env" = "AEON_CANARY_KEY" }', echo_server("message-repr"))
    proc = aeon_run(tmp_path, {"AEON_CANARY_KEY": TRAILING})
    result = json.loads(proc.stdout)
    assert "HTTP 400: rejected header 'Bearer ***'" in result["message"], result["message"]  # no \\n
    assert_no_leak({"stdout": proc.stdout, "stderr": proc.stderr, **everything_written(tmp_path)}, TRAILING)


@pytest.mark.parametrize(
    ("secret", "complaint"),
    [
        (INSIDE_NEWLINE, "contains a line break"),
        (INSIDE_CR, "contains a line break"),
        (INSIDE_ESCAPE, "contains a control character"),
        (NON_ASCII, "not ASCII"),
    ],
    ids=["newline", "carriage-return", "escape", "non-ascii"],
)
def test_a_key_that_cannot_be_sent_is_a_config_error_that_does_not_quote_it(
    secret: str, complaint: str, tmp_path: Path
) -> None:
    write_config(tmp_path, '{ "$env" = "AEON_CANARY_KEY" }')
    proc = aeon_run(tmp_path, {"AEON_CANARY_KEY": secret})
    stderr = proc.stderr.decode()
    assert proc.returncode == 2, stderr
    assert "api_key" in stderr and complaint in stderr and "Traceback" not in stderr
    assert_no_leak({"stdout": proc.stdout, "stderr": proc.stderr, **everything_written(tmp_path)}, secret)


def test_a_key_file_with_nul_inside_is_refused(tmp_path: Path) -> None:
    (tmp_path / "key").write_bytes(INSIDE_NUL.encode() + b"\n")
    write_config(tmp_path, '{ "$file" = "key" }')
    proc = aeon_run(tmp_path, {})
    stderr = proc.stderr.decode()
    assert proc.returncode == 2, stderr
    assert "secret file 'key' contains a control character" in stderr
    assert_no_leak({"stdout": proc.stdout, "stderr": proc.stderr}, INSIDE_NUL)


def test_a_multi_line_key_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "key").write_text(f"{QUOTES}\nsecond line\n", encoding="utf-8")
    write_config(tmp_path, '{ "$file" = "key" }')
    proc = aeon_run(tmp_path, {})
    assert proc.returncode == 2 and b"contains a line break" in proc.stderr, proc.stderr.decode()
    assert_no_leak({"stdout": proc.stdout, "stderr": proc.stderr}, QUOTES)


# --- $file: only small regular UTF-8 files ------------------------------------------------------------------


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_secret_files_that_are_not_regular_files_are_refused_without_waiting(tmp_path: Path) -> None:
    """Before: a FIFO hung ``aeon run`` for ever, /dev/zero grew memory until it died; a directory was
    refused. Each is now a ConfigError naming the option, at once."""
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "directory").mkdir()
    for path in (str(tmp_path / "fifo"), "/dev/zero", str(tmp_path / "directory")):
        write_config(tmp_path, f'{{ "$file" = "{path}" }}')
        proc = aeon_run(tmp_path, {}, timeout=20)
        stderr = proc.stderr.decode()
        assert proc.returncode == 2, (path, stderr)
        assert f"openai.api_key: cannot read secret file {path!r}: it is not a regular file" in stderr


def test_a_binary_or_oversized_secret_file_is_a_config_error(tmp_path: Path) -> None:
    binary = tmp_path / "binary"
    binary.write_bytes(b"\xff\xfe\x00\x01 not text")
    big = tmp_path / "big"
    big.write_bytes(b"k" * (SECRET_FILE_LIMIT + 1))
    with pytest.raises(
        ConfigError, match=r"openai\.api_key: cannot read secret file .*binary.*not UTF-8 text"
    ):
        resolve_secrets({"$file": str(binary)}, "openai.api_key")
    with pytest.raises(
        ConfigError, match=r"openai\.api_key: cannot read secret file .*big.*larger than 8 KiB"
    ):
        resolve_secrets({"$file": str(big)}, "openai.api_key")
    assert SECRET_FILE_LIMIT == MAX_SECRET  # a file at the limit holds a secret that clean_secret accepts
    longest = "".join(random.Random(13).choices(string.ascii_letters + string.digits, k=SECRET_FILE_LIMIT))
    exact = tmp_path / "exact"
    exact.write_text(longest)
    assert resolve_secrets({"$file": str(exact)}, "x").get_secret_value() == longest
    with (
        pytest.MonkeyPatch.context() as patch,
        pytest.raises(ConfigError, match=r"'AEON_CANARY_KEY' is longer than 8192 characters"),
    ):
        patch.setenv("AEON_CANARY_KEY", longest + "x")
        resolve_secrets({"$env": "AEON_CANARY_KEY"}, "openai.api_key")


def test_a_secret_file_is_stripped_of_a_byte_order_mark_and_surrounding_whitespace(tmp_path: Path) -> None:
    path = tmp_path / "key"
    path.write_bytes("\ufeff  sk-fR0mFiLe-Tq6Wn3Hs \r\n".encode())
    secret = resolve_secrets({"$file": str(path)}, "x")
    assert isinstance(secret, SecretStr) and secret.get_secret_value() == "sk-fR0mFiLe-Tq6Wn3Hs"


# --- the adapter's own exceptions -----------------------------------------------------------------------------


@pytest.mark.parametrize("echo", sorted(set(ECHOES) - {"echo-200"}))
def test_the_adapters_errors_carry_no_form_of_the_key(echo: str, echo_server: Callable[[str], str]) -> None:
    adapter = OpenAIAdapter(base_url=echo_server(echo), model="m", api_key=QUOTES)
    with pytest.raises(LLMError) as caught:
        client(adapter).generate("hi")
    text = "".join(traceback.format_exception(caught.value))
    assert_no_leak({"str": str(caught.value), "repr": repr(caught.value), "traceback": text}, QUOTES)


def test_a_200_echoing_the_key_is_scrubbed_before_it_becomes_model_output(
    echo_server: Callable[[str], str],
) -> None:
    adapter = OpenAIAdapter(base_url=echo_server("echo-200"), model="m", api_key=QUOTES)
    response = adapter.generate("hi")
    assert_no_leak({"text": response["text"]}, QUOTES)
    assert "***" in response["text"]


@pytest.mark.parametrize("secret", [INSIDE_NEWLINE, INSIDE_NUL, NON_ASCII, "sk-zW1dth\u200bGh7Kt2Vo"])
def test_the_adapter_refuses_a_key_it_cannot_send_without_quoting_it(secret: str) -> None:
    for given in (secret, SecretStr(secret)):
        with pytest.raises(ConfigError, match="openai LLM: api_key") as caught:
            OpenAIAdapter(model="m", api_key=given)
        assert_no_leak({"error": str(caught.value)}, secret)


def test_the_adapter_strips_a_key_given_in_code(echo_server: Callable[[str], str]) -> None:
    adapter = OpenAIAdapter(base_url=echo_server("echo-200"), model="m", api_key=f"  {TRAILING}")
    assert adapter._client.headers["Authorization"] == f"Bearer {TRAILING.strip()}"


# --- the scrubber itself ----------------------------------------------------------------------------------------

NASTY = "sk-nA5ty-\"q\"-'s'-\\b-\n-\x00-ünï-☃-Xw2Lp9Qz7Rk4"


@pytest.fixture
def nasty() -> str:
    register_secret(NASTY)
    return NASTY


def test_every_form_and_every_piece_of_a_secret_is_scrubbed_and_nothing_else(nasty: str) -> None:
    for value in (nasty, " ".join(nasty.split())):
        for whole in sorted(_encodings(value)):
            scrubbed = scrub_secrets(f"before «{whole}» after")
            assert scrubbed == "before «***» after", (whole, scrubbed)
        for start in range(len(value) - MIN_FRAGMENT + 1):
            for size in (MIN_FRAGMENT, MIN_FRAGMENT + 3):
                for piece in _encodings(value[start : start + size]):
                    scrubbed = scrub_secrets(f"<{piece}>")
                    assert not leaks(scrubbed, nasty), (piece, scrubbed)
    assert scrub_secrets(base64.b64encode(f"user:{nasty}".encode()).decode()).count("***") == 1
    # and nothing else: shorter pieces, other text, values too short to be secrets are left alone
    text = "An ordinary message: sk-other-key-99, Xw2Lp9Q, ünï, \"quoted\" and 'single', \\b \\n \\x00."
    assert scrub_secrets(text) == text
    # seven characters of the secret, however long their escaped form, are not "a piece of it"
    seven = nasty[nasty.index("ünï") - 2 :][:7]
    for form in _encodings(seven):
        assert scrub_secrets(f"<{form}>") == f"<{form}>", form
    assert scrub_secrets("") == ""
    register_secret("abc")
    assert scrub_secrets("abc abcd") == "abc abcd"


def test_scrubbing_json_keeps_it_valid_json(nasty: str) -> None:
    record = {"message": f"bad key {nasty!r}", nasty: [nasty, {"n": 1}], "repr": repr({"k": nasty})}
    for dumped in (json.dumps(record), json.dumps(record, ensure_ascii=False), json.dumps(record, indent=2)):
        scrubbed = scrub_secrets_json(dumped)
        assert json.loads(scrubbed)["message"] == "bad key '***'"
        assert not leaks(scrubbed, nasty)
    clean = json.dumps({"message": "nothing secret"})
    assert scrub_secrets_json(clean) is clean
    assert scrub_secrets_json(f"not json {nasty}") == "not json ***"
    data = scrub_secrets_data({"a": (nasty, 1), "b": [None, f"x{nasty}"]})
    assert data == {"a": ("***", 1), "b": [None, "x***"]}


def test_an_excerpt_is_scrubbed_before_it_is_cut(nasty: str) -> None:
    """Item 2: the key across the cut. Cut first, the scrubber saw only the key's head, and let it through."""
    for at in range(BODY_EXCERPT - len(nasty), BODY_EXCERPT + 1, 7):
        body = "x" * at + nasty + "y" * 100
        assert not leaks(openai_plugin._excerpt(body), nasty), at


def test_resolve_secrets_registers_what_it_resolves(monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "sk-rG1stErEd-by-cOnfig-Vb7Nq2Wx"
    monkeypatch.setenv("AEON_CANARY_KEY", f"{secret}\n")
    assert scrub_secrets(f"x{secret}") == f"x{secret}"
    resolved = resolve_secrets({"headers": [{"$env": "AEON_CANARY_KEY"}]}, "tool")
    assert resolved["headers"][0].get_secret_value() == secret
    assert scrub_secrets(f"x{json.dumps(secret)}") == 'x"***"'


# --- the kernel's outputs scrub, whatever component put the secret there --------------------------------------

LEAKY_KEY = "tk-lE4ky-\"tool\"-'token'-Mz8Pq1Ys6Ud3"


def leaky_plugin(seen: list[str]) -> Any:
    """A tool plugin whose factory gets a secret (resolved from aeon.toml) and puts it into its result, and into
    the error it raises: as a careless third-party tool might."""

    class Plugin:
        @hookimpl
        def aeon_register_tools(self, register: Any) -> None:
            def factory(token: SecretStr) -> FunctionTool:
                value = token.get_secret_value()
                seen.append(value)

                def leak(mode: str) -> dict[str, Any]:
                    if mode == "raise":
                        raise ToolError(f"the service refused token {value!r} ({json.dumps(value)})")
                    return {"token": value, "as_json": json.dumps({"token": value})}

                return FunctionTool(
                    name="leaky",
                    description="calls a service with a token",
                    input_schema={"type": "object", "properties": {"mode": {"type": "string"}}},
                    output_schema={"type": "object"},
                    function=leak,
                )

            register("leaky", factory)

    return Plugin()


@pytest.mark.parametrize("view", ["--json", "live"])
def test_a_secret_a_tool_leaks_is_scrubbed_from_every_output(
    view: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not the adapter's doing: the kernel's chokepoints (error records, the JSONL sink, the state store, the
    cassette, prompts, the CLI) scrub whatever a component put there."""
    from aeon_cli import main
    from aeon_kernel.engine import Engine

    responses = [
        plan(  # a goal that quotes the secret: as a model might, having seen it in a tool's result
            tool_step("1", "leaky", {"mode": "return"}),
            tool_step("2", "leaky", {"mode": "raise"}),
            goal=f"call the service with {LEAKY_KEY}",
        ),
        answer("done"),
    ]
    (tmp_path / "responses.json").write_text(json.dumps(responses))
    (tmp_path / "aeon.toml").write_text(
        '[llm]\nuse = "scripted"\nresponses = "responses.json"\n'
        '[tools]\nenabled = ["leaky"]\n[tools.leaky]\ntoken = { "$env" = "AEON_CANARY_TOKEN" }\n'
        '[state]\nuse = "sqlite"\npath = "state.db"\n'
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("AEON_CANARY_TOKEN", LEAKY_KEY)
    seen: list[str] = []
    monkeypatch.setattr(
        main, "_engine", lambda config, **o: Engine(config, plugins=[leaky_plugin(seen)], **o)
    )
    flags = ["--json"] if view == "--json" else []
    outcome = CliRunner().invoke(
        main.cli, ["run", *flags, "--log", "run.jsonl", "--record", "run.cassette", "use the service"]
    )
    assert seen and set(seen) == {LEAKY_KEY}, outcome.output  # the tool got its secret, unscrubbed
    if view == "--json":
        steps = json.loads(outcome.stdout)["final_state"]["plan"]["steps"]
        assert steps[0]["status"] == "complete" and "***" in json.dumps(steps[0]["result"])
    else:
        assert "leaky" in outcome.stdout and "***" in outcome.stdout
    written = everything_written(tmp_path)
    del written["responses.json"]  # the model's script: an input
    assert {"run.jsonl", "state.db", "run.cassette"} <= set(written)
    assert_no_leak({"stdout": outcome.stdout, "stderr": outcome.stderr, **written}, LEAKY_KEY)


def test_the_kernels_error_records_and_excerpts_are_scrubbed() -> None:
    """The chokepoints themselves: an error record (for the log, the state and the next prompt) and the excerpt
    helper prompts and the live view cut text with (scrubbed before the cut)."""
    from aeon_kernel.runtime.context import error_record
    from aeon_plugins.planning.prompts import compact

    register_secret(LEAKY_KEY)
    record = error_record(ToolError(f"bad token {LEAKY_KEY!r}"), "s1", detail={"sent": [LEAKY_KEY]})
    assert record["message"] == "bad token '***'" and record["detail"] == {"sent": ["***"]}
    for limit in range(12, 40, 3):
        assert not leaks(compact("x" * 10 + LEAKY_KEY, limit), LEAKY_KEY), limit
        assert not leaks(compact({"token": LEAKY_KEY}, limit), LEAKY_KEY), limit


def test_the_kernels_log_records_are_scrubbed(caplog: pytest.LogCaptureFixture) -> None:
    """A failing telemetry sink is logged with its exception's text (and a traceback, when asked for)."""
    import logging

    register_secret(LEAKY_KEY)
    log = logging.getLogger("aeon")
    with caplog.at_level(logging.WARNING, logger="aeon"):
        log.warning("sink failed: %s", ValueError(f"refused {LEAKY_KEY!r}"))
        try:
            raise ValueError(json.dumps({"token": LEAKY_KEY}))
        except ValueError:
            log.exception("hook failed")
    assert len(caplog.records) == 2
    assert_no_leak({"log": caplog.text}, LEAKY_KEY)
    assert "sink failed: refused '***'" in caplog.text


def test_secrets_registered_inside_new_secrets_forgotten_are_forgotten_on_leaving() -> None:
    before, inside = f"kept-{uuid.uuid4().hex}", f"gone-{uuid.uuid4().hex}"
    register_secret(before)
    with new_secrets_forgotten():
        register_secret(inside)
        assert scrub_secrets(f"{before} {inside}") == "*** ***"
    assert scrub_secrets(f"{before} {inside}") == f"*** {inside}"
    register_secret(inside)  # and it can be registered again
    assert scrub_secrets(inside) == "***"
