"""Secret values known to this process, and the scrubbers that keep every form of them out of every output.

A secret reaches Aeon through a reference in ``aeon.toml`` (``{ "$env" = ... }``, ``{ "$file" = ... }``);
:func:`aeon_kernel.config.resolve_secrets` registers each value it resolves, and a component given a secret by
other means (in code) registers it with :func:`register_secret`. From then on the places that write something out
— error records, the JSONL log, the state store, cassettes, the CLI, the ``aeon`` logger — pass it through a
scrubber.

Scrubbing is by value, not by where a value was seen, so it does not depend on how a message was built. It
replaces, with ``***``:

* the value in every encoding a message may carry it in: raw, JSON-escaped (ASCII or not), Python ``repr`` (of
  the text and of its UTF-8 bytes), percent-encoded (either case, ``+`` for space or not), HTML-escaped, with its
  whitespace collapsed, hex and base64 (at each alignment) of its bytes, and each of those escaped once more (a
  JSON string inside a JSON document, the repr of an error message);
* any piece of :data:`MIN_FRAGMENT` or more characters of any of those forms, so a value cut short (an excerpt of
  a server's reply) or split in two still never shows more than a few characters of itself.

A value shorter than :data:`MIN_SECRET` characters is not registered: hiding it would garble ordinary text.

Cost: nothing at all while no secret is registered. Otherwise one pass over the text in C (its 4-character
chunks against a set) and exact work only around a hit.
"""

from __future__ import annotations

import base64
import html
import json
import logging
import re
import threading
import unicodedata
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from itertools import chain, repeat
from typing import Any, Final
from urllib.parse import quote, quote_plus

from aeon_kernel.errors import ConfigError

#: The replacement for a secret, or a piece of one.
REDACTED: Final = "***"
#: Pieces of a secret this long or longer are scrubbed wherever they appear.
MIN_FRAGMENT: Final = 8
#: Values shorter than this are not treated as secrets.
MIN_SECRET: Final = 4
#: The longest secret :func:`clean_secret` accepts (and the most a ``$file`` secret may hold, in bytes): a key,
#: a token or a password is far shorter, and each character costs the scrubber an index entry per encoding.
MAX_SECRET: Final = 8 * 1024
#: Longer values are indexed in their common encodings only (raw, JSON, repr, HTML, hex, base64), not
#: percent-encoded or escaped twice.
_FULLY_ENCODED: Final = 1024
#: Text is scanned in chunks of this size: a piece of MIN_FRAGMENT characters always holds a whole chunk.
_CHUNK: Final = 4
_CHUNKS: Final = re.compile(r".{4}", re.DOTALL)
_PERCENT: Final = re.compile(r"%[0-9A-F]{2}")
#: what ``httpx`` and most URL builders leave unescaped in a query or path
_URL_SAFE: Final = "!$&'()*+,;=:@/?~"


@dataclass(frozen=True, slots=True)
class _Index:
    """Every form of every registered secret, ready for scanning (rebuilt when a new value is registered)."""

    #: 4-character chunk -> where it occurs: (form, offset)
    chunks: dict[str, tuple[tuple[_Form, int], ...]]
    #: forms too short for piece-matching, replaced only whole (longest first)
    short: tuple[str, ...]
    #: every form, each after a NUL: what a growing text's end may yet turn into (:func:`scrub_hold`)
    forms: str


#: Unicode categories a secret may not contain: controls (C0, DEL, C1), format characters (zero-width ones, a
#: byte-order mark), line and paragraph separators
_CONTROL: Final = frozenset({"Cc", "Cf", "Zl", "Zp"})
_LINE_BREAKS: Final = frozenset("\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029")

_lock = threading.Lock()
_values: set[str] = set()
_index: _Index | None = None


def register_secret(value: str) -> None:
    """Treat ``value`` as a secret from now on, in this whole process: every scrubber hides it, in any form."""
    global _index
    if not isinstance(value, str) or len(value) < MIN_SECRET or value in _values:
        return
    with _lock:
        if value in _values:
            return
        if _index is None:  # the first secret: from now on the kernel's log records are scrubbed too
            logging.getLogger("aeon").addFilter(_ScrubLogRecords())
        _index = _extended(_index, _forms(value))  # a new index, swapped in whole: scrubbers take no lock
        _values.add(value)


