"""The ``openai`` adapter's streaming (issue 28) against a real HTTP server on loopback speaking server-sent events.

Each test scripts the server's replies (events, then how the stream ends: ``[DONE]``, a clean close, or a
connection cut in the middle of a chunk), and drives the adapter through the kernel's ModelClient with a listener
set, so retries and attempt numbers are the kernel's real policy. The real model behind llama-cpp-python's server
is streamed in ``test_openai_adapter.py`` (marked ``model``), beside the tests that start it.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from aeon_kernel import LLMError, LLMTransientError
from aeon_kernel.kit import ModelClient, begin_listening, end_listening, register_secret, scrub_secrets
from aeon_kernel.secrets import forms, new_secrets_forgotten
from aeon_plugins.openai import OpenAIAdapter, _Release

KEY = "sk-stream-secret-never-shown"
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"answer": {"type": "string"}},
    "required": ["answer"],
}
USAGE = {"prompt_tokens": 11, "completion_tokens": 3, "total_tokens": 14}


def delta(text: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "model": "served-model",
        "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}],
    }


FINISH = {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
LAST = {"object": "chat.completion.chunk", "choices": [], "usage": USAGE}
HELLO = [
    {"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]},
    *map(delta, ["Hel", "lo", "!"]),
]


@dataclass
class Stream:
    """One scripted reply: ``events`` (a dict is sent as JSON after ``data:``, a str as it is), then ``end``:
    ``done`` (``data: [DONE]``), ``close`` (the body ends cleanly, no [DONE]) or ``cut`` (the connection is cut
    in the middle of a chunk). ``body`` answers with one plain JSON body instead; ``pause`` waits before each
    event; ``hold`` waits after the second event (the first with text) until the test sets it."""

    events: list[Any] = field(default_factory=lambda: [*HELLO, FINISH, LAST])
    end: str = "done"
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: Any = None
    pause: float = 0.0
    hold: threading.Event | None = None


@dataclass
class Served:
    base_url: str
    requests: list[dict[str, Any]]
    held: list[bool]  # for each ``hold``: whether the test set it in time


@contextmanager
def sse_server(script: Callable[[int], Stream]) -> Iterator[Served]:
    requests: list[dict[str, Any]] = []
    held: list[bool] = []
    closing = threading.Event()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            requests.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            reply = script(len(requests))
            self.close_connection = True
            try:
                if reply.body is not None or reply.status != 200:
                    self.plain(reply)
                else:
                    self.events(reply)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client went away (a listener stopped the reply, a deadline)

        def plain(self, reply: Stream) -> None:
            data = (reply.body if isinstance(reply.body, str) else json.dumps(reply.body)).encode()
            self.send_response(reply.status)
            for name, value in reply.headers.items():
                self.send_header(name, value)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Connection", "close")  # it does close: a client must not reuse the connection
            self.end_headers()
            self.wfile.write(data)

        def events(self, reply: Stream) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream; charset=utf-8")
            self.send_header("Transfer-Encoding", "chunked")
            self.send_header("Connection", "close")
            self.end_headers()
            for number, event in enumerate(reply.events):
                if reply.pause and closing.wait(reply.pause):
                    return
                self.chunk(f"data: {event if isinstance(event, str) else json.dumps(event)}\n\n")
                if number == 1 and reply.hold is not None:
                    held.append(reply.hold.wait(5))
            if reply.end == "done":
                self.chunk("data: [DONE]\n\n")
            if reply.end == "cut":
                self.wfile.write(b'40\r\ndata: {"choi')  # a chunk of 64 bytes announced, 15 sent
                self.wfile.flush()
                return
            self.wfile.write(b"0\r\n\r\n")

        def chunk(self, text: str) -> None:
            data = text.encode()
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield Served(f"http://127.0.0.1:{server.server_address[1]}/v1", requests, held)
    finally:
        closing.set()
        server.shutdown()
        server.server_close()


Heard = list[tuple[str, int]]


@pytest.fixture(autouse=True)
def secrets_of_this_test() -> Iterator[None]:
    """The key a test registers is forgotten after it: a registered secret holds back the characters at the end of
    streamed text that could be its start, which would change where other tests' pieces are cut."""
    with new_secrets_forgotten():
        yield


