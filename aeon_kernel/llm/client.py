"""The run's view of the model: one retry policy, schema hints only where supported, and a record of every call.

Retries live here and nowhere else (FR-048): adapters only say whether a failure is transient, so an adapter
that also retried would multiply the attempts. Exhaustion becomes an :class:`LLMError` the loop turns into a
structured failure (FR-049).

One client is shared by every run of an engine (and by the supervisor and planner built on it), so the responses
of a cycle are not kept on the client: a run calls :func:`begin_capture` as each cycle starts (and
:func:`end_capture` as it ends), and every response given in between — in that thread or task — lands in that
cycle's list and nowhere else. Each carries its request (prompt, system prompt, schema) and start time until the
run hands them to ``aeon_model_called`` and stores the rest.

Calls to the adapter itself take turns: an embedded model (llama.cpp) serves one request at a time and a scripted
one counts its calls, so several runs of one engine (``Engine.submit``, ``aeon batch``) must not call
``generate`` at once. An adapter that can (an HTTP client) says so with ``thread_safe = True`` and is called
freely. Only the call is serialised: retries' backoff, validation and the runs' tool calls overlap.

A consumer that wants the reply as it is written (issue 28) sets a listener the same way (:func:`begin_listening`);
while one is set, an adapter that ``supports_streaming()`` is called through ``stream`` instead of ``generate``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from contextlib import nullcontext
from contextvars import ContextVar, Token
from typing import TYPE_CHECKING, Any, Final

from aeon_kernel.contracts import LLMAdapter, LLMResponse
from aeon_kernel.errors import AeonError, LLMError, LLMTransientError
from aeon_kernel.memory_values import is_utf8

if TYPE_CHECKING:
    from tenacity import RetryCallState

ATTEMPTS: Final = 3
#: the keys under which a captured call carries its request and when it began (wall clock, ns): the run takes them
#: out before the call is stored (state and log keep outputs only) and gives them to ``aeon_model_called``
REQUEST: Final = "request"
STARTED: Final = "started_ns"

_captured: ContextVar[list[dict[str, Any]] | None] = ContextVar("aeon_model_calls", default=None)
#: what a listener is given: a new piece of the reply, and the attempt writing it (1, then 2, 3 after retries)
TextListener = Callable[[str, int], None]
_listener: ContextVar[TextListener | None] = ContextVar("aeon_text_listener", default=None)


def begin_capture(calls: list[dict[str, Any]]) -> Token[list[dict[str, Any]] | None]:
    """From now on, every model response in this thread or task goes to ``calls``; undo with :func:`end_capture`."""
    return _captured.set(calls)


def end_capture(token: Token[list[dict[str, Any]] | None]) -> None:
    _captured.reset(token)


def captured() -> list[dict[str, Any]] | None:
    """The list this thread or task is capturing model responses into (None outside a cycle)."""
    return _captured.get()


def begin_listening(listener: TextListener) -> Token[TextListener | None]:
    """From now on, in this thread or task, the reply of an adapter that can stream goes to ``listener`` piece by
    piece as the model writes it, with the attempt's number: a retry after a transient failure starts the text over
    (attempt 2, 3). Undo with :func:`end_listening`.

    The listener runs while the model is held, so it must be quick and must not call the model. What it raises ends
    the call and propagates as it is, neither wrapped into an LLMError nor retried: that is how a consumer stops.
    """
    return _listener.set(listener)


def end_listening(token: Token[TextListener | None]) -> None:
    _listener.reset(token)


class _Stopped(BaseException):
    """What a listener raised, carried unchanged past the adapter's handlers and the retry policy."""

    def __init__(self, error: BaseException) -> None:
        self.error = error


def _method(adapter: LLMAdapter, relay: _Relay | None) -> str:
    return f"{type(adapter).__name__}.{'generate' if relay is None else 'stream'}"


class _Relay:
    """An adapter's ``on_text``: each piece to the listener with the attempt's number (lone surrogates escaped,
    as in the final text, so that the pieces still join up to it)."""

    def __init__(self, listener: TextListener) -> None:
        self.listener, self.attempt = listener, 0

    def __call__(self, delta: str) -> None:
        if not delta.isascii() and not is_utf8(delta):
            delta = delta.encode("utf-8", "backslashreplace").decode("utf-8")
        try:
            self.listener(delta, self.attempt)
        except BaseException as exc:
            raise _Stopped(exc) from None