@contextmanager
def new_secrets_forgotten() -> Iterator[None]:
    """Forget, on leaving, the secrets registered inside: for test suites, whose tests share one process (the
    registry is process-wide by design, so one module's secrets would otherwise scrub another's output)."""
    global _index
    with _lock:
        kept, index = set(_values), _index
    try:
        yield
    finally:
        with _lock:
            _values.intersection_update(kept)
            _index = index


def clean_secret(value: str, what: str) -> str:
    """A credential as it should be sent: surrounding whitespace (the newline ``echo`` or an editor leaves)
    stripped, and registered. A control character inside it (a line break, NUL, an escape, a zero-width
    character) or text that is not valid Unicode is a ConfigError that starts with ``what`` and never quotes
    the value: a header or URL built from it would carry it in an escaped form, or be refused."""
    value = value.strip()
    if len(value) > MAX_SECRET:
        raise ConfigError(
            f"{what} is longer than {MAX_SECRET} characters; a secret holds one key, token or password"
        )
    for char in value:
        if "\ud800" <= char <= "\udfff":  # an environment variable that is not UTF-8 decodes to these
            raise ConfigError(f"{what} is not valid UTF-8 text")
        if unicodedata.category(char) in _CONTROL:
            kind = "a line break" if char in _LINE_BREAKS else "a control character"
            raise ConfigError(
                f"{what} contains {kind} inside it (only surrounding whitespace is stripped); a secret must be "
                "one line of printable text. Check how it was written."
            )
    register_secret(value)
    return value


def scrub_secrets(text: str) -> str:
    """``text`` with every registered secret, in any form or any piece of MIN_FRAGMENT+ characters, as ``***``."""
    index = _index
    if index is None or not text:
        return text
    if index.chunks:
        text = _scrub_pieces(text, index.chunks)
    for form in index.short:
        if form in text:
            text = text.replace(form, REDACTED)
    return text


def scrub_hold(text: str) -> int:
    """How many characters at the end of ``text``, a text still growing (a streamed reply), may yet turn out to be
    part of a secret. The count is in ``text``, not in ``text`` scrubbed: scrub the start before them on its own,
    and pass it on while it is the start of ``scrub_secrets(text)`` (a piece scrubbed across the cut waits).

    A piece that more text could make long enough to be scrubbed is a run of some form of a secret that reaches
    the end, so the longest end of ``text`` found inside a form is the most that can change (usually a character
    or two; 0 while no secret is registered)."""
    index = _index
    if index is None:
        return 0
    held = 0
    while held < len(text) and text[len(text) - held - 1 :] in index.forms:
        held += 1
    return held


def scrub_secrets_data(value: Any) -> Any:
    """JSON-like ``value`` (dicts, lists, tuples, strings) with every string in it scrubbed, keys too: a copy, or
    ``value`` itself while no secret is registered."""
    if _index is None:
        return value
    return _scrub_data(value)


def scrub_secrets_json(text: str) -> str:
    """Serialized JSON with every secret scrubbed, still valid JSON: the strings inside are scrubbed, not the
    text (replacing a piece of an escape sequence could break it). ``text`` that is not JSON, or that would
    still show a secret across its syntax, is scrubbed as text. Returns ``text`` itself when nothing changed."""
    if _index is None or scrub_secrets(text) == text:
        return text
    try:
        data = json.loads(text)
    except ValueError:
        return scrub_secrets(text)
    dumped = json.dumps(_scrub_data(data), ensure_ascii=text.isascii())  # escaped as the caller chose
    return scrub_secrets(dumped)  # a no-op unless a secret spans strings (no secret is kept to keep JSON)


