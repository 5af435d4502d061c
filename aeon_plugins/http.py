"""The ``http`` tool: GET and POST to the hosts an allowlist names, and nowhere else (issue 17).

No network until granted: the grant is the switch. ``[tools.http] grant = ["get"]`` (or ``"post"``, or both) and
``hosts = ["api.example.com", "127.0.0.1:8080"]`` turn it on; with nothing granted the engine does not build the
tool at all, so a run without that table can reach no host. A model can ask for any URL, so every URL — the first
and each redirect's target — is checked before a byte is sent:

* only ``http`` and ``https``; no ``user:pass@``; no whitespace, control character or backslash anywhere and no
  ``%`` in the host, which parsers disagree about; a host that ends in a number must be a canonical address
  (``127.0.0.1``), never a form only some parsers read as one (``2130706433``, ``0x7f000001``, ``127.1``);
* the host, lower-cased, IDNA-encoded and without its trailing dot, must match an entry of ``hosts``: ``name``,
  ``name:port``, an address (``127.0.0.1:8080``, ``[::1]:8080``) or a network (``10.0.0.0/24``, ``[fd00::/64]``).
  An entry without a port allows the scheme's default port (80, 443) only; ``localhost`` means 127.0.0.1 and ::1;
* a name is resolved once, and every address it resolves to is checked: one that is not public — loopback,
  private, link-local (169.254.169.254, the cloud metadata service), shared, unspecified, multicast, reserved,
  or an IPv6 form that embeds such an IPv4 address — is refused unless that address is itself listed. The
  connection is then made to the checked address (pinned), so a second answer from DNS cannot send it elsewhere;
  the Host header and, for https, the certificate check still use the name;
* redirects are followed here, never by a library, at most ``max_redirects`` of them, each target checked as
  above before it is requested.

``timeout`` bounds the whole call, redirects included: each connection and read waits at most what is left of it,
a watchdog shuts the socket when it runs out (a server that drips a byte at a time gains nothing), and a name that
takes long to resolve is given up on. It is the :class:`~aeon_kernel.Tool` field the kernel also holds a call to;
the tool ``enforces_timeout``, so the kernel waits a little longer and the tool's own message is the one recorded.

A body larger than ``max_response_bytes`` is an error; no more than one byte past the limit is read. Configured
``headers`` are sent on every request; their values are registered as secrets (``{ "$env" = "API_TOKEN" }``
values, and plain ones under a credential-like name), never shown in a result, an error or the tool's repr, and a
response that echoes one shows ``***`` in its place.
"""

from __future__ import annotations

import contextlib
import http.client
import ipaddress
import json
import re
import socket
import ssl
import threading
import time
import unicodedata
from dataclasses import dataclass
from functools import cache
from types import TracebackType
from typing import Any, ClassVar, Final
from urllib.parse import quote, urljoin, urlsplit

from pydantic import Field, PrivateAttr, SecretStr, model_validator

from aeon_kernel import ConfigError, Register, Tool, ToolError, clean_secret, hookimpl, scrub_secrets

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

