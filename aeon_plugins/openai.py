"""The ``openai`` LLM adapter: any OpenAI-compatible ``/chat/completions`` server over HTTP.

One adapter serves OpenAI itself and the common self-hosted servers; they differ only in how constrained
(JSON Schema) decoding is requested, so ``preset`` picks that dialect:

- ``openai``, ``ollama``: ``response_format = {"type": "json_schema", "json_schema": {...}}``. Ollama's
  OpenAI-compatible endpoint reads only this; its native ``format`` field is not parsed on ``/v1``.
- ``vllm``: the same ``response_format`` (vLLM >= 0.6) plus the legacy top-level ``guided_json`` that older
  servers need; newer ones ignore it.
- ``llama_cpp``: ``response_format = {"type": "json_object", "schema": ...}``, which llama-cpp-python's server
  turns into a grammar (it rejects the ``json_schema`` type).

The adapter only classifies failures (the kernel's ModelClient owns retries, FR-048): transport errors,
timeouts, 408, 429 and 5xx are transient, with the server's ``Retry-After`` passed on; other answers are not.
``timeout`` bounds a whole attempt, not each read: the reply is read in chunks against one deadline, so a server
that trickles bytes cannot hold a call open (the last read may wait up to ``timeout`` again, so an attempt ends
within about twice it). The kernel makes at most three attempts.
The API key goes into the Authorization header and nowhere else: never into a message, a repr or a log. It is
stripped and checked when the adapter is built (a line break or other control character in it is a ConfigError),
and registered as a secret, so every message the adapter builds — and every output Aeon writes — is scrubbed of it
in any form; a server's reply is scrubbed before it is cut to an excerpt, so a key across the cut cannot leak.

``stream`` (issue 28) asks for server-sent events (``"stream": true``, with the usage in a last event) and passes
each content delta on as it arrives, under the same deadline, size limit and error classification; a stream that
ends before ``data: [DONE]`` (or a finish reason) is a transient failure, so the kernel retries it. Deltas are
scrubbed too: the characters at the end that may yet turn out to be part of a secret (``scrub_hold``) wait for
what follows. A server that ignores ``stream`` and answers with one JSON body is read whole and passed on at once.
"""

from __future__ import annotations

import codecs
import json
import math
import time
from collections.abc import Callable, Iterator
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING, Any, Final

from pydantic import SecretStr

from aeon_kernel import ConfigError, LLMAdapter, LLMError, LLMResponse, LLMTransientError, Register, hookimpl
from aeon_kernel.kit import clean_secret, scrub_hold, scrub_secrets

if TYPE_CHECKING:  # imported when an adapter is built, so listing plugins never needs httpx
    import httpx

PRESETS: Final = ("openai", "vllm", "ollama", "llama_cpp")
USAGE_KEYS: Final = ("prompt_tokens", "completion_tokens", "total_tokens")
#: How much of an unexpected response body an error message quotes.
BODY_EXCERPT: Final = 300
#: A reply larger than this is refused while it is read: no chat completion is near it, so the server is broken.
MAX_REPLY_BYTES: Final = 16 * 1024 * 1024


def structured_output(preset: str, schema: dict[str, Any]) -> dict[str, Any]:
    """The request fields that ask ``preset``'s server to constrain decoding to ``schema``."""
    if preset == "llama_cpp":
        return {"response_format": {"type": "json_object", "schema": schema}}
    fields: dict[str, Any] = {
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "aeon_output", "schema": schema, "strict": False},
        }
    }
    if preset == "vllm":
        fields["guided_json"] = schema
    return fields


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """Seconds to wait per a ``Retry-After`` header (delay-seconds or HTTP-date); None if unusable."""
    if not value or not value.strip():
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            seconds = parsedate_to_datetime(value).timestamp() - (time.time() if now is None else now)
        except (TypeError, ValueError, IndexError, OverflowError):
            return None
    return max(0.0, seconds) if math.isfinite(seconds) else None


