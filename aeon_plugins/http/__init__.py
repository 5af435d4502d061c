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
  above before it is requested — and judged by the policies, as the first URL was (``Tool.check_resources``): a
  ``host`` rule that denies a redirect's host stops the call at that hop, before a connection is made to it.

``timeout`` bounds the whole call, redirects included: each connection and read waits at most what is left of it,
a watchdog shuts the socket when it runs out (a server that drips a byte at a time gains nothing), and a name that
takes long to resolve is given up on. It is the :class:`~aeon_kernel.Tool` field the kernel also holds a call to;
the tool ``enforces_timeout``, so the kernel waits a little longer and the tool's own message is the one recorded.

A body larger than ``max_response_bytes`` is an error; no more than one byte past the limit is read; a body is
decoded with the charset its Content-Type names when that is a text encoding Python has, else as UTF-8 (undecodable
bytes replaced either way).

Configured ``headers`` are scoped. A header set directly (``headers = { X-Team = "core" }``) is sent on a call's
first request, whichever listed host that is, and on redirects that keep its origin (scheme, host and port); a
table under a ``hosts`` entry (``[tools.http.headers."api.example.com"]``, ``Authorization = ...``) is sent on
requests to that host only, redirected there or not. After a redirect from https to http no configured header is
sent at all, and a call's own credential-like headers (``Authorization``, ``Cookie``, ``X-Api-Key``...) are dropped
on a redirect to another origin too. The values are registered as secrets (``{ "$env" = "API_TOKEN" }`` values,
and plain ones under a credential-like name), never shown in a result, an error or the tool's repr, and a response
that echoes one shows ``***`` in its place.

