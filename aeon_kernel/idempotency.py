"""The idempotency key of the tool call in progress: ``"<run_id>:<step_id>"``.

A resumed run executes a step that was running when the process died once more, with the same key, so a tool
with side effects can recognise a repeat (issue: durable runs). Tools read it with
``aeon_kernel.current_idempotency_key()``; it is None outside a tool call.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

_current: ContextVar[str | None] = ContextVar("aeon_idempotency_key", default=None)


def current_idempotency_key() -> str | None:
    return _current.get()


@contextmanager
def idempotency_scope(run_id: str, step_id: str) -> Iterator[str]:
    token = _current.set(f"{run_id}:{step_id}")
    try:
        yield f"{run_id}:{step_id}"
    finally:
        _current.reset(token)