class _ScrubLogRecords(logging.Filter):
    """Scrubs the records of the ``aeon`` logger (a failing sink's exception, say), their tracebacks included."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a malformed record: logging reports it when it is formatted
            return True
        scrubbed = scrub_secrets(message)
        if scrubbed != message:
            record.msg, record.args = scrubbed, None
        if record.exc_info and record.exc_text is None:
            record.exc_text = scrub_secrets(logging.Formatter().formatException(record.exc_info))
        return True


def forms(value: str) -> set[str]:
    """The encodings of ``value`` a scrubber looks for (see the module docstring)."""
    return {form.text for form in _forms(value)}


@dataclass(frozen=True, eq=False, slots=True)
class _Form:
    """One encoding of one secret, knowing which character of the secret each of its characters encodes: a run
    counts by the secret's characters it shows, so ``\\u00e9\\u00fc`` (two characters, escaped) is not a
    "piece of 8"."""

    text: str
    #: for each character of ``text``, the index of the secret's character it encodes
    owner: tuple[int, ...]
    #: how many of the secret's characters a run must show to be scrubbed: MIN_FRAGMENT, or all of a short one
    needed: int


def _forms(value: str) -> list[_Form]:
    found: dict[str, _Form] = {}
    full = len(value) <= _FULLY_ENCODED
    for text in dict.fromkeys((value, " ".join(value.split()))):
        needed = min(MIN_FRAGMENT, len(text))
        chars = set(text)
        first = []
        for encode in _ENCODINGS if full else _ENCODINGS[:_BASIC]:
            table = {char: encode(char) for char in chars}
            first.append(list(map(table.__getitem__, text)))
        nested = []
        for escape in _NESTED if full else ():
            for pieces in first:
                table = {piece: escape(piece) for piece in set(pieces)}
                nested.append(list(map(table.__getitem__, pieces)))
        for pieces in [*first, *nested]:
            form = "".join(pieces)
            if form not in found:
                owner = tuple(chain.from_iterable(repeat(i, len(piece)) for i, piece in enumerate(pieces)))
                found[form] = _Form(form, owner, needed)
        encoded = text.encode("utf-8", "surrogatepass")
        byte_owner = [index for index, char in enumerate(text) for _ in char.encode("utf-8", "surrogatepass")]
        for form, byte_of in _binary(encoded):
            if form not in found:
                found[form] = _Form(form, tuple(byte_owner[at] for at in byte_of), needed)
    return list(found.values())


def _python_escape(char: str, *, single: bool, ascii_only: bool = False) -> str:
    """``char`` as it shows inside a repr quoted with ``'`` (``single``, the usual) or ``"``."""
    if char == "'":
        return "\\'" if single else "'"
    return (ascii if ascii_only else repr)(char)[1:-1]


def _bytes_escape(char: str, *, single: bool) -> str:
    """``char``'s UTF-8 bytes as they show inside the repr of a bytes value."""
    return "".join(
        ("\\'" if single else "'") if byte == 0x27 else repr(bytes([byte]))[2:-1]
        for byte in char.encode("utf-8", "surrogatepass")
    )


def _percent(char: str, safe: str, plus: bool, lower: bool) -> str:
    raw = char.encode("utf-8", "surrogatepass")
    encoded = quote_plus(raw, safe=safe) if plus else quote(raw, safe=safe)
    return _PERCENT.sub(lambda m: m.group().lower(), encoded) if lower else encoded


#: Encodings that work character by character (JSON, repr, HTML, URLs, hex), as functions of one character.
_ENCODINGS: Final[tuple[Callable[[str], str], ...]] = (
    lambda c: c,
    lambda c: json.dumps(c)[1:-1],
    lambda c: json.dumps(c, ensure_ascii=False)[1:-1],
    partial(_python_escape, single=True),
    partial(_python_escape, single=False),
    partial(_python_escape, single=True, ascii_only=True),
    partial(_python_escape, single=False, ascii_only=True),
    partial(_bytes_escape, single=True),
    partial(_bytes_escape, single=False),
    html.escape,
    lambda c: c.encode("utf-8", "surrogatepass").hex(),
    lambda c: c.encode("utf-8", "surrogatepass").hex().upper(),
    # (a value longer than _FULLY_ENCODED is indexed in the encodings above only)
    *(
        partial(_percent, safe=safe, plus=plus, lower=lower)
        for safe in ("", "/", _URL_SAFE)
        for plus in (False, True)
        for lower in (False, True)
    ),
)
_BASIC: Final = 12
#: One more level: a JSON string inside a JSON document, the repr of a message that quoted the value.
_NESTED: Final[tuple[Callable[[str], str], ...]] = (
    lambda piece: json.dumps(piece)[1:-1],
    lambda piece: json.dumps(piece, ensure_ascii=False)[1:-1],
    lambda piece: "".join(_python_escape(c, single=True) for c in piece),
    lambda piece: "".join(_python_escape(c, single=False) for c in piece),
)


