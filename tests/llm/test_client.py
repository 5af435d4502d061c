"""The kernel's retry policy around any adapter (FR-048/049): transient errors only, 3 attempts, backoff."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from aeon_kernel import LLMAdapter, LLMError, LLMResponse, LLMTransientError
from aeon_kernel.llm.client import ModelClient, begin_capture, end_capture, total_usage


class Flaky(LLMAdapter):
    """Fails with the queued errors, then answers."""

    supports_json_schema = True

    def __init__(self, *errors: Exception, reply: Any = None) -> None:
        self.errors = list(errors)
        self.calls: list[dict[str, Any]] = []
        self.reply = reply if reply is not None else {"text": "ok", "usage": {"prompt_tokens": 3}}

    def generate(
        self,
        prompt: str,
        system_prompt: str | None = None,
        max_tokens: int = 2048,
        temperature: float = 0.7,
        *,
        json_schema: dict[str, Any] | None = None,
    ) -> LLMResponse:
        self.calls.append({"prompt": prompt, "json_schema": json_schema})
        if self.errors:
            raise self.errors.pop(0)
        return self.reply  # type: ignore[no-any-return]


@contextmanager
def capture_calls() -> Iterator[list[dict[str, Any]]]:
    """What a run does around each cycle."""
    calls: list[dict[str, Any]] = []
    token = begin_capture(calls)
    try:
        yield calls
    finally:
        end_capture(token)


def client(adapter: LLMAdapter) -> tuple[ModelClient, list[float]]:
    sleeps: list[float] = []
    return ModelClient(adapter, initial_wait=0.5, max_wait=8, sleep=sleeps.append), sleeps


def test_transient_errors_are_retried_with_growing_backoff() -> None:
    adapter = Flaky(LLMTransientError("503"), LLMTransientError("timeout"))
    llm, sleeps = client(adapter)
    assert llm.generate("hi")["text"] == "ok"
    assert len(adapter.calls) == 3
    assert len(sleeps) == 2 and 0.5 <= sleeps[0] <= 1.0 and 1.0 <= sleeps[1] <= 1.5


def test_three_attempts_then_llm_error() -> None:
    adapter = Flaky(*[LLMTransientError("down")] * 5)
    llm, sleeps = client(adapter)
    with pytest.raises(LLMError, match="after 3 attempts: down"):
        llm.generate("hi")
    assert len(adapter.calls) == 3 and len(sleeps) == 2


def test_retry_after_is_honoured() -> None:
    adapter = Flaky(LLMTransientError("429", retry_after=5.0))
    llm, sleeps = client(adapter)
    llm.generate("hi")
    assert sleeps == [pytest.approx(5.0, abs=1.0)] and sleeps[0] >= 5.0


def test_permanent_errors_are_not_retried() -> None:
    adapter = Flaky(LLMError("400 bad request"))
    llm, sleeps = client(adapter)
    with pytest.raises(LLMError, match="400"):
        llm.generate("hi")
    assert len(adapter.calls) == 1 and sleeps == []


def test_an_adapter_bug_becomes_an_llm_error() -> None:
    llm, _ = client(Flaky(KeyError("choices")))
    with pytest.raises(LLMError, match="KeyError"):
        llm.generate("hi")


@pytest.mark.parametrize("reply", [{"no_text": 1}, {"text": 5}, "just a string"])
def test_a_malformed_response_is_an_llm_error(reply: Any) -> None:
    llm, _ = client(Flaky(reply=reply))
    with pytest.raises(LLMError, match="must return a dict"):
        llm.generate("hi")


def test_schema_is_passed_only_to_adapters_that_can_constrain() -> None:
    schema = {"type": "object"}
    capable = Flaky()
    client(capable)[0].generate("hi", json_schema=schema)
    incapable = Flaky()
    incapable.supports_json_schema = False
    client(incapable)[0].generate("hi", json_schema=schema)
    assert capable.calls[0]["json_schema"] == schema
    assert incapable.calls[0]["json_schema"] is None


def test_calls_are_captured_per_block_with_usage() -> None:
    """A run captures each cycle's responses; a call outside any capture block is recorded nowhere."""
    llm, _ = client(Flaky())
    llm.generate("outside")
    with capture_calls() as calls:
        llm.generate("a")
        llm.generate("b", json_schema={"type": "object"})
    llm.generate("after")
    assert [c["constrained"] for c in calls] == [False, True]
    assert all(c["duration_ms"] >= 0 for c in calls)
    usage = total_usage(calls)
    assert usage == {
        "prompt_tokens": 6,
        "llm_calls": 2,
        "llm_ms": round(sum(c["duration_ms"] for c in calls)),
    }


def test_nested_and_concurrent_captures_stay_apart() -> None:
    """Two runs sharing one client, in two threads at once, each see only their own calls."""

    class Echo(Flaky):
        def generate(self, prompt: str, *args: Any, **kwargs: Any) -> LLMResponse:
            return {"text": prompt}

    llm, _ = client(Echo())
    seen: dict[str, list[str]] = {}
    barrier = threading.Barrier(2)

    def cycle(name: str) -> None:
        with capture_calls() as calls:
            barrier.wait()
            for _ in range(20):
                llm.generate(name)
        seen[name] = [c["text"] for c in calls]

    threads = [threading.Thread(target=cycle, args=(n,)) for n in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen == {"a": ["a"] * 20, "b": ["b"] * 20}
    with capture_calls() as outer:
        llm.generate("x")
        with capture_calls() as inner:
            llm.generate("y")
    assert (len(outer), len(inner)) == (1, 1)
