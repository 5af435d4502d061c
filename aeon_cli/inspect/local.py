"""What every local server ``aeon`` starts shares (issue 27): its secret, how it opens a browser, how it ends.

``aeon inspect``, step-through (``--inspect``) and ``aeon mcp serve --http`` listen on 127.0.0.1 only. That keeps
other machines out, not other processes or other accounts of this one: so each makes a secret of its own as it
starts (:func:`new_token`, 256 random bits), gives it only to the user who started it (the command's own output, a
file only that user can read, or the browser through such a file), and answers no request without it. A secret
is compared in constant time (:func:`same`). The inspector's cookie gate is :mod:`aeon_cli.inspect.gate`; the MCP
server's bearer token, the MCP SDK's token verifier (:mod:`aeon_cli.mcp`).

:func:`stopping`: each stops cleanly on SIGTERM, as a supervisor (systemd, a container, a test) stops it, exactly
as on Ctrl-C; and on SIGINT even where it was started with SIGINT ignored (a background job, ``nohup cmd &``, is
started so by a shell, and Python then installs no Ctrl-C handler at all).

Only the standard library is imported here: ``aeon mcp serve`` uses this module without the inspector's server.
"""

from __future__ import annotations

import hmac
import html
import os
import secrets
import signal
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Final

#: bytes of randomness in a secret (``secrets.token_urlsafe``: 43 characters)
TOKEN_BYTES: Final = 32


def new_token() -> str:
    """A new secret for one server's session."""
    return secrets.token_urlsafe(TOKEN_BYTES)


def same(given: str, expected: str) -> bool:
    """Whether ``given`` is the secret ``expected``, compared in constant time (``hmac.compare_digest``)."""
    return hmac.compare_digest(given.encode("utf-8", "surrogateescape"), expected.encode("utf-8"))


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


@contextmanager
def stopping() -> Iterator[None]:
    """While the block runs, SIGTERM raises :class:`KeyboardInterrupt` in the main thread, as Ctrl-C does, so
    that a supervisor's stop takes the command's Ctrl-C path (the server closed, the run released); and so does
    SIGINT, also where the process inherited it ignored. (Python's own SIGINT handler is replaced by one that does
    the same, so that asyncio does not take it over: it would cancel its task and wait, for ever, for a thread
    reading a pipe.) A SIGINT handler of an embedder's is left alone. Both handlers are put back when the block
    ends. Outside the main thread (an embedder's server), nothing changes: signals are the main thread's."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    interrupt = signal.getsignal(signal.SIGINT)
    terminate = signal.getsignal(signal.SIGTERM)
    if interrupt in (signal.SIG_IGN, signal.SIG_DFL, signal.default_int_handler):
        signal.signal(signal.SIGINT, _interrupt)
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, terminate if terminate is not None else signal.SIG_DFL)
        signal.signal(signal.SIGINT, interrupt if interrupt is not None else signal.SIG_DFL)


class Browser:
    """Opens a URL that carries a secret in the user's browser without putting the secret on a command line.

    ``webbrowser.open(url)`` starts the browser (or ``xdg-open``) with the URL as an argument, which every account
    on the machine can read in ``/proc/PID/cmdline`` (``ps``). So, as Jupyter does, the URL goes into an HTML file
    only this user can read (mode 0600, in a directory of mode 0700) that sends the browser on to it, and the
    browser is given the file's name. :meth:`close` deletes the file (when the server stops)."""

    def __init__(self) -> None:
        self._folder: Path | None = None

    def open(self, url: str) -> bool:
        import webbrowser

        self.close()
        self._folder = Path(tempfile.mkdtemp(prefix="aeon-open-"))  # mode 0700
        page = self._folder / "open.html"
        quoted = html.escape(url, quote=True)
        descriptor = os.open(page, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w", encoding="utf-8") as file:
            file.write(
                '<!doctype html>\n<meta charset="utf-8">\n<meta name="referrer" content="no-referrer">\n'
                f'<meta http-equiv="refresh" content="0; url={quoted}">\n'
                f'<title>Aeon</title>\n<p><a href="{quoted}">Open the page</a></p>\n'
            )
        return webbrowser.open(page.as_uri())

    def close(self) -> None:
        folder, self._folder = self._folder, None
        if folder is None:
            return
        for item in folder.iterdir():
            item.unlink(missing_ok=True)
        folder.rmdir()