class OpenAIAdapter(LLMAdapter):
    """Chat completions over HTTP, with constrained decoding in the dialect of the chosen server preset."""

    supports_json_schema = True
    #: one httpx client serves concurrent requests: several runs of an engine call the server at once
    thread_safe = True

    def __init__(
        self,
        model: str | None = None,
        base_url: str | SecretStr = "https://api.openai.com/v1",
        api_key: str | SecretStr | None = None,
        preset: str = "openai",
        timeout: float = 60,
        extra_body: dict[str, Any] | None = None,
    ) -> None:
        if not isinstance(model, str) or not model.strip():
            raise ConfigError('openai LLM: set model = "<model name>" under [llm] in aeon.toml')
        if isinstance(base_url, SecretStr):  # { "$env" = ... }: kept out of logs like every secret
            base_url = base_url.get_secret_value()
        if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
            raise ConfigError(f"openai LLM: base_url must be an http(s) URL, got {base_url!r}")
        if preset not in PRESETS:
            raise ConfigError(f"openai LLM: preset must be one of {list(PRESETS)}, got {preset!r}")
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
            raise ConfigError(f"openai LLM: timeout must be a positive number of seconds, got {timeout!r}")
        if extra_body is not None and not isinstance(extra_body, dict):
            raise ConfigError("openai LLM: extra_body must be a table of extra request fields")
        if isinstance(api_key, SecretStr):
            api_key = api_key.get_secret_value()
        if api_key is not None:
            api_key = _checked_key(api_key)
        self.model = self.model_id = model
        self.base_url = base_url.rstrip("/")
        self.preset = preset
        self.timeout = float(timeout)
        self.extra_body = dict(extra_body or {})
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        try:
            import httpx
        except ImportError:
            raise ConfigError("the openai backend needs httpx: pip install 'aeon-core[openai]'") from None
        self._httpx = httpx
        self._client = httpx.Client(headers=headers, timeout=self.timeout)

    def __repr__(self) -> str:
        return f"OpenAIAdapter(model={self.model!r}, base_url={self.base_url!r}, preset={self.preset!r})"

    def generate(
        self,
        prompt: str,
        system_prompt: str | None = None,
        max_tokens: int = 2048,
        temperature: float = 0.7,
        *,
        json_schema: dict[str, Any] | None = None,
    ) -> LLMResponse:
        return self._complete(self._body(prompt, system_prompt, max_tokens, temperature, json_schema), None)

    def stream(
        self,
        prompt: str,
        system_prompt: str | None = None,
        max_tokens: int = 2048,
        temperature: float = 0.7,
        *,
        json_schema: dict[str, Any] | None = None,
        on_text: OnText,
    ) -> LLMResponse:
        streamed = {"stream": True, "stream_options": {"include_usage": True}}
        return self._complete(
            self._body(prompt, system_prompt, max_tokens, temperature, json_schema, streamed), on_text
        )

    def supports_streaming(self) -> bool:
        return True

    def _body(
        self,
        prompt: str,
        system_prompt: str | None,
        max_tokens: int,
        temperature: float,
        json_schema: dict[str, Any] | None,
        fields: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        messages = [{"role": "system", "content": system_prompt}] if system_prompt else []
        messages.append({"role": "user", "content": prompt})
        body: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "max_tokens": max_tokens,
            "temperature": temperature,
        }
        if json_schema is not None:
            body.update(structured_output(self.preset, json_schema))
        body.update(fields or {})
        body.update(self.extra_body)  # the user's fields win, as the OpenAI SDK's extra_body does
        return body

    def _complete(self, body: dict[str, Any], on_text: OnText | None) -> LLMResponse:
        """POST ``body``; read an event stream as it comes when streaming, any other reply whole."""
        url = f"{self.base_url}/chat/completions"
        deadline = time.monotonic() + self.timeout
        try:
            with self._client.stream("POST", url, json=body) as streamed:
                if on_text is not None and streamed.is_success and _is_event_stream(streamed):
                    return _Events(url, self.model, on_text).read(self._chunks(url, streamed, deadline))
                response = self._read(streamed, self._chunks(url, streamed, deadline, raw=True))
        except self._httpx.TransportError as exc:  # refused, DNS, timeouts (TimeoutException is one)
            raise _scrubbed(LLMTransientError, f"no reply from {url}", exc) from _cause(exc)
        except self._httpx.HTTPError as exc:
            raise _scrubbed(LLMError, f"request to {url} failed", exc) from _cause(exc)
        if not response.is_success:
            raise self._status_error(response)
        result = self._parse(response)
        if on_text is not None and result["text"]:
            on_text(result["text"])  # a server that does not stream: the whole text at once
        return result

    def _chunks(
        self, url: str, streamed: httpx.Response, deadline: float, *, raw: bool = False
    ) -> Iterator[bytes]:
        """The reply's bytes as they come, before the attempt's deadline and within MAX_REPLY_BYTES."""
        size = 0
        for chunk in streamed.iter_raw() if raw else streamed.iter_bytes():
            size += len(chunk)
            if size > MAX_REPLY_BYTES:
                raise LLMError(f"{url} sent a reply larger than {MAX_REPLY_BYTES:,} bytes; it was not read")
            if time.monotonic() > deadline:
                raise LLMTransientError(
                    f"{url} had not finished its reply after timeout = {self.timeout:g} s "
                    "(it was still sending; raise timeout under [llm] if the server is just slow)"
                )
            yield chunk

    def _read(self, streamed: httpx.Response, chunks: Iterator[bytes]) -> httpx.Response:
        """The whole reply: raw (still encoded) bytes with the original headers, so the new response decodes
        them once."""
        content = b"".join(chunks)
        return self._httpx.Response(
            streamed.status_code, headers=streamed.headers, content=content, request=streamed.request
        )

    def _status_error(self, response: httpx.Response) -> LLMError:
        """Transient for 408/429/5xx (with ``Retry-After``), final for anything else."""
        status = response.status_code
        message = scrub_secrets(f"{self.base_url} answered HTTP {status}: {_server_message(response)}")
        if status in (408, 429) or status >= 500:
            retry_after = parse_retry_after(response.headers.get("Retry-After"))
            return LLMTransientError(message, retry_after=retry_after)
        return LLMError(message)

    def _parse(self, response: httpx.Response) -> LLMResponse:
        """Pull text, usage and model out of a 200 answer; anything malformed is an LLMError."""
        try:
            data = response.json()
        except ValueError:
            raise LLMError(f"the reply is not JSON: {_excerpt(response.text)}") from None
        choices = data.get("choices") if isinstance(data, dict) else None
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise LLMError(f"the server's reply has no choices: {_excerpt(response.text)}")
        message = choices[0].get("message")
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, str):
            refusal = message.get("refusal") if isinstance(message, dict) else None
            reason = f"the model refused: {_excerpt(refusal)}" if isinstance(refusal, str) else None
            raise LLMError(f"the server's reply has no message content: {reason or _excerpt(response.text)}")
        # a server that echoes the request's headers into its answer must not put the key into the run's record
        result: LLMResponse = {"text": scrub_secrets(content), "model": self.model}
        if isinstance(data.get("model"), str) and data["model"]:
            result["model"] = scrub_secrets(data["model"])
        usage = data.get("usage")
        if isinstance(usage, dict):
            counts = {k: v for k in USAGE_KEYS if type(v := usage.get(k)) is int}
            if counts:
                result["usage"] = counts
        return result

    def close(self) -> None:
        self._client.close()