def _binary(encoded: bytes) -> list[tuple[str, list[int]]]:
    """Base64 (standard and URL-safe) of ``encoded`` at each of the three byte alignments — only the characters
    that depend on ``encoded`` alone — with the byte each character starts in."""
    found = []
    for pad in range(3):
        for encode in (base64.b64encode, base64.urlsafe_b64encode):
            text = encode(b"\0" * pad + encoded).decode("ascii")
            start, end = -(-8 * pad // 6), 8 * (pad + len(encoded)) // 6
            found.append((text[start:end], [6 * k // 8 - pad for k in range(start, end)]))
    return found


def _extended(index: _Index | None, forms: list[_Form]) -> _Index:
    """``index`` with ``forms`` added (a copy: scrubbers in other threads may be reading ``index``)."""
    chunks = dict(index.chunks) if index else {}
    short = set(index.short) if index else set()
    added: dict[str, list[tuple[_Form, int]]] = {}
    for form in forms:
        if len(form.text) < MIN_FRAGMENT:
            short.add(form.text)  # only a short secret has short forms: replaced whole
            continue
        for offset in range(len(form.text) - _CHUNK + 1):
            added.setdefault(form.text[offset : offset + _CHUNK], []).append((form, offset))
    for chunk, places in added.items():
        chunks[chunk] = (*chunks.get(chunk, ()), *places)
    every = (index.forms if index else "") + "".join(f"\0{form.text}" for form in forms)
    return _Index(chunks, tuple(sorted(short, key=len, reverse=True)), every)


def _scrub_pieces(text: str, chunks: dict[str, tuple[tuple[_Form, int], ...]]) -> str:
    """Replace every run of ``text`` that shows MIN_FRAGMENT+ characters of a secret in one of its forms.

    Such a run is at least MIN_FRAGMENT characters long, so it holds a whole chunk at a multiple of 4 in
    ``text``, and that chunk occurs somewhere in the form: looking up ``text``'s aligned chunks finds every run,
    and each hit is extended to the longest run it belongs to.
    """
    aligned = _CHUNKS.findall(text)
    if chunks.keys().isdisjoint(aligned):
        return text
    spans: list[tuple[int, int]] = []
    done: dict[tuple[_Form, int], int] = {}  # (form, where it would start in text) -> end of the run found
    for number, chunk in enumerate(aligned):
        places = chunks.get(chunk)
        if places is None:
            continue
        at = number * _CHUNK
        for form, offset in places:
            if done.get((form, at - offset), -1) >= at + _CHUNK:
                continue  # inside a run of this form, at this alignment, found from an earlier chunk
            encoded = form.text
            if text.endswith(encoded[:offset], 0, at):
                left = offset
            else:
                left, most = 0, min(at, offset)
                while left < most and text[at - left - 1] == encoded[offset - left - 1]:
                    left += 1
            if text.startswith(encoded[offset:], at):
                right = len(encoded) - offset
            else:
                right = _CHUNK
                while at + right < len(text) and text[at + right] == encoded[offset + right]:
                    right += 1
            done[(form, at - offset)] = at + right
            if form.owner[offset + right - 1] - form.owner[offset - left] + 1 >= form.needed:
                spans.append((at - left, at + right))
    if not spans:
        return text
    spans.sort()
    merged = [spans[0]]
    for start, end in spans[1:]:
        if start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    pieces, last = [], 0
    for start, end in merged:
        pieces += [text[last:start], REDACTED]
        last = end
    pieces.append(text[last:])
    return "".join(pieces)


def _scrub_data(value: Any) -> Any:
    if isinstance(value, str):
        return scrub_secrets(value)
    if isinstance(value, dict):
        return {_scrub_data(key): _scrub_data(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_scrub_data(item) for item in value]
    if isinstance(value, tuple):
        return tuple(_scrub_data(item) for item in value)
    return value