METHODS: Final = ("get", "post")
SCHEMES: Final = {"http": 80, "https": 443}
REDIRECTS: Final = frozenset({301, 302, 303, 307, 308})
MAX_URL_CHARS: Final = 2048
MAX_BODY_CHARS: Final = 1_000_000
MAX_CALL_HEADERS: Final = 16
MAX_HEADER_VALUE_CHARS: Final = 1024
#: headers that belong to the connection, not to the caller: set here or by http.client, never by a model
_FORBIDDEN_HEADERS: Final = frozenset(
    {
        "host",
        "content-length",
        "transfer-encoding",
        "connection",
        "keep-alive",
        "proxy-connection",
        "te",
        "trailer",
        "upgrade",
        "expect",
    }
)
#: configured headers whose plain values are treated as secrets all the same
_CREDENTIAL_NAME: Final = re.compile(
    r"authorization|cookie|token|secret|password|api-?key|auth", re.IGNORECASE
)
_HEADER_NAME: Final = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]{1,64}")
_HEADER_VALUE: Final = re.compile(r"[\x20-\x7e]*")
_LABEL: Final = re.compile(r"[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?")
_NUMERIC_LABEL: Final = re.compile(r"[0-9]+|0x[0-9a-f]*")
_PORT: Final = re.compile(r"[0-9]{1,5}")
_REFUSED_CHARACTERS: Final = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp", "Zs"})
_LOCALHOST: Final = (ipaddress.ip_address("127.0.0.1"), ipaddress.ip_address("::1"))
#: IPv6 ranges that carry an IPv4 address in their last 32 bits (IPv4-compatible, NAT64)
_EMBEDDING: Final = (ipaddress.IPv6Network("::/96"), ipaddress.IPv6Network("64:ff9b::/96"))
#: IPv6 ranges never public whatever Python's tables say: IPv4-compatible, local-use NAT64, site-local
_NOT_PUBLIC_V6: Final = tuple(ipaddress.IPv6Network(n) for n in ("::/96", "64:ff9b:1::/48", "fec0::/10"))
_CHARSET: Final = re.compile(r"charset\s*=\s*\"?([A-Za-z0-9._:-]+)", re.IGNORECASE)
_READ_CHUNK: Final = 64 * 1024
_USER_AGENT: Final = "aeon-http"
_HOW_TO_ALLOW: Final = "to hosts in [tools.http]"


def input_schema(methods: tuple[str, ...]) -> dict[str, Any]:
    """The arguments, with only the ``methods`` this instance was granted (a model cannot ask for another)."""
    return {
        "type": "object",
        "properties": {
            "method": {"enum": [m.upper() for m in methods]},
            "url": {"type": "string", "minLength": 1, "maxLength": MAX_URL_CHARS},
            "body": {"type": "string", "maxLength": MAX_BODY_CHARS},
            "headers": {
                "type": "object",
                "maxProperties": MAX_CALL_HEADERS,
                "propertyNames": {"pattern": f"^{_HEADER_NAME.pattern}$"},
                "additionalProperties": {"type": "string", "maxLength": MAX_HEADER_VALUE_CHARS},
            },
        },
        "required": ["method", "url"],
        "additionalProperties": False,
    }


OUTPUT_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        "status": {"type": "integer", "minimum": 100, "maximum": 999},
        "url": {"type": "string"},
        "content_type": {"type": "string"},
        "body": {"type": "string"},
        "bytes": {"type": "integer", "minimum": 0},
    },
    "required": ["status", "url", "content_type", "body", "bytes"],
    "additionalProperties": False,
}


@dataclass(frozen=True, slots=True)
class Entry:
    """One entry of ``hosts``: a name, or a network (one address is a network of one), and maybe a port."""

    name: str | None
    network: IPNetwork | None
    port: int | None

    def allows_port(self, scheme: str, port: int) -> bool:
        return port == (self.port if self.port is not None else SCHEMES[scheme])

    def holds(self, address: IPAddress) -> bool:
        if self.name == "localhost":
            return address in _LOCALHOST
        return self.network is not None and address in self.network


