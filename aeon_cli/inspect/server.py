"""The inspector's HTTP server: the standard library's, on the loopback interface only, GET and HEAD only.

Bound to 127.0.0.1 (a free port unless one is asked for), so nothing beyond this machine can reach it; a request
whose ``Host`` is not this address (DNS rebinding: a page elsewhere naming its own host that resolves here) is
refused. Then every request, whatever its method or path, must carry the session's secret (the cookie the
printed URL sets: :mod:`aeon_cli.inspect.gate`), so no other process or account of this machine can read a page
either. Any other method is refused too: no request can change a run. The one exception is step-through
(``aeon run --inspect``): its server, over a :class:`~aeon_cli.inspect.liveapp.LiveInspector`, passes a
POST to the app's control endpoint, which checks its form token and origin.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Final
from urllib.parse import urlsplit

from aeon_cli.inspect.app import Inspector, Response
from aeon_cli.inspect.gate import TOKEN, Gate
from aeon_cli.inspect.liveapp import MAX_BODY, LiveInspector
from aeon_cli.inspect.sources import Catalog

HOST: Final = "127.0.0.1"


class InspectorServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, inspector: Inspector, port: int = 0, token: str | None = None) -> None:
        super().__init__((HOST, port), Handler)
        self.inspector = inspector
        self.allowed_hosts = {f"{HOST}:{self.port}", f"localhost:{self.port}"}
        #: the session's secret (``token``, else a new one) and the judge of every request by it
        self.gate = Gate(self.port, token)

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    @property
    def url(self) -> str:
        """The server's address, without the secret: a browser that has not opened :meth:`login` gets ``403``."""
        return f"http://{HOST}:{self.port}/"

    def login(self, path: str = "/") -> str:
        """The URL that signs a browser in and shows ``path``: the one to print, for its user only."""
        return f"http://{HOST}:{self.port}{path}?{TOKEN}={self.gate.token}"


class Handler(BaseHTTPRequestHandler):
    server: InspectorServer
    server_version = "aeon-inspect"
    sys_version = ""

    def do_GET(self) -> None:
        self._answer(head=False)

    def do_HEAD(self) -> None:
        self._answer(head=True)

    def _refuse(self) -> None:
        if self._admitted(head=False):
            self._send(
                Response(405, "text/plain; charset=utf-8", b"the inspector is read-only: GET only\n"), False
            )

    do_PUT = do_PATCH = do_DELETE = _refuse

    def do_POST(self) -> None:
        """Refused (405) except by a step-through server, whose app judges the request."""
        inspector = self.server.inspector
        if not isinstance(inspector, LiveInspector):
            self._refuse()
            return
        if not self._admitted(head=False):
            return
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = -1
        if not 0 <= length <= MAX_BODY:
            self.close_connection = True  # the body is not read
            self._send(Response(413, "text/plain; charset=utf-8", b"a control request is small\n"), False)
            return
        body = self.rfile.read(length)
        headers = {name.lower(): value for name, value in self.headers.items()}
        self._send(inspector.post(urlsplit(self.path).path, headers, body), False)

    def _admitted(self, *, head: bool) -> bool:
        """Whether the request may go on: its ``Host`` is this server's and it carries the session's secret.
        If not, the refusal (or the sign-in, for the printed URL) is sent here and the connection closed."""
        refused: Response | None
        if self.headers.get("Host", "") not in self.server.allowed_hosts:
            refused = Response(403, "text/plain; charset=utf-8", b"unknown Host\n")
        else:
            parts = urlsplit(self.path)
            refused = self.server.gate.admit(
                self.command,
                parts.path,
                parts.query,
                self.headers.get_all("Cookie") or [],
                self.headers.get("Sec-Fetch-Site"),
            )
        if refused is None:
            return True
        self.close_connection = True  # a body, if any, is not read
        self._send(refused, head)
        return False

    def _answer(self, *, head: bool) -> None:
        if not self._admitted(head=head):
            return
        parts = urlsplit(self.path)
        self._send(self.server.inspector.handle(parts.path, parts.query), head)

    def _send(self, response: Response, head: bool) -> None:
        self.send_response(response.status)
        self.send_header("Content-Type", response.content_type)
        self.send_header("Content-Length", str(len(response.body)))
        if response.status == 405:
            self.send_header("Allow", "GET, HEAD")
        for name, value in response.headers.items():
            self.send_header(name, value)
        self.end_headers()
        if not head:
            self.wfile.write(response.body)

    def log_message(self, format: str, *args: object) -> None:
        """Quiet: a page opens dozens of cycles; errors reach the ``aeon.inspect`` logger instead."""


def start(catalog: Catalog, port: int = 0, token: str | None = None) -> InspectorServer:
    """A server for ``catalog`` on 127.0.0.1, bound (``port`` 0: a free one) but not yet serving; its secret is
    ``token``, else a new one."""
    return InspectorServer(Inspector(catalog), port, token)


@contextmanager
def serving(catalog: Catalog, port: int = 0, token: str | None = None) -> Iterator[InspectorServer]:
    """The server, serving in a background thread until the block ends (tests, embedding). A client signs in at
    ``server.login()``, or sends ``Cookie: server.gate.cookie_header``."""
    server = start(catalog, port, token)
    thread = threading.Thread(target=server.serve_forever, name="aeon-inspect", daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
