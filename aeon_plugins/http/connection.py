"""How the ``http`` tool reaches a checked host: names resolved once, the connection pinned to the checked
address, and one deadline for the whole call.

:func:`resolve` asks for a name's addresses within what is left of the :class:`Deadline`, whose watchdog shuts
the sockets it watches when the call runs out of time. :class:`PinnedHTTPConnection` and
:class:`PinnedHTTPSConnection` connect to addresses checked beforehand while the Host header, SNI and the
certificate check still use the name; :func:`_failure` says what went wrong without quoting the server.
"""

from __future__ import annotations

import contextlib
import http.client
import ipaddress
import socket
import ssl
import threading
import time
from functools import cache
from types import TracebackType
from typing import Any

from aeon_kernel import ToolError

from .addresses import IPAddress, Target, _unmapped


def resolve(host: str, port: int, deadline: Deadline) -> list[IPAddress]:
    """Every address ``host`` resolves to, asked once, waited for at most what is left of the deadline."""
    found: list[Any] = []

    def ask() -> None:
        try:
            found.append(socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP))
        except Exception as exc:
            found.append(exc)

    asking = threading.Thread(target=ask, name="aeon-http-resolve", daemon=True)
    asking.start()
    asking.join(deadline.left())
    if not found:
        raise ToolError(f"{host} was not resolved within timeout = {deadline.seconds} s")
    if isinstance(found[0], Exception):
        raise ToolError(f"{host} could not be resolved; check the name") from None
    addresses: list[IPAddress] = []
    for family, _type, _proto, _name, sockaddr in found[0]:
        if family not in (socket.AF_INET, socket.AF_INET6):
            continue
        try:
            address = _unmapped(ipaddress.ip_address(str(sockaddr[0]).split("%", 1)[0]))
        except ValueError:
            raise ToolError(f"{host} resolved to something that is not an IP address") from None
        if address not in addresses:
            addresses.append(address)
    if not addresses:
        raise ToolError(f"{host} has no IPv4 or IPv6 address")
    return addresses


# --- connections -------------------------------------------------------------------------------------------


class Deadline:
    """The end of a call: what is left of it, and a watchdog that shuts the sockets it watches when it passes."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.end = time.monotonic() + seconds
        self.expired = False
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self._timer: threading.Timer | None = None

    def left(self) -> float:
        left = self.end - time.monotonic()
        if left <= 0 or self.expired:
            raise ToolError(self.message())
        return left

    def message(self) -> str:
        return f"no complete answer within timeout = {self.seconds} s; raise timeout in [tools.http] if it is slow"

    def watch(self, sock: socket.socket) -> None:
        with self._lock:
            if self._timer is None:
                self._timer = threading.Timer(max(0.0, self.end - time.monotonic()), self._expire)
                self._timer.daemon = True
                self._timer.start()
            self._sockets.append(sock)

    def replace(self, old: socket.socket, new: socket.socket) -> None:
        with self._lock:
            self._sockets = [s for s in self._sockets if s is not old] + [new]

    def release(self, sock: socket.socket) -> None:
        with self._lock:
            if sock in self._sockets:
                self._sockets.remove(sock)
            sock.close()

    def _expire(self) -> None:
        with self._lock:
            self.expired = True
            for sock in self._sockets:
                with contextlib.suppress(OSError):
                    socket.socket.shutdown(sock, socket.SHUT_RDWR)  # not TLS's: only the descriptor's

    def __enter__(self) -> Deadline:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, traceback: TracebackType | None
    ) -> None:
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()


class PinnedHTTPConnection(http.client.HTTPConnection):
    """An HTTP connection to addresses checked beforehand, never to whatever the name resolves to later."""

    def __init__(self, host: str, port: int, addresses: list[IPAddress], deadline: Deadline) -> None:
        super().__init__(host, port, timeout=deadline.left())
        self.addresses, self.deadline = addresses, deadline
        self.pinned: socket.socket | None = None

    def connect(self) -> None:
        failure: OSError | None = None
        for address in self.addresses:
            family = socket.AF_INET6 if address.version == 6 else socket.AF_INET
            sock = socket.socket(family, socket.SOCK_STREAM)
            self.deadline.watch(sock)
            self.pinned = sock
            try:
                sock.settimeout(self.deadline.left())
                sock.connect((str(address), self.port))
            except OSError as exc:
                self.deadline.release(sock)
                self.pinned, failure = None, exc
                if isinstance(exc, TimeoutError) or self.deadline.expired:
                    raise
                continue
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.sock = self._secured(sock)
            return
        raise failure or OSError("no address to connect to")

    def _secured(self, sock: socket.socket) -> socket.socket:
        return sock

    def wait_at_most(self, seconds: float) -> None:
        if self.pinned is not None:
            with contextlib.suppress(OSError):  # closed already: the whole body was read
                self.pinned.settimeout(seconds)

    def release(self) -> None:
        self.close()
        if self.pinned is not None:
            self.deadline.release(self.pinned)


class PinnedHTTPSConnection(PinnedHTTPConnection, http.client.HTTPSConnection):
    """HTTPS to a checked address; SNI and the certificate are checked against the name in the URL."""

    default_port = 443

    def __init__(self, host: str, port: int, addresses: list[IPAddress], deadline: Deadline) -> None:
        http.client.HTTPSConnection.__init__(self, host, port, timeout=deadline.left(), context=_tls())
        self.addresses, self.deadline = addresses, deadline
        self.pinned = None

    def _secured(self, sock: socket.socket) -> socket.socket:
        secured = _tls().wrap_socket(sock, server_hostname=self.host, do_handshake_on_connect=False)
        self.deadline.replace(sock, secured)  # the descriptor now belongs to the TLS socket
        self.pinned = secured
        secured.settimeout(self.deadline.left())
        secured.do_handshake()
        return secured


@cache
def _tls() -> ssl.SSLContext:
    """The system's trusted certificates, hostname checks on (built once: loading them takes a while)."""
    return ssl.create_default_context()


def _failure(exc: Exception, target: Target, deadline: Deadline) -> str:
    """What went wrong with a request, in words that quote nothing the server or the headers said."""
    where = target.shown
    if deadline.expired or isinstance(exc, TimeoutError):
        return f"{where} gave {deadline.message()}"
    if isinstance(exc, ssl.SSLCertVerificationError):
        return f"the certificate of {where} could not be verified ({exc.verify_message}); the request was not sent"
    if isinstance(exc, ssl.SSLError):
        return f"the TLS connection to {where} failed ({exc.reason or type(exc).__name__})"
    if isinstance(exc, ConnectionRefusedError):
        return f"{where} refused the connection; is the server running?"
    if isinstance(exc, http.client.HTTPException):
        return f"{where} did not answer with valid HTTP ({type(exc).__name__})"
    if isinstance(exc, OSError):
        return f"could not reach {where}: {exc.strerror or type(exc).__name__}"
    return f"the request to {where} failed: {type(exc).__name__}"