@dataclass(frozen=True, slots=True)
class Target:
    """A URL that passed every check of its own (the allowlist is the tool's to check)."""

    url: str  #: as requested, without its fragment
    scheme: str
    host: str  #: a normalised name, or an address's text (IPv6 without brackets)
    address: IPAddress | None  #: when the host is an address
    port: int
    path: str  #: path and query, as sent

    @property
    def shown(self) -> str:
        """``host:port`` as an entry of ``hosts`` would allow it (the port only when it is not the default)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port == SCHEMES[self.scheme] else f"{host}:{self.port}"


class HttpTool(Tool):
    #: at ``timeout`` the tool abandons the request itself and says so; the kernel waits a little longer
    enforces_timeout: ClassVar[bool] = True
    name: str = "http"
    description: str = (
        "Send an HTTP GET or POST request to an allowed host; returns the status, the final url, the "
        "content_type and the body as text."
    )
    input_schema: dict[str, Any] = input_schema(METHODS)
    output_schema: dict[str, Any] = OUTPUT_SCHEMA
    example: dict[str, Any] | None = {"method": "GET", "url": "https://example.com/"}
    permissions: dict[str, str] = {
        "get": "send GET requests to the hosts listed in hosts",
        "post": "send POST requests (with a body) to the hosts listed in hosts",
    }
    #: the allowlist; required once something is granted
    hosts: list[str] = []
    #: seconds the whole call may take, redirects included (the kernel's deadline for the call too)
    timeout: float = Field(default=10.0, gt=0, le=3600)
    max_response_bytes: int = Field(default=1_000_000, gt=0, le=16_000_000)
    max_redirects: int = Field(default=5, ge=0, le=20)
    #: sent on every request; they may hold credentials, so the field is kept out of repr and dumps
    headers: dict[str, str | SecretStr] = Field(default_factory=dict, exclude=True, repr=False)

    _entries: tuple[Entry, ...] = PrivateAttr(default=())

    @model_validator(mode="before")
    @classmethod
    def _schema_for_grant(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        if data.get("granted") and "input_schema" not in data:
            granted = tuple(m for m in METHODS if m in data["granted"]) or METHODS
            data = {**data, "input_schema": input_schema(granted)}
            if "example" not in data:
                data["example"] = {"method": granted[0].upper(), "url": "https://example.com/"}
        hosts = data.get("hosts")
        if "description" not in data and isinstance(hosts, list) and 0 < len(hosts) <= 20:
            listed = ", ".join(h for h in hosts if isinstance(h, str))
            data = {
                **data,
                "description": f"{cls.model_fields['description'].default} Allowed hosts: {listed}.",
            }
        return data

    @model_validator(mode="after")
    def _usable_options(self) -> HttpTool:
        if not self.granted:
            return self
        if not self.hosts:
            raise ConfigError(
                'the http tool needs an allowlist: set hosts = ["api.example.com", ...] in [tools.http]'
            )
        self._entries = tuple(parse_entry(entry) for entry in self.hosts)
        headers: dict[str, str | SecretStr] = {}
        for name, value in self.headers.items():
            if not isinstance(name, str) or not _HEADER_NAME.fullmatch(name):
                raise ConfigError(f"[tools.http] headers: {name!r} is not a valid header name")
            if name.lower() in _FORBIDDEN_HEADERS:
                raise ConfigError(
                    f"[tools.http] headers: {name} is set by the tool itself and cannot be configured"
                )
            where = f"[tools.http] headers.{name}"
            secret = isinstance(value, SecretStr) or bool(_CREDENTIAL_NAME.search(name))
            text = value.get_secret_value() if isinstance(value, SecretStr) else value
            if secret:
                text = clean_secret(text, where)  # registered: every scrubber hides it from now on
            if not _HEADER_VALUE.fullmatch(text):
                raise ConfigError(f"{where} holds a character other than printable ASCII")  # never quoted
            headers[name] = SecretStr(text) if secret else text
        object.__setattr__(self, "headers", headers)
        return self

    def required_permissions(self, arguments: dict[str, Any]) -> frozenset[str]:
        return frozenset({str(arguments["method"]).lower()})

    def resources(self, arguments: dict[str, Any]) -> dict[str, list[str]]:
        url = arguments["url"]
        try:
            host = parse_url(url).host
        except ToolError:
            try:
                host = urlsplit(url).hostname or ""
            except ValueError:
                host = ""
        return {"host": [host], "url": [url]}

    def invoke(self, **kwargs: Any) -> dict[str, Any]:
        try:
            return self._call(**kwargs)
        except ToolError as exc:
            message = str(exc)
            scrubbed = scrub_secrets(message)
            if scrubbed != message:
                raise ToolError(scrubbed) from None
            raise

    # --- one call: checks, then each request of the redirect chain ------------------------------------------

    def _call(self, **kwargs: Any) -> dict[str, Any]:
        method = kwargs.get("method")
        if not isinstance(method, str) or method.lower() not in METHODS:
            raise ToolError(f"method must be one of {', '.join(m.upper() for m in METHODS)}")
        method = method.upper()
        self._check_granted(method, "this call")
        body = kwargs.get("body")
        if body is not None and method != "POST":
            raise ToolError(f"a {method} request has no body; send the body with POST")
        payload = _encoded_body(body) if method == "POST" else None
        headers = self._headers(kwargs.get("headers") or {}, body)
        target = self._allowed(parse_url(kwargs.get("url")))
        with Deadline(self.timeout) as deadline:
            for hop in range(self.max_redirects + 1):
                status, location, content_type, data = self._send(method, target, payload, headers, deadline)
                if status not in REDIRECTS or location is None:
                    return {
                        "status": status,
                        "url": scrub_secrets(target.url),
                        "content_type": content_type,
                        "body": scrub_secrets(_text(data, content_type)),
                        "bytes": len(data),
                    }
                if hop == self.max_redirects:
                    raise ToolError(
                        f"{_short(target.url)} redirected more than max_redirects = {self.max_redirects} times; "
                        "raise max_redirects in [tools.http] if the chain is legitimate"
                    )
                origin, following = target.url, location
                try:
                    following = urljoin(origin, location)
                    target = self._allowed(parse_url(following))
                    if status == 303 or (status in (301, 302) and method == "POST"):
                        method, payload = "GET", None  # as browsers do; 307 and 308 keep both
                        headers = {k: v for k, v in headers.items() if k.lower() != "content-type"}
                    self._check_granted(method, "the redirect")
                except (ToolError, ValueError) as exc:
                    raise ToolError(
                        f"{_short(origin)} redirected ({status}) to {_short(following)}, which was not "
                        f"requested: {exc}"
                    ) from None
        raise AssertionError("unreachable: the loop returns or raises")  # pragma: no cover

    def _check_granted(self, method: str, what: str) -> None:
        if method.lower() not in self.granted:
            raise ToolError(
                f"{what} needs {method}, which the http tool was not granted; to allow it, add "
                f'"{method.lower()}" to grant in [tools.http]'
            )

    def _headers(self, extra: Any, body: str | None) -> dict[str, str]:
        """The call's headers: its own (checked) and the configured ones, which it may not replace."""
        if not isinstance(extra, dict):
            raise ToolError("headers must be an object of header names and string values")
        if len(extra) > MAX_CALL_HEADERS:
            raise ToolError(f"a call may set at most {MAX_CALL_HEADERS} headers")
        configured = {name.lower() for name in self.headers}
        headers: dict[str, str] = {"User-Agent": _USER_AGENT}
        for name, value in extra.items():
            if not isinstance(name, str) or not _HEADER_NAME.fullmatch(name):
                raise ToolError(f"{_short(repr(name))} is not a valid header name")
            if name.lower() in _FORBIDDEN_HEADERS:
                raise ToolError(f"the {name} header is set by the tool itself; leave it out")
            if name.lower() in configured:
                raise ToolError(
                    f"the {name} header is configured in [tools.http] headers; a call cannot change it"
                )
            if (
                not isinstance(value, str)
                or len(value) > MAX_HEADER_VALUE_CHARS
                or not _HEADER_VALUE.fullmatch(value)
            ):
                raise ToolError(
                    f"the {name} header's value must be printable ASCII of at most {MAX_HEADER_VALUE_CHARS} "
                    "characters"
                )
            headers = {k: v for k, v in headers.items() if k.lower() != name.lower()}
            headers[name] = value
        for name, secret in self.headers.items():
            headers[name] = secret.get_secret_value() if isinstance(secret, SecretStr) else secret
        if body is not None and not any(k.lower() == "content-type" for k in headers):
            headers["Content-Type"] = _content_type(body)
        return headers

    def _allowed(self, target: Target) -> Target:
        """``target`` when an entry of ``hosts`` allows its host and port; ToolError otherwise."""
        for entry in self._entries:
            if not entry.allows_port(target.scheme, target.port):
                continue
            if target.address is None:
                if entry.name == target.host:
                    return target
            elif entry.holds(target.address):
                return target
        raise ToolError(
            f"{target.shown} is not on the allowlist, so the request was not sent; if it should be reachable, "
            f'add "{target.shown}" {_HOW_TO_ALLOW}'
        )

    def _addresses(self, target: Target, deadline: Deadline) -> list[IPAddress]:
        """The addresses to connect to, each checked: listed, or public (a listed name may not lead inward)."""
        if target.address is not None:
            return [_unmapped(target.address)]  # listed itself: _allowed matched it
        if target.host == "localhost":
            return list(_LOCALHOST)  # never asked of DNS (RFC 6761)
        addresses = resolve(target.host, target.port, deadline)
        for address in addresses:
            if _forbidden_always(address):
                raise ToolError(
                    f"{target.host} resolves to {address}, an address no request may go to "
                    f"({_kind(address)}); the request was not sent"
                )
            if not is_public(address) and not any(
                entry.holds(address) and entry.allows_port(target.scheme, target.port)
                for entry in self._entries
            ):
                listed = f"[{address}]" if address.version == 6 else str(address)
                raise ToolError(
                    f"{target.host} resolves to {address}, a {_kind(address)} address, so the request was not "
                    f'sent; if that is intended, add "{listed}:{target.port}" {_HOW_TO_ALLOW} as well'
                )
        return addresses

    def _send(
        self,
        method: str,
        target: Target,
        payload: bytes | None,
        headers: dict[str, str],
        deadline: Deadline,
    ) -> tuple[int, str | None, str, bytes]:
        """One request to ``target``'s checked addresses: status, Location, Content-Type and the body."""
        addresses = self._addresses(target, deadline)
        connection: PinnedHTTPConnection = (
            PinnedHTTPSConnection(target.host, target.port, addresses, deadline)
            if target.scheme == "https"
            else PinnedHTTPConnection(target.host, target.port, addresses, deadline)
        )
        response: http.client.HTTPResponse | None = None
        try:
            connection.request(method, target.path, body=payload, headers=headers)
            response = connection.getresponse()
            location = response.getheader("Location")
            content_type = response.getheader("Content-Type") or ""
            if response.status in REDIRECTS and location is not None:
                return response.status, location, content_type, b""
            declared = response.getheader("Content-Length")
            if declared and declared.isdigit() and int(declared) > self.max_response_bytes:
                raise self._too_large(target, f"{int(declared):,} bytes")
            data = bytearray()
            while len(data) <= self.max_response_bytes and not response.isclosed():
                connection.wait_at_most(deadline.left())
                chunk = response.read(min(_READ_CHUNK, self.max_response_bytes + 1 - len(data)))
                if not chunk:
                    break
                data += chunk
            if len(data) > self.max_response_bytes:
                raise self._too_large(target, "more")
            return response.status, location, content_type, bytes(data)
        except ToolError:
            raise
        except Exception as exc:
            raise ToolError(_failure(exc, target, deadline)) from None
        finally:
            if response is not None:
                response.close()
            connection.release()

    def _too_large(self, target: Target, size: str) -> ToolError:
        return ToolError(
            f"{target.shown} answered with {size} than max_response_bytes = {self.max_response_bytes:,} allows"
            if size == "more"
            else f"{target.shown} answered with {size}, more than max_response_bytes = "
            f"{self.max_response_bytes:,}; raise max_response_bytes in [tools.http] if it is needed"
        )


