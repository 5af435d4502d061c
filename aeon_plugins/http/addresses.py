"""URLs and allowlist entries of the ``http`` tool, each checked on its own, and which addresses are public.

:func:`parse_url` reads a URL a model asked for (or a redirect's target) into a :class:`Target`, refusing
what parsers disagree about; :func:`parse_entry` reads one entry of ``hosts`` into an :class:`Entry`;
:func:`normal_host` is the form both are compared in, and :func:`is_public` says whether an address a name
resolved to may be reached without being listed. The tool (:mod:`aeon_plugins.http`) puts them together.
"""

from __future__ import annotations

import ipaddress
import re
import unicodedata
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import quote, urlsplit

from aeon_kernel import ConfigError, ToolError

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

SCHEMES: Final = {"http": 80, "https": 443}
MAX_URL_CHARS: Final = 2048
_LABEL: Final = re.compile(r"[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?")
_NUMERIC_LABEL: Final = re.compile(r"[0-9]+|0x[0-9a-f]*")
_PORT: Final = re.compile(r"[0-9]{1,5}")
_REFUSED_CHARACTERS: Final = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp", "Zs"})
_LOCALHOST: Final = (ipaddress.ip_address("127.0.0.1"), ipaddress.ip_address("::1"))
#: IPv6 ranges that carry an IPv4 address in their last 32 bits (IPv4-compatible, NAT64)
_EMBEDDING: Final = (ipaddress.IPv6Network("::/96"), ipaddress.IPv6Network("64:ff9b::/96"))
#: IPv6 ranges never public whatever Python's tables say: IPv4-compatible, local-use NAT64, site-local
_NOT_PUBLIC_V6: Final = tuple(ipaddress.IPv6Network(n) for n in ("::/96", "64:ff9b:1::/48", "fec0::/10"))


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

    def allows(self, target: Target) -> bool:
        """Whether this entry lets a request go to ``target`` (its name, or its address, and its port)."""
        if not self.allows_port(target.scheme, target.port):
            return False
        if target.address is None:
            return self.name == target.host
        return self.holds(target.address)


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
    def origin(self) -> tuple[str, str, int]:
        """Scheme, host and port: what a redirect must keep for credentials to follow it."""
        return self.scheme, self.host, self.port

    @property
    def shown(self) -> str:
        """``host:port`` as an entry of ``hosts`` would allow it (the port only when it is not the default)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port == SCHEMES[self.scheme] else f"{host}:{self.port}"


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


def _short(text: str, most: int = 200) -> str:
    return text if len(text) <= most else f"{text[: most - 3]}..."