@contextmanager
def listening(also: Callable[[str, int], None] | None = None) -> Iterator[Heard]:
    heard: Heard = []

    def listener(text: str, attempt: int) -> None:
        heard.append((text, attempt))
        if also is not None:
            also(text, attempt)

    token = begin_listening(listener)
    try:
        yield heard
    finally:
        end_listening(token)


def client(adapter: OpenAIAdapter) -> ModelClient:
    return ModelClient(adapter, initial_wait=0.01, max_wait=0.05)


def joined(heard: Heard, attempt: int = 1) -> str:
    return "".join(text for text, at in heard if at == attempt)


# --- streaming ------------------------------------------------------------------------------------------------


def test_deltas_join_up_to_the_text_and_usage_comes_from_the_last_event() -> None:
    with sse_server(lambda n: Stream()) as srv, listening() as heard:
        adapter = OpenAIAdapter(base_url=srv.base_url, model="m")
        response = client(adapter).generate("hi", "be brief", max_tokens=12, temperature=0.1)
        adapter.close()
    assert heard == [("Hel", 1), ("lo", 1), ("!", 1)]
    assert response == {"text": "Hello!", "model": "served-model", "usage": USAGE}
    [request] = srv.requests
    assert request == {
        "model": "m",
        "messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}],
        "max_tokens": 12,
        "temperature": 0.1,
        "stream": True,
        "stream_options": {"include_usage": True},
    }


def test_without_a_listener_nothing_is_streamed() -> None:
    with sse_server(lambda n: Stream(body={"choices": [{"message": {"content": "whole"}}]})) as srv:
        assert client(OpenAIAdapter(base_url=srv.base_url, model="m")).generate("hi")["text"] == "whole"
    assert "stream" not in srv.requests[0]


def test_the_first_delta_reaches_the_listener_while_the_server_is_still_writing() -> None:
    """The server sends one event and waits for the listener to have it: a client that read the whole reply
    before passing text on would make it wait in vain."""
    first = threading.Event()
    with (
        sse_server(lambda n: Stream(hold=first)) as srv,
        listening(lambda text, attempt: first.set()) as heard,
    ):
        response = client(OpenAIAdapter(base_url=srv.base_url, model="m")).generate("hi")
    assert srv.held == [True]
    assert joined(heard) == response["text"] == "Hello!"


def test_the_schema_is_sent_as_response_format_while_streaming() -> None:
    events = [delta('{"answer": '), delta('"42"}'), FINISH, LAST]
    with sse_server(lambda n: Stream(events)) as srv, listening() as heard:
        response = client(OpenAIAdapter(base_url=srv.base_url, model="m")).generate("hi", json_schema=SCHEMA)
    assert json.loads(response["text"]) == {"answer": "42"} == json.loads(joined(heard))
    assert srv.requests[0]["response_format"]["json_schema"]["schema"] == SCHEMA
    assert srv.requests[0]["stream"] is True


def test_a_connection_cut_mid_stream_is_retried_and_the_listener_hears_attempt_2_start_over() -> None:
    script = {1: Stream([*HELLO[:2]], end="cut")}
    with sse_server(lambda n: script.get(n, Stream())) as srv, listening() as heard:
        response = client(OpenAIAdapter(base_url=srv.base_url, model="m")).generate("hi")
    assert heard == [("Hel", 1), ("Hel", 2), ("lo", 2), ("!", 2)]
    assert joined(heard, 2) == response["text"] == "Hello!" and len(srv.requests) == 2


def test_a_stream_that_ends_without_finishing_is_transient() -> None:
    with sse_server(lambda n: Stream(HELLO, end="close")) as srv:
        adapter = OpenAIAdapter(base_url=srv.base_url, model="m")
        with pytest.raises(LLMTransientError, match="ended its event stream before the reply was complete"):
            adapter.stream("hi", on_text=lambda text: None)
        with listening() as heard, pytest.raises(LLMError, match="after 3 attempts"):
            client(adapter).generate("hi")
    assert heard == [(text, attempt) for attempt in (1, 2, 3) for text in ("Hel", "lo", "!")]
    assert len(srv.requests) == 4