# --- URLs and allowlist entries ------------------------------------------------------------------------------


def parse_url(url: Any) -> Target:
    """``url`` checked on its own (scheme, host, port, characters); ToolError naming what was refused."""
    if not isinstance(url, str) or not url:
        raise ToolError("url must be a non-empty string")
    if len(url) > MAX_URL_CHARS:
        raise ToolError(f"the url is longer than {MAX_URL_CHARS} characters")
    for char in url:
        if unicodedata.category(char) in _REFUSED_CHARACTERS:
            raise ToolError(
                f"the url holds whitespace or a control character ({char!r}); percent-encode it (%20 for a space)"
            )
    if "\\" in url:
        raise ToolError("the url holds a backslash, which parsers read differently; use '/' or %5C")
    try:
        parts = urlsplit(url)
    except ValueError as exc:
        raise ToolError(f"{_short(url)} is not a valid URL ({exc})") from None
    scheme = parts.scheme.lower()
    if scheme not in SCHEMES:
        shown = f"{scheme}:" if scheme else "a URL without a scheme"
        raise ToolError(f"only http and https URLs can be requested; {shown} was refused")
    rest = url[len(parts.scheme) + 1 :]
    if not rest.startswith("//") or not parts.netloc:
        raise ToolError(f"{_short(url)} has no host; write it as {scheme}://host/path")
    if "@" in parts.netloc:
        raise ToolError(
            "URLs with a user name or password (user:pass@host) are refused; configure credentials as "
            "headers in [tools.http]"
        )
    text, port = _split_authority(parts.netloc, scheme)
    try:
        host = normal_host(text)
    except ValueError as exc:
        raise ToolError(str(exc)) from None
    path = parts.path or "/"
    if parts.query:
        path = f"{path}?{parts.query}"
    if not path.isascii():
        path = quote(path, safe="/?#[]@!$&'()*+,;=:%-._~")
    address = None if isinstance(host, str) else _unmapped(host)
    return Target(url.split("#", 1)[0], scheme, str(address or host), address, port, path)