class ModelClient(LLMAdapter):
    """Wraps an adapter with the kernel's retry policy; each response also goes to the cycle capturing calls."""

    def __init__(
        self,
        adapter: LLMAdapter,
        *,
        attempts: int = ATTEMPTS,
        initial_wait: float = 0.5,
        max_wait: float = 8.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.adapter = adapter
        self.supports_json_schema = adapter.supports_json_schema
        self.model_id = adapter.model_id
        self._attempts = attempts
        self._initial_wait, self._max_wait = initial_wait, max_wait
        self._backoff: Callable[[RetryCallState], float] | None = None
        self._sleep = sleep
        #: one call at a time, unless the adapter declares ``thread_safe = True`` (see the module docstring)
        self._turns: threading.Lock | None = (
            None if getattr(adapter, "thread_safe", False) is True else threading.Lock()
        )

    def _wait(self, state: RetryCallState) -> float:
        """Exponential backoff with jitter, but never sooner than the server's ``Retry-After``."""
        if self._backoff is None:
            from tenacity import wait_exponential_jitter

            self._backoff = wait_exponential_jitter(
                multiplier=self._initial_wait, max=self._max_wait, jitter=self._initial_wait
            )
        backoff = float(self._backoff(state))
        error = state.outcome.exception() if state.outcome else None
        retry_after = getattr(error, "retry_after", None)
        return max(backoff, float(retry_after)) if retry_after else backoff

    def generate(
        self,
        prompt: str,
        system_prompt: str | None = None,
        max_tokens: int = 2048,
        temperature: float = 0.7,
        *,
        json_schema: dict[str, Any] | None = None,
    ) -> LLMResponse:
        schema = json_schema if self.adapter.supports_json_schema else None
        listener = _listener.get()
        relay = _Relay(listener) if listener is not None and self.adapter.supports_streaming() else None
        began, started = time.time_ns(), time.perf_counter()
        try:
            try:  # the common case costs one call: the retry machinery starts only after a transient failure
                response = self._call_once(prompt, system_prompt, max_tokens, temperature, schema, relay)
            except LLMTransientError as first:
                response = self._retry(first, prompt, system_prompt, max_tokens, temperature, schema, relay)
        except _Stopped as stopped:
            raise stopped.error from stopped.error.__cause__
        calls = _captured.get()
        if calls is not None:
            took = round((time.perf_counter() - started) * 1000, 3)  # retries and backoff included
            request = {
                "model": self.model_id,
                "prompt": prompt,
                "system_prompt": system_prompt,
                "max_tokens": max_tokens,
                "temperature": temperature,
                "json_schema": schema,
            }
            calls.append(
                {
                    **response,
                    "constrained": schema is not None,
                    "duration_ms": took,
                    REQUEST: request,
                    STARTED: began,
                }
            )
        return response

    def _retry(self, first: LLMTransientError, *args: Any) -> LLMResponse:
        """Attempts 2..N under tenacity's policy; attempt 1 is the failure that already happened, replayed."""
        from tenacity import Retrying, retry_if_exception_type, stop_after_attempt

        replay: list[LLMTransientError] = [first]

        def attempt() -> LLMResponse:
            if replay:
                raise replay.pop()
            return self._call_once(*args)

        retrying = Retrying(
            stop=stop_after_attempt(self._attempts),
            wait=self._wait,
            retry=retry_if_exception_type(LLMTransientError),
            sleep=self._sleep,
            reraise=True,
        )
        try:
            return retrying(attempt)
        except LLMTransientError as exc:
            raise LLMError(f"the model is unavailable after {self._attempts} attempts: {exc}") from exc

    def _call_once(
        self,
        prompt: str,
        system_prompt: str | None,
        max_tokens: int,
        temperature: float,
        schema: dict[str, Any] | None,
        relay: _Relay | None,
    ) -> LLMResponse:
        kwargs: dict[str, Any] = {"json_schema": schema} if schema is not None else {}
        try:
            with self._turns or nullcontext():
                if relay is None:
                    response = self.adapter.generate(prompt, system_prompt, max_tokens, temperature, **kwargs)
                else:
                    relay.attempt += 1
                    response = self.adapter.stream(
                        prompt, system_prompt, max_tokens, temperature, on_text=relay, **kwargs
                    )
        except AeonError:
            raise
        except Exception as exc:  # an adapter bug must still end the run in a structured result
            raise LLMError(f"{_method(self.adapter, relay)} raised {type(exc).__name__}: {exc}") from exc
        if not isinstance(response, dict) or not isinstance(response.get("text"), str):
            raise LLMError(f"{_method(self.adapter, relay)} must return a dict with a str 'text'")
        text = response["text"]
        if not text.isascii() and not is_utf8(text):
            # a lone surrogate has no UTF-8 form (no store, log or terminal can hold it): kept as its escape
            response = {**response, "text": text.encode("utf-8", "backslashreplace").decode("utf-8")}
        return response

    def close(self) -> None:
        self.adapter.close()


def total_usage(calls: list[dict[str, Any]]) -> dict[str, int]:
    """Sum the ``usage`` counters of several responses (tokens per cycle in the JSONL log), with the number of
    calls (``llm_calls``) and the time spent in them in whole milliseconds (``llm_ms``)."""
    total: dict[str, int] = {}
    spent = 0.0
    for call in calls:
        for key, value in (call.get("usage") or {}).items():
            if isinstance(value, int):
                total[key] = total.get(key, 0) + value
        duration = call.get("duration_ms")
        spent += duration if isinstance(duration, (int, float)) else 0.0
    total["llm_calls"] = len(calls)
    total["llm_ms"] = round(spent)
    return total


class NoModel(LLMAdapter):
    """The model of an engine whose runs never need one: any call is an error saying why there is none."""

    model_id = "none"

    def __init__(self, reason: str) -> None:
        self.reason = reason

    def generate(
        self,
        prompt: str,
        system_prompt: str | None = None,
        max_tokens: int = 2048,
        temperature: float = 0.7,
        *,
        json_schema: dict[str, Any] | None = None,
    ) -> LLMResponse:
        raise LLMError(f"no model is loaded: {self.reason}")