def test_a_finished_stream_without_done_is_complete() -> None:
    with sse_server(lambda n: Stream([*HELLO, FINISH], end="close")) as srv, listening() as heard:
        response = client(OpenAIAdapter(base_url=srv.base_url, model="m")).generate("hi")
    assert response["text"] == joined(heard) == "Hello!" and "usage" not in response
    assert len(srv.requests) == 1


def test_a_server_that_ignores_stream_is_read_whole_and_passed_on_at_once() -> None:
    body = {
        "model": "plain-model",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "all at once"}}],
        "usage": USAGE,
    }
    with sse_server(lambda n: Stream(body=body)) as srv, listening() as heard:
        response = client(OpenAIAdapter(base_url=srv.base_url, model="m")).generate("hi")
    assert heard == [("all at once", 1)]
    assert response == {"text": "all at once", "model": "plain-model", "usage": USAGE}
    assert srv.requests[0]["stream"] is True


def test_http_errors_before_the_stream_are_classified_as_without_streaming() -> None:
    script = {1: Stream(status=429, body={"error": {"message": "slow down"}}, headers={"Retry-After": "0"})}
    with sse_server(lambda n: script.get(n, Stream())) as srv, listening() as heard:
        assert client(OpenAIAdapter(base_url=srv.base_url, model="m")).generate("hi")["text"] == "Hello!"
    assert len(srv.requests) == 2 and {at for _, at in heard} == {2}
    refused = Stream(status=400, body={"error": {"message": f"bad request (key {KEY})"}})
    with sse_server(lambda n: refused) as srv, listening(), pytest.raises(LLMError) as caught:
        client(OpenAIAdapter(base_url=srv.base_url, model="m", api_key=KEY)).generate("hi")
    assert len(srv.requests) == 1 and "HTTP 400" in str(caught.value) and "bad request" in str(caught.value)
    assert not isinstance(caught.value, LLMTransientError) and KEY not in str(caught.value)


def test_an_error_event_mid_stream_is_transient_and_its_message_scrubbed() -> None:
    failing = Stream(
        [HELLO[1], {"error": {"message": f"model overloaded (key {KEY})", "type": "server_error"}}]
    )
    with sse_server(lambda n: failing) as srv:
        adapter = OpenAIAdapter(base_url=srv.base_url, model="m", api_key=KEY)
        with pytest.raises(LLMTransientError, match="model overloaded") as direct:
            adapter.stream("hi", on_text=lambda text: None)
        with listening(), pytest.raises(LLMError, match="after 3 attempts") as caught:
            client(adapter).generate("hi")
    assert KEY not in str(direct.value) and KEY not in str(caught.value) and len(srv.requests) == 4


@pytest.mark.parametrize(
    ("events", "match"),
    [(["not json"], "not JSON"), ([["a", "list"]], "not a JSON object"), ([{"object": "x"}], "no choices")],
    ids=["not-json", "not-an-object", "no-choices"],
)
def test_a_malformed_stream_fails_at_once(events: list[Any], match: str) -> None:
    with (
        sse_server(lambda n: Stream(events)) as srv,
        listening(),
        pytest.raises(LLMError, match=match) as caught,
    ):
        client(OpenAIAdapter(base_url=srv.base_url, model="m")).generate("hi")
    assert not isinstance(caught.value, LLMTransientError) and len(srv.requests) == 1


def test_a_refusal_streamed_without_content_is_reported() -> None:
    refusal = {"choices": [{"index": 0, "delta": {"refusal": "I cannot do that"}, "finish_reason": None}]}
    with (
        sse_server(lambda n: Stream([refusal, FINISH])) as srv,
        pytest.raises(LLMError, match="I cannot do that"),
    ):
        OpenAIAdapter(base_url=srv.base_url, model="m").stream("hi", on_text=lambda text: None)