def _split_authority(netloc: str, scheme: str) -> tuple[str, int]:
    """The host text and the port of ``netloc`` (``host``, ``host:port``, ``[v6]``, ``[v6]:port``)."""
    if netloc.startswith("["):
        inner, bracket, rest = netloc[1:].partition("]")
        if not bracket or (rest and not rest.startswith(":")):
            raise ToolError(f"{netloc!r} is not a valid host; an IPv6 address is written [::1] or [::1]:8080")
        host, port_text = f"[{inner}]", rest[1:]
    else:
        if netloc.count(":") > 1:
            raise ToolError(f"{netloc!r} is not a valid host; write an IPv6 address in brackets, [::1]")
        host, _, port_text = netloc.partition(":")
    if not port_text:  # none, or an empty one ("host:"), which means the default as in browsers
        return host, SCHEMES[scheme]
    if not _PORT.fullmatch(port_text) or not 0 < int(port_text) < 65536:
        raise ToolError(f"{port_text!r} is not a port number (1 to 65535)")
    return host, int(port_text)


def normal_host(text: str) -> str | IPAddress:
    """``text`` as compared with the allowlist: an address, or a lower-case ASCII name without its trailing dot.

    ValueError when it is neither: a percent sign, a zone, a form of number that is not a canonical address."""
    if "%" in text:
        raise ValueError(f"the host {text!r} is percent-encoded or holds a zone; write it plainly")
    if text.startswith("[") and text.endswith("]"):
        try:
            return ipaddress.IPv6Address(text[1:-1])
        except ValueError:
            raise ValueError(f"{text!r} is not a valid IPv6 address") from None
    if not text.isascii():
        try:
            text = text.encode("idna").decode("ascii")
        except UnicodeError:
            raise ValueError(f"the host {text!r} is not a valid internationalised name") from None
    name = text.lower()
    if name.endswith("."):
        name = name[:-1]
    labels = name.split(".")
    if _NUMERIC_LABEL.fullmatch(labels[-1]):
        try:
            address = ipaddress.IPv4Address(name)
        except ValueError:
            address = None
        if address is None or str(address) != name:
            raise ValueError(
                f"the host {text!r} is a number but not a canonical IPv4 address (four decimal numbers, no leading "
                "zeros, like 192.0.2.1), so it was refused"
            )
        return address
    if not name or len(name) > 253 or not all(_LABEL.fullmatch(label) for label in labels):
        raise ValueError(f"{text!r} is not a valid host name")
    return name


