"""Recorded replays ("cassettes") for any LLM adapter.

``record`` wraps a real adapter and appends every request and response to a JSONL cassette; ``replay`` serves
responses from the cassette only, without loading a model, and fails loudly on a request it has not seen,
naming the nearest one it has. A request is keyed by a hash of its canonical form: model, prompt, system
prompt, JSON Schema, and sampling parameters. Identical requests are served in the order they were recorded
(the last one again if more come).

File format: a header line ``{"aeon_cassette": 1, "model": ..., "supports_json_schema": ...}``, then one line per
request ``{"key": ..., "request": {...}, "response": {...}}``.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import threading
from pathlib import Path
from typing import Any, Final

from aeon_kernel.contracts import LLMAdapter, LLMResponse
from aeon_kernel.errors import ConfigError, LLMError
from aeon_kernel.schemas import canonical_json
from aeon_kernel.secrets import scrub_secrets_json

FORMAT_VERSION: Final = 1


class CassetteMissError(LLMError):
    """Replay was asked for a request the cassette does not hold."""


def request_key(request: dict[str, Any]) -> str:
    return hashlib.sha256(canonical_json(request).encode()).hexdigest()[:24]


def _request(
    model: str, prompt: str, system_prompt: str | None, max_tokens: int, temperature: float, schema: Any
) -> dict[str, Any]:
    return {
        "model": model,
        "prompt": prompt,
        "system_prompt": system_prompt,
        "max_tokens": max_tokens,
        "temperature": temperature,
        "json_schema": schema,
    }


class RecordingAdapter(LLMAdapter):
    """Passes requests to ``inner`` and appends each request and response to ``path``."""

    def __init__(self, inner: LLMAdapter, path: str | Path) -> None:
        self.inner = inner
        self.path = Path(path)
        self.model_id = inner.model_id
        self.supports_json_schema = inner.supports_json_schema
        self._lock = threading.Lock()
        header = {
            "aeon_cassette": FORMAT_VERSION,
            "model": self.model_id,
            "supports_json_schema": self.supports_json_schema,
        }
        if not self.path.exists() or self.path.stat().st_size == 0:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.path.write_text(json.dumps(header) + "\n", encoding="utf-8")
        else:
            existing = _read_header(self.path)
            if existing.get("model") != self.model_id:
                raise ConfigError(
                    f"cassette {self.path} was recorded with model {existing.get('model')!r}, not "
                    f"{self.model_id!r}: record into a new file"
                )

    def generate(
        self,
        prompt: str,
        system_prompt: str | None = None,
        max_tokens: int = 2048,
        temperature: float = 0.7,
        *,
        json_schema: dict[str, Any] | None = None,
    ) -> LLMResponse:
        kwargs: dict[str, Any] = {"json_schema": json_schema} if json_schema is not None else {}
        response = self.inner.generate(prompt, system_prompt, max_tokens, temperature, **kwargs)
        request = _request(self.model_id, prompt, system_prompt, max_tokens, temperature, json_schema)
        line = scrub_secrets_json(  # the key is of the request as asked; the text kept is scrubbed
            json.dumps(
                {"key": request_key(request), "request": request, "response": response}, ensure_ascii=False
            )
        )
        with self._lock, self.path.open("a", encoding="utf-8") as file:
            file.write(line + "\n")
        return response

    def close(self) -> None:
        self.inner.close()


class ReplayAdapter(LLMAdapter):
    """Serves responses from a cassette; never calls a model."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        if not self.path.is_file():
            raise ConfigError(
                f"cassette {self.path} does not exist; record it first with --record {self.path}"
            )
        header = _read_header(self.path)
        self.model_id = str(header.get("model", "unknown"))
        self.supports_json_schema = bool(header.get("supports_json_schema"))
        self._responses: dict[str, list[LLMResponse]] = {}
        self._requests: dict[str, dict[str, Any]] = {}
        self._served: dict[str, int] = {}
        for number, line in enumerate(self.path.read_text(encoding="utf-8").splitlines()[1:], start=2):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
                key, request, response = record["key"], record["request"], record["response"]
            except (ValueError, KeyError, TypeError):
                raise ConfigError(f"cassette {self.path}, line {number}: not a cassette record") from None
            self._responses.setdefault(key, []).append(response)
            self._requests.setdefault(key, request)

    def generate(
        self,
        prompt: str,
        system_prompt: str | None = None,
        max_tokens: int = 2048,
        temperature: float = 0.7,
        *,
        json_schema: dict[str, Any] | None = None,
    ) -> LLMResponse:
        request = _request(self.model_id, prompt, system_prompt, max_tokens, temperature, json_schema)
        key = request_key(request)
        responses = self._responses.get(key)
        if responses is None:
            raise CassetteMissError(self._miss_message(request))
        index = self._served.get(key, 0)
        self._served[key] = index + 1
        return responses[min(index, len(responses) - 1)]

    def _miss_message(self, request: dict[str, Any]) -> str:
        if not self._requests:
            return f"cassette {self.path} holds no requests; record it with --record"
        wanted = canonical_json(request)
        nearest = max(
            self._requests.values(),
            key=lambda r: difflib.SequenceMatcher(
                None, canonical_json(r), wanted, autojunk=False
            ).quick_ratio(),
        )
        differences = [k for k in request if request[k] != nearest.get(k)]
        detail = ""
        if "prompt" in differences:
            diff = difflib.unified_diff(
                nearest["prompt"].splitlines(),
                request["prompt"].splitlines(),
                "recorded",
                "requested",
                lineterm="",
                n=0,
            )
            detail = "\n" + "\n".join(list(diff)[2:12])
        return (
            f"cassette {self.path} has no recording of this request; the nearest recorded one differs in "
            f"{differences}. Re-record the cassette if the prompts changed on purpose.{detail}"
        )


def _read_header(path: Path) -> dict[str, Any]:
    with path.open(encoding="utf-8") as file:
        first = file.readline()
    try:
        header = json.loads(first)
    except ValueError:
        header = None
    if not isinstance(header, dict) or header.get("aeon_cassette") != FORMAT_VERSION:
        raise ConfigError(f"{path} is not an Aeon cassette (version {FORMAT_VERSION})")
    return header