The tool is here; its parts are :mod:`aeon_plugins.http.addresses` (URLs, hosts, allowlist entries and which
addresses are public) and :mod:`aeon_plugins.http.connection` (name resolution, the deadline, the pinned
HTTP and HTTPS connections and the TLS context). Registering the plugin imports no network code (DESIGN rule 5):
:mod:`~aeon_plugins.http.connection`, and with it ``ssl`` and ``http.client``, is imported when a granted tool is
built, so neither an engine without ``[tools.http]`` nor the first call's ``timeout`` pays for it. Its names stay
readable here (``aeon_plugins.http.resolve``, ``aeon_plugins.http._tls``), each imported on first use.
"""

from __future__ import annotations

import codecs
import importlib
import json
import re
from typing import TYPE_CHECKING, Any, ClassVar, Final
from urllib.parse import urljoin, urlsplit

from pydantic import Field, PrivateAttr, SecretStr, model_validator

from aeon_kernel import ConfigError, Register, Tool, ToolError, hookimpl
from aeon_kernel.errors import PolicyDeniedError
from aeon_kernel.kit import clean_secret, lazy_getattr, scrub_secrets

from .addresses import (
    _LOCALHOST,
    MAX_URL_CHARS,
    Entry,
    IPAddress,
    Target,
    _forbidden_always,
    _kind,
    _short,
    _unmapped,
    is_public,
    parse_entry,
    parse_url,
)

# The network code (ssl, http.client, sockets) is imported when a granted tool is built (_usable_options); its
# names below stay readable as names of this package, each imported on first use.
if TYPE_CHECKING:
    import http.client

    from .connection import Deadline as Deadline
    from .connection import PinnedHTTPConnection as PinnedHTTPConnection
    from .connection import PinnedHTTPSConnection as PinnedHTTPSConnection
    from .connection import _failure as _failure
    from .connection import _tls as _tls  # the cache the tests clear as aeon_plugins.http._tls
    from .connection import resolve as resolve

_CONNECTION: Final = "aeon_plugins.http.connection"
_LAZY: Final[dict[str, str]] = {
    "Deadline": _CONNECTION,
    "PinnedHTTPConnection": _CONNECTION,
    "PinnedHTTPSConnection": _CONNECTION,
    "_failure": _CONNECTION,
    "_tls": _CONNECTION,
    "resolve": _CONNECTION,
}

METHODS: Final = ("get", "post")
REDIRECTS: Final = frozenset({301, 302, 303, 307, 308})
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
_CHARSET: Final = re.compile(r"charset\s*=\s*\"?([A-Za-z0-9._:-]+)", re.IGNORECASE)
#: codecs Python calls text encodings that are not a charset a body can be in: they fail on ordinary bytes
#: (``idna`` knows only strict errors), read backslash escapes, or refuse everything
_NOT_CHARSETS: Final = frozenset({"idna", "punycode", "raw-unicode-escape", "unicode-escape", "undefined"})
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
    #: a name and its value: sent on the first request and on redirects within its origin; a ``hosts`` entry and a
    #: table of them: sent to that host only. They may hold credentials, so the field is kept out of repr and dumps
    headers: dict[str, str | SecretStr | dict[str, str | SecretStr]] = Field(
        default_factory=dict, exclude=True, repr=False
    )

    _entries: tuple[Entry, ...] = PrivateAttr(default=())
    #: the unscoped headers, and each hosts entry's own
    _unscoped: dict[str, str | SecretStr] = PrivateAttr(default_factory=dict)
    _scoped: tuple[tuple[Entry, dict[str, str | SecretStr]], ...] = PrivateAttr(default=())

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
        importlib.import_module(_CONNECTION)  # the network code: now, rather than within a call's timeout
        headers: dict[str, str | SecretStr | dict[str, str | SecretStr]] = {}
        scoped: list[tuple[Entry, dict[str, str | SecretStr]]] = []
        for key, value in self.headers.items():
            if isinstance(value, dict):
                entry = self._scope(key)
                table = {name: _configured(name, item, f'headers."{key}"') for name, item in value.items()}
                headers[key] = table
                scoped.append((entry, table))
            else:
                self._unscoped[key] = headers[key] = _configured(key, value, "headers")
        object.__setattr__(self, "headers", headers)
        self._scoped = tuple(scoped)
        return self

    def _scope(self, key: str) -> Entry:
        """The ``hosts`` entry a table of headers is scoped to; a ConfigError unless it is one of them."""
        try:
            entry = parse_entry(key)
        except ConfigError:
            entry = None
        if entry is None or entry not in self._entries:
            raise ConfigError(
                f"[tools.http] headers: {key!r} holds a table, so it must be an entry of hosts (written as in "
                "hosts), whose requests get those headers"
            )
        return entry

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
                if isinstance(exc, PolicyDeniedError):
                    raise PolicyDeniedError(scrubbed, policy=exc.policy, rule=exc.rule) from None
                raise ToolError(scrubbed) from None
            raise

    # --- one call: checks, then each request of the redirect chain ------------------------------------------

    def _call(self, **kwargs: Any) -> dict[str, Any]:
        from .connection import Deadline

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
        target = first = self._allowed(parse_url(kwargs.get("url")))
        downgraded = False  # an https request was redirected to http: no credential is sent from then on
        with Deadline(self.timeout) as deadline:
            for hop in range(self.max_redirects + 1):
                sent = {
                    **self._own(headers, target, first, downgraded),
                    **self._configured(target, first, downgraded),
                }
                status, location, content_type, data = self._send(method, target, payload, sent, deadline)
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
                origin, following, previous = target.url, location, target
                try:
                    following = urljoin(origin, location)
                    target = self._allowed(parse_url(following))
                    if status == 303 or (status in (301, 302) and method == "POST"):
                        method, payload = "GET", None  # as browsers do; 307 and 308 keep both
                        headers = {k: v for k, v in headers.items() if k.lower() != "content-type"}
                    self._check_granted(method, "the redirect")
                    self.check_resources(
                        {"host": [target.host], "url": [target.url]}
                    )  # the policies, per hop
                except PolicyDeniedError as exc:
                    raise PolicyDeniedError(
                        f"{_short(origin)} redirected ({status}) to {_short(following)}, which was not "
                        f"requested: {exc}",
                        policy=exc.policy,
                        rule=exc.rule,
                    ) from None
                except (ToolError, ValueError) as exc:
                    raise ToolError(
                        f"{_short(origin)} redirected ({status}) to {_short(following)}, which was not "
                        f"requested: {exc}"
                    ) from None
                downgraded = downgraded or (previous.scheme == "https" and target.scheme == "http")
        raise AssertionError("unreachable: the loop returns or raises")  # pragma: no cover

    def _check_granted(self, method: str, what: str) -> None:
        if method.lower() not in self.granted:
            raise ToolError(
                f"{what} needs {method}, which the http tool was not granted; to allow it, add "
                f'"{method.lower()}" to grant in [tools.http]'
            )

    def _headers(self, extra: Any, body: str | None) -> dict[str, str]:
        """The call's own headers, checked: none may replace a configured one (they are added per request)."""
        if not isinstance(extra, dict):
            raise ToolError("headers must be an object of header names and string values")
        if len(extra) > MAX_CALL_HEADERS:
            raise ToolError(f"a call may set at most {MAX_CALL_HEADERS} headers")
        configured = {name.lower() for name in self._unscoped}
        configured.update(name.lower() for _, table in self._scoped for name in table)
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
        if body is not None and not any(k.lower() == "content-type" for k in headers):
            headers["Content-Type"] = _content_type(body)
        return headers

    @staticmethod
    def _own(headers: dict[str, str], target: Target, first: Target, downgraded: bool) -> dict[str, str]:
        """The call's own headers for a request to ``target``: its credentials stay with the first origin."""
        if target.origin == first.origin and not downgraded:
            return headers
        return {k: v for k, v in headers.items() if not _CREDENTIAL_NAME.search(k)}

    def _configured(self, target: Target, first: Target, downgraded: bool) -> dict[str, str]:
        """The configured headers a request to ``target`` gets: the unscoped ones within the first request's
        origin, and those of each hosts entry that allows ``target``; none at all after https led to http."""
        if downgraded:
            return {}
        chosen: dict[str, str | SecretStr] = {}
        tables = [table for entry, table in self._scoped if entry.allows(target)]
        for table in ([self._unscoped] if target.origin == first.origin else []) + tables:
            for name, value in table.items():
                chosen = {k: v for k, v in chosen.items() if k.lower() != name.lower()}
                chosen[name] = value
        return {k: v.get_secret_value() if isinstance(v, SecretStr) else v for k, v in chosen.items()}

    def _allowed(self, target: Target) -> Target:
        """``target`` when an entry of ``hosts`` allows its host and port; ToolError otherwise."""
        if any(entry.allows(target) for entry in self._entries):
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
        from .connection import resolve

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
        from .connection import PinnedHTTPConnection, PinnedHTTPSConnection, _failure

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