def parse_entry(entry: Any) -> Entry:
    """One entry of ``hosts``; ConfigError saying how to write it when it cannot be read."""
    if not isinstance(entry, str) or not entry.strip():
        raise ConfigError(f"[tools.http] hosts: each entry is a host name or address, got {entry!r}")
    text = entry.strip()
    if "://" in text:
        raise ConfigError(f'[tools.http] hosts: list hosts, not URLs ("api.example.com", not {text!r})')
    port: int | None = None
    host = text
    if text.startswith("["):
        inner, bracket, rest = text[1:].partition("]")
        if not bracket or (rest and not (rest.startswith(":") and _PORT.fullmatch(rest[1:]))):
            raise ConfigError(f"[tools.http] hosts: {text!r} is not [address] or [address]:port")
        host, port = inner, int(rest[1:]) if rest else None
    elif text.count(":") == 1:
        host, _, port_text = text.partition(":")
        if not _PORT.fullmatch(port_text):
            raise ConfigError(f"[tools.http] hosts: {text!r} does not end in a port number")
        port = int(port_text)
    if port is not None and not 0 < port < 65536:
        raise ConfigError(f"[tools.http] hosts: {text!r} has a port outside 1 to 65535")
    if "/" in host or ":" in host:
        try:
            network = ipaddress.ip_network(host)
        except ValueError:
            raise ConfigError(
                f"[tools.http] hosts: {text!r} is not a host, an address or a network like 10.0.0.0/24"
            ) from None
        return _entry_network(text, network, port)
    try:
        name = normal_host(host)
    except ValueError as exc:
        raise ConfigError(f"[tools.http] hosts: {exc}") from None
    if isinstance(name, str):
        return Entry(name, None, port)
    return _entry_network(text, ipaddress.ip_network(name), port)


