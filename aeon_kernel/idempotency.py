"""The idempotency key of the tool call in progress: ``"<run_id>:<step_id>"``.

A resumed run executes a step that was running when the process died once more, with the same key, so a tool
with side effects can recognise a repeat (issue: durable runs). Tools read it with
``aeon_kernel.current_idempotency_key()``; it is None outside a tool call.
"""

from __future__ import annotations

from contextvars import ContextVar, Token

_current: ContextVar[str | None] = ContextVar("aeon_idempotency_key", default=None)


def current_idempotency_key() -> str | None:
    return _current.get()


class idempotency_scope:
    """Within the block, :func:`current_idempotency_key` is ``"<run_id>:<step_id>"``."""

    __slots__ = ("_key", "_token")

    def __init__(self, run_id: str, step_id: str) -> None:
        self._key = f"{run_id}:{step_id}"
        self._token: Token[str | None] | None = None

    def __enter__(self) -> str:
        self._token = _current.set(self._key)
        return self._key

    def __exit__(self, *exc_info: object) -> None:
        assert self._token is not None
        _current.reset(self._token)