def _configured(name: Any, value: Any, where: str) -> str | SecretStr:
    """A configured header's value, checked; a secret (by reference, or by a credential-like name) is registered
    and kept as a SecretStr. ``where`` is the table it is in, under ``[tools.http]``."""
    if not isinstance(name, str) or not _HEADER_NAME.fullmatch(name):
        raise ConfigError(f"[tools.http] {where}: {name!r} is not a valid header name")
    if name.lower() in _FORBIDDEN_HEADERS:
        raise ConfigError(f"[tools.http] {where}: {name} is set by the tool itself and cannot be configured")
    if not isinstance(value, (str, SecretStr)):
        raise ConfigError(f"[tools.http] {where}.{name} must be text or a secret reference")
    where = f"[tools.http] {where}.{name}"
    secret = isinstance(value, SecretStr) or bool(_CREDENTIAL_NAME.search(name))
    text = value.get_secret_value() if isinstance(value, SecretStr) else value
    if secret:
        text = clean_secret(text, where)  # registered: every scrubber hides it from now on
    if not _HEADER_VALUE.fullmatch(text):
        raise ConfigError(f"{where} holds a character other than printable ASCII")  # never quoted
    return SecretStr(text) if secret else text


def _text(data: bytes, content_type: str) -> str:
    """``data`` decoded with the charset ``content_type`` names when it is a text encoding a body can be in, else
    UTF-8 (an unknown charset, ``base64``, ``idna``...); undecodable bytes replaced either way."""
    match = _CHARSET.search(content_type)
    if match:
        try:
            codec = codecs.lookup(match.group(1))
        except LookupError:
            codec = None
        if codec is not None and codec._is_text_encoding and codec.name not in _NOT_CHARSETS:
            try:
                return data.decode(codec.name, errors="replace")
            except (UnicodeError, ValueError, LookupError, TypeError):
                pass  # a codec that cannot replace what it cannot read
    return data.decode("utf-8", errors="replace")


@hookimpl
def aeon_register_tools(register: Register) -> None:
    register("http", HttpTool)


__getattr__ = lazy_getattr(__name__, _LAZY, globals())