def _entry_network(text: str, network: IPNetwork, port: int | None) -> Entry:
    address = network.network_address
    if network.num_addresses == 1 and (address.is_unspecified or address.is_multicast):
        raise ConfigError(
            f"[tools.http] hosts: {text!r} is not an address a request can go to (list 127.0.0.1 for this machine)"
        )
    if isinstance(network, ipaddress.IPv6Network) and network.num_addresses == 1:
        mapped = network.network_address.ipv4_mapped
        if mapped is not None:
            network = ipaddress.ip_network(mapped)
    return Entry(None, network, port)


# --- addresses ---------------------------------------------------------------------------------------------


def is_public(address: IPAddress) -> bool:
    """Whether ``address`` is public: global, and no IPv6 form of a non-public IPv4 address."""
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return is_public(address.ipv4_mapped)
        embedded = [address.sixtofour] + [
            ipaddress.IPv4Address(int(address) & 0xFFFFFFFF) for net in _EMBEDDING if address in net
        ]
        if address.teredo is not None:
            embedded += list(address.teredo)
        if any(v4 is not None and not is_public(v4) for v4 in embedded):
            return False
        if any(address in network for network in _NOT_PUBLIC_V6):
            return False
    return address.is_global and not (
        address.is_multicast
        or address.is_reserved
        or address.is_unspecified
        or address.is_loopback
        or address.is_link_local
        or address.is_private
    )


def _forbidden_always(address: IPAddress) -> bool:
    """Addresses no entry can allow: the unspecified address (which reaches this machine) and multicast."""
    return address.is_unspecified or address.is_multicast


def _unmapped(address: IPAddress) -> IPAddress:
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def _kind(address: IPAddress) -> str:
    for test, kind in (
        ("is_loopback", "loopback"),
        ("is_link_local", "link-local"),
        ("is_unspecified", "unspecified"),
        ("is_multicast", "multicast"),
        ("is_private", "private"),
        ("is_reserved", "reserved"),
    ):
        if getattr(address, test):
            return kind
    return "non-public"


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


def _encoded_body(body: Any) -> bytes:
    if body is None:
        return b""
    if not isinstance(body, str):
        raise ToolError("body must be a string")
    if len(body) > MAX_BODY_CHARS:
        raise ToolError(f"the body is longer than {MAX_BODY_CHARS:,} characters")
    try:
        return body.encode("utf-8")
    except UnicodeEncodeError:
        raise ToolError("the body holds a lone surrogate; it cannot be sent as UTF-8") from None


def _content_type(body: str) -> str:
    """``application/json`` for a body that is JSON, plain text otherwise (a call may set its own)."""
    try:
        json.loads(body)
    except ValueError:
        return "text/plain; charset=utf-8"
    return "application/json"


def _text(data: bytes, content_type: str) -> str:
    """``data`` decoded with the charset ``content_type`` names, else UTF-8; undecodable bytes replaced."""
    match = _CHARSET.search(content_type)
    if match:
        with contextlib.suppress(LookupError):  # unknown, or not a text encoding (base64, rot13)
            return data.decode(match.group(1), errors="replace")
    return data.decode("utf-8", errors="replace")


def _short(text: str, most: int = 200) -> str:
    return text if len(text) <= most else f"{text[: most - 3]}..."


@hookimpl
def aeon_register_tools(register: Register) -> None:
    register("http", HttpTool)
