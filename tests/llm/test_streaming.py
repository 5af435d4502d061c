"""The reply as it is written (issue 28): the kernel's client streams while someone listens, and only then.

The adapters here are small real ``LLMAdapter`` subclasses that count how they were called; the scripted model is
the one tests and demos use. The real backends are tested in ``tests/plugins/test_openai_streaming.py`` and
``tests/llm/test_local_streaming.py``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from aeon_kernel import LLMAdapter, LLMError, LLMResponse, LLMTransientError
from aeon_kernel.kit import ModelClient, begin_capture, begin_listening, end_capture, end_listening
from aeon_kernel.llm.client import total_usage
from aeon_kernel.testing.scripted import ScriptedLLM

Heard = list[tuple[str, int]]


class Counting(LLMAdapter):
    """Streams ``reply`` in three-character pieces; raises the queued errors first, each after ``partial``
    characters were streamed (a connection dropping part-way). Counts which method was called."""

    supports_json_schema = True

    def __init__(
        self, reply: str = "Hello, streamed world", *errors: Exception, streams: bool = True
    ) -> None:
        self.reply, self.errors, self.streams = reply, list(errors), streams
        self.generated = self.streamed = 0
        self.partial = 4
        self.schemas: list[dict[str, Any] | None] = []

    def generate(
        self,
        prompt: str,
        system_prompt: str | None = None,
        max_tokens: int = 2048,
        temperature: float = 0.7,
        *,
        json_schema: dict[str, Any] | None = None,
    ) -> LLMResponse:
        self.generated += 1
        return {
            "text": self.reply,
            "usage": {"prompt_tokens": 5, "completion_tokens": 7},
            "model": "counting",
        }

    def stream(
        self,
        prompt: str,
        system_prompt: str | None = None,
        max_tokens: int = 2048,
        temperature: float = 0.7,
        *,
        json_schema: dict[str, Any] | None = None,
        on_text: Callable[[str], None],
    ) -> LLMResponse:
        self.streamed += 1
        self.schemas.append(json_schema)
        if self.errors:
            on_text(self.reply[: self.partial])
            raise self.errors.pop(0)
        for start in range(0, len(self.reply), 3):
            on_text(self.reply[start : start + 3])
        return {
            "text": self.reply,
            "usage": {"prompt_tokens": 5, "completion_tokens": 7},
            "model": "counting",
        }

    def supports_streaming(self) -> bool:
        return self.streams


def client(adapter: LLMAdapter) -> tuple[ModelClient, list[float]]:
    sleeps: list[float] = []
    return ModelClient(adapter, initial_wait=0.01, max_wait=0.02, sleep=sleeps.append), sleeps


@contextmanager
def listening() -> Iterator[Heard]:
    heard: Heard = []
    token = begin_listening(lambda delta, attempt: heard.append((delta, attempt)))
    try:
        yield heard
    finally:
        end_listening(token)


def test_without_a_listener_the_adapter_is_asked_to_generate_not_to_stream() -> None:
    adapter = Counting()
    llm, _ = client(adapter)
    assert llm.generate("hi")["text"] == "Hello, streamed world"
    assert (adapter.generated, adapter.streamed) == (1, 0)


def test_with_a_listener_the_pieces_come_in_order_and_join_up_to_the_text() -> None:
    adapter = Counting()
    llm, _ = client(adapter)
    calls: list[dict[str, Any]] = []
    capture = begin_capture(calls)
    try:
        with listening() as heard:
            response = llm.generate("hi", json_schema={"type": "object"})
    finally:
        end_capture(capture)
    assert (adapter.generated, adapter.streamed) == (0, 1)
    assert adapter.schemas == [{"type": "object"}]  # the schema goes to stream as it would to generate
    assert [d for d, _ in heard] == ["Hel", "lo,", " st", "rea", "med", " wo", "rld"]
    assert "".join(d for d, _ in heard) == response["text"] and {a for _, a in heard} == {1}
    # the cycle's record is the same as without streaming: usage, constrained, the request
    assert total_usage(calls)["completion_tokens"] == 7 and calls[0]["constrained"] is True
    assert calls[0]["request"]["prompt"] == "hi"


def test_after_the_listener_is_removed_the_client_generates_again() -> None:
    adapter = Counting()
    llm, _ = client(adapter)
    with listening() as heard:
        llm.generate("a")
    llm.generate("b")
    assert (adapter.streamed, adapter.generated) == (1, 1) and heard


def test_an_adapter_that_cannot_stream_generates_and_the_listener_hears_nothing() -> None:
    adapter = Counting(streams=False)
    llm, _ = client(adapter)
    with listening() as heard:
        assert llm.generate("hi")["text"] == "Hello, streamed world"
    assert (adapter.generated, adapter.streamed, heard) == (1, 0, [])


def test_a_retry_starts_the_text_over_with_the_next_attempts_number() -> None:
    adapter = Counting("abcdefgh", LLMTransientError("connection dropped"), LLMTransientError("again"))
    llm, sleeps = client(adapter)
    with listening() as heard:
        response = llm.generate("hi")
    assert heard == [("abcd", 1), ("abcd", 2), ("abc", 3), ("def", 3), ("gh", 3)]
    assert "".join(d for d, a in heard if a == 3) == response["text"] == "abcdefgh"
    assert adapter.streamed == 3 and len(sleeps) == 2


def test_retries_given_up_are_the_usual_llm_error() -> None:
    adapter = Counting("abcdefgh", *[LLMTransientError("down")] * 3)
    llm, _ = client(adapter)
    with listening() as heard, pytest.raises(LLMError, match="after 3 attempts: down"):
        llm.generate("hi")
    assert [a for _, a in heard] == [1, 2, 3]


class Stop(Exception):
    pass


@pytest.mark.parametrize("error", [Stop("enough"), ValueError("consumer gone"), LLMTransientError("mine")])
def test_what_the_listener_raises_ends_the_call_unchanged_and_is_never_retried(error: Exception) -> None:
    """Even an error the adapter would wrap (ValueError) or the kernel would retry (LLMTransientError)."""

    class Wrapping(Counting):  # an adapter that turns ValueError into LLMError, as llama.cpp's does
        def stream(self, *args: Any, **kwargs: Any) -> LLMResponse:
            try:
                return super().stream(*args, **kwargs)
            except ValueError as exc:
                raise LLMError(f"wrapped: {exc}") from None

    adapter = Wrapping("one two three four")
    llm, sleeps = client(adapter)
    heard: list[str] = []

    def listener(delta: str, attempt: int) -> None:
        heard.append(delta)
        if len(heard) == 2:
            raise error

    token = begin_listening(listener)
    try:
        with pytest.raises(type(error)) as caught:
            llm.generate("hi")
    finally:
        end_listening(token)
    assert caught.value is error
    assert heard == ["one", " tw"]  # the adapter stopped at once
    assert adapter.streamed == 1 and sleeps == []


def test_an_adapter_bug_while_streaming_is_an_llm_error_naming_stream() -> None:
    class Broken(Counting):
        def stream(self, *args: Any, **kwargs: Any) -> LLMResponse:
            raise KeyError("choices")

    llm, _ = client(Broken())
    with listening(), pytest.raises(LLMError, match=r"Broken\.stream raised KeyError"):
        llm.generate("hi")


def test_lone_surrogates_are_escaped_in_the_pieces_as_in_the_text() -> None:
    adapter = Counting("ok \ud800 end")
    llm, _ = client(adapter)
    with listening() as heard:
        response = llm.generate("hi")
    assert response["text"] == "ok \\ud800 end"
    assert "".join(d for d, _ in heard) == response["text"]


def test_a_listener_hears_only_its_own_thread() -> None:
    llm, _ = client(Counting())
    heard: dict[str, Heard] = {}
    barrier = threading.Barrier(2)

    def run(name: str, listen: bool) -> None:
        if not listen:
            barrier.wait()
            for _ in range(10):
                llm.generate(name)
            return
        with listening() as mine:
            barrier.wait()
            for _ in range(10):
                llm.generate(name)
        heard[name] = mine

    threads = [
        threading.Thread(target=run, args=("a", True)),
        threading.Thread(target=run, args=("b", False)),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert "".join(d for d, _ in heard["a"]) == "Hello, streamed world" * 10


def test_the_default_stream_passes_the_whole_text_once() -> None:
    """Any adapter can be streamed; one that only generates says so."""

    class Plain(LLMAdapter):
        def generate(self, prompt: str, *args: Any, **kwargs: Any) -> LLMResponse:
            return {"text": f"echo: {prompt}", "usage": {"completion_tokens": 2}}

    pieces: list[str] = []
    response = Plain().stream("hi", on_text=pieces.append)
    assert pieces == ["echo: hi"] and response["usage"] == {"completion_tokens": 2}
    assert Plain().supports_streaming() is False


def test_the_scripted_model_streams_word_by_word_and_counts_one_call() -> None:
    scripted = ScriptedLLM(["Fifteen is  the sum.\n", {"answer": 15}])
    assert scripted.supports_streaming()
    llm, _ = client(scripted)
    with listening() as heard:
        first = llm.generate("p1")
        second = llm.generate("p2")
    assert [d for d, _ in heard] == ["Fifteen", " is", "  the", " sum.", "\n", '{"answer":', " 15}"]
    assert (first["text"], second["text"]) == ("Fifteen is  the sum.\n", '{"answer": 15}')
    assert [p["prompt"] for p in scripted.prompts] == ["p1", "p2"]
    with pytest.raises(LLMError, match="no response left"), listening():
        llm.generate("p3")