OnText = Callable[[str], None]


def _is_event_stream(response: httpx.Response) -> bool:
    kind: str = response.headers.get("content-type", "")
    return kind.split(";")[0].strip().lower() == "text/event-stream"


class _Events:
    """A streamed chat completion: server-sent events read to ``data: [DONE]``, each content delta passed on
    (scrubbed) as it comes, the model and usage taken from whichever event carries them."""

    def __init__(self, url: str, model: str, on_text: OnText) -> None:
        self.url = url
        self.release = _Release(on_text)
        self.result: LLMResponse = {"text": "", "model": model}
        self.refusal = ""
        self.choices = self.finished = False

    def read(self, chunks: Iterator[bytes]) -> LLMResponse:
        decoder = codecs.getincrementaldecoder("utf-8")("replace")
        rest, data = "", []
        for chunk in chunks:
            *lines, rest = (rest + decoder.decode(chunk)).split("\n")
            for line in lines:
                line = line.removesuffix("\r")
                if line.startswith("data:"):
                    data.append(line[5:].removeprefix(" "))
                elif not line and data:  # a blank line ends an event; other fields and comments are ignored
                    if self._event("\n".join(data)):
                        return self._finish()
                    data = []
        if (data and self._event("\n".join(data))) or self.finished:
            return self._finish()  # a server that closes after its last event without [DONE]
        raise LLMTransientError(
            f"{self.url} ended its event stream before the reply was complete (no finish reason, no [DONE])"
        )

    def _event(self, data: str) -> bool:
        """Take one event in; True at ``[DONE]``."""
        if data.strip() == "[DONE]":
            return True
        try:
            event = json.loads(data)
        except ValueError:
            raise LLMError(f"{self.url} sent an event that is not JSON: {_excerpt(data)}") from None
        if not isinstance(event, dict):
            raise LLMError(f"{self.url} sent an event that is not a JSON object: {_excerpt(data)}")
        if event.get("error") is not None:  # the server failed part-way (overloaded, crashed): worth retrying
            error = event["error"]
            message = error.get("message") if isinstance(error, dict) else None
            said = message if isinstance(message, str) else json.dumps(error, ensure_ascii=False)
            raise LLMTransientError(f"{self.url} reported an error in its event stream: {_excerpt(said)}")
        if isinstance(event.get("model"), str) and event["model"]:
            self.result["model"] = scrub_secrets(event["model"])
        usage = event.get("usage")
        if isinstance(usage, dict) and (
            counts := {k: v for k in USAGE_KEYS if type(v := usage.get(k)) is int}
        ):
            self.result["usage"] = counts
        choices = event.get("choices")
        if isinstance(choices, list) and choices and isinstance(choices[0], dict):
            self.choices = True
            delta = choices[0].get("delta")
            if isinstance(delta, dict) and isinstance(delta.get("content"), str):
                self.release.add(delta["content"])
            if isinstance(delta, dict) and isinstance(delta.get("refusal"), str):
                self.refusal += delta["refusal"]
            self.finished = self.finished or bool(choices[0].get("finish_reason"))
        return False

    def _finish(self) -> LLMResponse:
        if not self.choices:
            raise LLMError(f"{self.url} streamed a reply with no choices")
        text = self.release.finish()
        if not text and self.refusal:
            raise LLMError(
                f"the server's reply has no message content: the model refused: {_excerpt(self.refusal)}"
            )
        return {**self.result, "text": text}


