"""An adapter wrapper for replay tests of modules that fall back when the model fails."""

from __future__ import annotations

from typing import Any

from aeon_kernel import LLMAdapter, LLMResponse


class Watch(LLMAdapter):
    """Passes calls through and keeps the errors, so a cassette miss cannot hide behind a module's fallback
    (the default profile, a structural-only report, the deterministic verdict, no refinement)."""

    def __init__(self, inner: LLMAdapter) -> None:
        self.inner = inner
        self.errors: list[Exception] = []
        self.model_id, self.supports_json_schema = inner.model_id, inner.supports_json_schema

    def generate(
        self,
        prompt: str,
        system_prompt: str | None = None,
        max_tokens: int = 2048,
        temperature: float = 0.7,
        *,
        json_schema: dict[str, Any] | None = None,
    ) -> LLMResponse:
        try:
            return self.inner.generate(
                prompt, system_prompt, max_tokens, temperature, json_schema=json_schema
            )
        except Exception as exc:
            self.errors.append(exc)
            raise