def test_a_trickling_stream_cannot_hold_an_attempt_past_its_timeout() -> None:
    """Each event arrives well within the read timeout; the attempt's deadline still ends it (transient)."""
    slow = Stream([delta("x")] * 100, pause=0.05)
    with sse_server(lambda n: slow) as srv, listening() as heard:
        started = time.monotonic()
        with pytest.raises(LLMError, match=r"had not finished its reply after timeout = 0\.4 s"):
            client(OpenAIAdapter(base_url=srv.base_url, model="m", timeout=0.4)).generate("hi")
        elapsed = time.monotonic() - started
    assert len(srv.requests) == 3 and elapsed < 3.5
    assert {at for _, at in heard} == {1, 2, 3}  # each attempt streamed what arrived in time


class Stop(Exception):
    pass


def test_what_the_listener_raises_stops_the_stream_unchanged() -> None:
    stop = Stop("the consumer went away")

    def stopping(text: str, attempt: int) -> None:
        if text == "lo":
            raise stop

    with (
        sse_server(lambda n: Stream(pause=0.01)) as srv,
        listening(stopping) as heard,
        pytest.raises(Stop) as caught,
    ):
        client(OpenAIAdapter(base_url=srv.base_url, model="m")).generate("hi")
    assert caught.value is stop and heard == [("Hel", 1), ("lo", 1)] and len(srv.requests) == 1

    # called directly, the adapter lets it through too
    def refuse(text: str) -> None:
        raise stop

    with sse_server(lambda n: Stream()) as srv, pytest.raises(Stop):
        OpenAIAdapter(base_url=srv.base_url, model="m").stream("hi", on_text=refuse)


# --- secrets in streamed text ---------------------------------------------------------------------------------


def test_a_key_echoed_across_deltas_never_reaches_the_listener() -> None:
    """A server that echoes the request's Authorization header, split at the worst places."""
    pieces = ["Your key is ", KEY[:5], KEY[5:13], KEY[13:20], KEY[20:], " and more text after it."]
    with sse_server(lambda n: Stream([*map(delta, pieces), FINISH])) as srv, listening() as heard:
        adapter = OpenAIAdapter(base_url=srv.base_url, model="m", api_key=KEY)
        response = client(adapter).generate("hi")
    shown = joined(heard)
    assert shown == response["text"] == "Your key is *** and more text after it."
    assert len(heard) > 1  # streamed, not held to the end
    seen = ""
    for text, _ in heard:  # no prefix of what was passed on shows 8 characters of the key
        seen += text
        assert not any(KEY[i : i + 8] in seen for i in range(len(KEY) - 7)), seen


SECRET = "pä$s-wörd/+é"  # characters each encoding writes differently (hex, percent, \u escapes, base64)


@settings(max_examples=200, deadline=None)
@example(  # a run scrubbed in one form that a later run, in another form, overlaps: cut a character at a time
    parts=["p%c3%a4%24s-w%c3%b6rd%2f%2b%", "c3%a4$s-w%c3%b6rd"], cuts=[1]
)
@given(
    parts=st.lists(
        st.one_of(
            st.text(alphabet="ab \\\"'%&#x0123456789ABCDEFpäswörd$/+-é", max_size=12),
            st.sampled_from(sorted(forms(SECRET))),
            st.tuples(st.sampled_from(sorted(forms(SECRET))), st.integers(0, 40), st.integers(1, 40)).map(
                lambda form: form[0][
                    form[1] : form[1] + form[2]
                ]  # a piece of a form, maybe too short to scrub
            ),
        ),
        max_size=8,
    ),
    cuts=st.lists(st.integers(min_value=1, max_value=9), min_size=1, max_size=40),
)
def test_released_text_is_always_the_start_of_the_whole_text_scrubbed(
    parts: list[str], cuts: list[int]
) -> None:
    """Whatever the text (pieces of a secret in any of its encodings among look-alike characters) and however it
    is cut: what was passed on is at every moment the start of the final scrubbed text, and joins up to it."""
    register_secret(SECRET)
    whole = "".join(parts)
    passed: list[str] = []
    release = _Release(passed.append)
    final = scrub_secrets(whole)
    at, cut = 0, 0
    while at < len(whole):
        step = cuts[cut % len(cuts)]
        release.add(whole[at : at + step])
        at, cut = at + step, cut + 1
        assert final.startswith("".join(passed))
    assert release.finish() == final == "".join(passed)
