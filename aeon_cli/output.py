"""How every ``aeon`` command writes to the terminal: never failing on text it cannot encode (issue 13).

Text from a model, a tool or a store can hold anything a Python str can — a lone surrogate, say, which no
encoding accepts — and a terminal may not be UTF-8 at all. A command must print such text, not crash on it:
:func:`safe_streams` (called by the ``aeon`` and ``aeon flow`` groups) makes stdout and stderr write what they
cannot encode as backslash escapes, and :func:`echo_json` prints JSON that stays valid whatever it holds.
"""

from __future__ import annotations

import contextlib
import json
import sys
from functools import partial
from typing import Any, Final

import click

from aeon_kernel.secrets import scrub_secrets, scrub_secrets_json

#: error handlers under which writing a str cannot fail
_SAFE_ERRORS: Final = frozenset({"backslashreplace", "replace", "ignore", "namereplace", "xmlcharrefreplace"})


def safe_streams(ctx: click.Context | None = None) -> None:
    """Make stdout and stderr write what their encoding cannot hold as backslash escapes, instead of raising.

    With ``ctx``, the streams are put back when the command ends (for an embedder that runs the CLI in its own
    process).
    """
    for stream in (sys.stdout, sys.stderr):
        errors = getattr(stream, "errors", None)
        reconfigure = getattr(stream, "reconfigure", None)
        if errors in _SAFE_ERRORS or reconfigure is None:
            continue
        try:
            reconfigure(errors="backslashreplace")
        except (AttributeError, OSError, ValueError):  # a stream that cannot change: leave it as it is
            continue
        if ctx is not None and errors is not None:
            ctx.call_on_close(partial(_restore, stream, errors))


def _restore(stream: Any, errors: str) -> None:
    with contextlib.suppress(AttributeError, OSError, ValueError):  # closed meanwhile
        stream.reconfigure(errors=errors)


def echo_json(value: Any, *, indent: int | None = None, err: bool = False) -> None:
    """Print ``value`` as JSON that is valid whatever it holds and whatever the terminal's encoding.

    Readable (non-ASCII as it is) when the stream can encode it; otherwise every non-ASCII character, a lone
    surrogate included, is a ``\\uXXXX`` escape — still the same JSON value.
    """
    text = scrub_secrets_json(json.dumps(value, ensure_ascii=False, indent=indent, default=str))
    if not text.isascii():
        stream = sys.stderr if err else sys.stdout
        try:
            text.encode(getattr(stream, "encoding", None) or "utf-8")
        except (UnicodeError, LookupError):
            text = scrub_secrets_json(json.dumps(value, ensure_ascii=True, indent=indent, default=str))
    click.echo(text, err=err)


def show_request(request: dict[str, Any], run_id: str) -> None:
    """What a waiting run waits on, and the commands that answer it (on stderr: stdout holds the result)."""
    arguments = json.dumps(request.get("arguments"), ensure_ascii=False, default=str)
    expires = f" It expires at {request['expires_at']}." if request.get("expires_at") else ""
    click.echo(
        scrub_secrets(
            f"Waiting for approval: {request.get('message', '')}\n  call: {request.get('tool')} {arguments}\n"
            f"  approve: aeon approve {run_id}   edit: aeon approve {run_id} --edit-arguments '{{...}}'   "
            f"refuse: aeon approve {run_id} --deny REASON.{expires}"
        ),
        err=True,
    )