class _Release:
    """Streamed text passed on scrubbed: what was passed on is always the start of the whole text scrubbed, as the
    characters at the end that may yet turn out to be part of a secret (``scrub_hold``) wait for what follows.
    Text passed on with nothing scrubbed in it is settled (no secret can reach back into it), so only the rest is
    scrubbed again as pieces come. Only a secret registered while the text streams could make what was passed on
    differ from the whole text scrubbed; the text returned is then scrubbed, and not what was passed on."""

    def __init__(self, on_text: OnText) -> None:
        self.on_text = on_text
        self.settled: list[str] = []
        self.rest = ""  # the text after the settled part, as it came
        self.shown = ""  # what of ``rest``, scrubbed, was passed on

    def add(self, piece: str) -> None:
        self.rest += piece
        # What may yet change is counted in the text as it came, so the final part is scrubbed on its own; it is
        # passed on only while it is the start of the whole text scrubbed (a secret's piece that the held end
        # would complete, or that overlaps it, waits until it is settled).
        ready = scrub_secrets(self.rest[: len(self.rest) - scrub_hold(self.rest)])
        if scrub_secrets(self.rest).startswith(ready):
            self._pass(ready)
        if self.shown and self.rest.startswith(self.shown):
            self.settled.append(self.shown)
            self.rest, self.shown = self.rest[len(self.shown) :], ""

    def finish(self) -> str:
        text = scrub_secrets(self.rest)
        self._pass(text)
        return "".join(self.settled) + text

    def _pass(self, text: str) -> None:
        if len(text) > len(self.shown) and text.startswith(self.shown):
            self.on_text(text[len(self.shown) :])
            self.shown = text


def _checked_key(api_key: object) -> str:
    """The key as the Authorization header carries it: a stripped, registered, one-line ASCII string."""
    if not isinstance(api_key, str):
        # The value itself is never quoted: it may be a secret of the wrong type.
        raise ConfigError(f"openai LLM: api_key must be a string, got a {type(api_key).__name__}")
    api_key = clean_secret(api_key, "openai LLM: api_key")
    if not api_key.isascii():
        raise ConfigError(
            "openai LLM: api_key contains a character that is not ASCII, which an HTTP header cannot carry "
            "(a pasted typographic quote or non-breaking space?). Check how it was written."
        )
    return api_key


def _scrubbed(kind: type[LLMError], what: str, exc: Exception) -> LLMError:
    return kind(scrub_secrets(f"{what}: {type(exc).__name__}: {exc}"))


def _cause(exc: Exception) -> Exception | None:
    """``exc`` as the cause of the adapter's error, unless its text holds a secret (a traceback would show it)."""
    return exc if scrub_secrets(str(exc)) == str(exc) else None


def _server_message(response: httpx.Response) -> str:
    """The server's own explanation: ``error.message`` (OpenAI shape), else the start of the body."""
    try:
        data = response.json()
    except ValueError:
        return _excerpt(response.text) or response.reason_phrase
    error = data.get("error") if isinstance(data, dict) else None
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return _excerpt(error["message"])
    if isinstance(error, str):
        return _excerpt(error)
    return _excerpt(json.dumps(data, ensure_ascii=False))


def _excerpt(text: str) -> str:
    """The start of ``text`` for a message: scrubbed of secrets *before* it is cut, so that a secret across the
    cut cannot leave its head behind, and before its whitespace is collapsed."""
    text = " ".join(scrub_secrets(text).split())
    return text if len(text) <= BODY_EXCERPT else text[:BODY_EXCERPT] + "…"


@hookimpl
def aeon_register_llm_adapters(register: Register) -> None:
    register("openai", OpenAIAdapter)
