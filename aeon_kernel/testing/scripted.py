"""The scripted model: replays prepared responses in order, for tests, demos and bug reports (simonw/llm's mock
model). Test support, so plugin authors' tests can use it without a model; the ``scripted`` plugin registers it
as an LLM adapter (``[llm] use = "scripted"``).

``responses`` is a path to a JSON file holding an array of the raw texts the model returns (or the array
itself, in code). Items that are not strings are sent as their JSON text, which keeps scripts readable.
When the script runs out the adapter raises LLMError, which ends the run with a structured failure. Streamed
(issue 28), a response comes word by word, each word with the whitespace before it, so tests can check the pieces.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from aeon_kernel.contracts import LLMAdapter, LLMResponse
from aeon_kernel.errors import ConfigError, LLMError

_WORDS = re.compile(r"\s*\S+|\s+")


def load_script(responses: str | Path | list[Any]) -> list[str]:
    source = "responses"
    if isinstance(responses, (str, Path)):
        source = f"responses file {str(responses)!r}"
        path = Path(responses)
        try:
            responses = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ConfigError(f"scripted LLM: responses file {str(path)!r} does not exist") from None
        except (OSError, ValueError) as exc:
            raise ConfigError(f"scripted LLM: cannot read {str(path)!r} as JSON: {exc}") from None
    if not isinstance(responses, list):
        raise ConfigError(f"scripted LLM: {source} must hold a JSON array of response texts")
    return [item if isinstance(item, str) else json.dumps(item) for item in responses]


class ScriptedLLM(LLMAdapter):
    model_id = "scripted"

    def __init__(self, responses: str | Path | list[Any] | None = None) -> None:
        if responses is None:
            raise ConfigError('scripted LLM: set responses = "file.json" under [llm] in aeon.toml')
        self.responses = load_script(responses)
        self.prompts: list[dict[str, Any]] = []

    def generate(
        self,
        prompt: str,
        system_prompt: str | None = None,
        max_tokens: int = 2048,
        temperature: float = 0.7,
        *,
        json_schema: dict[str, Any] | None = None,
    ) -> LLMResponse:
        index = len(self.prompts)
        self.prompts.append({"prompt": prompt, "system_prompt": system_prompt, "json_schema": json_schema})
        if index >= len(self.responses):
            raise LLMError(f"the scripted LLM has no response left: all {len(self.responses)} were used")
        return {"text": self.responses[index], "model": self.model_id, "usage": {}}

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
        response = self.generate(prompt, system_prompt, max_tokens, temperature, json_schema=json_schema)
        for piece in _WORDS.findall(response["text"]):
            on_text(piece)
        return response

    def supports_streaming(self) -> bool:
        return True
