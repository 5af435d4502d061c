"""Helpers every memory backend shares, so a value reads back the same whichever backend holds it (FR-014…018).

Keys are non-empty UTF-8 strings; values are stored as JSON text (never pickle) and decoded strictly; counters
(``Memory.increment``) stay signed 64-bit integers, SQLite's range, in every backend.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from json.encoder import c_make_encoder, encode_basestring, encode_basestring_ascii  # type: ignore[attr-defined]
from json.scanner import make_scanner
from typing import Any, Final

from aeon_kernel.errors import MemoryStoreError

#: SQLite integers are signed 64-bit; counters stay in that range in every backend.
INT64_MIN: Final = -(2**63)
INT64_MAX: Final = 2**63 - 1


def is_utf8(text: str) -> bool:
    """False for strings holding a lone surrogate: they have no UTF-8 form, so no key, JSON text, SQLite column
    or terminal can hold them."""
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def check_key(key: Any) -> str:
    """Keys are non-empty strings that encode as UTF-8."""
    if not isinstance(key, str) or not key:
        raise MemoryStoreError(f"memory keys must be non-empty strings, got {key!r}")
    if not is_utf8(key):
        raise MemoryStoreError(f"memory key {key!r} is not valid Unicode text (it holds a lone surrogate)")
    return key


def check_prefix(prefix: Any) -> str:
    if not isinstance(prefix, str):
        raise MemoryStoreError(f"a search prefix must be a string, got {prefix!r}")
    return prefix


def check_amount(key: str, amount: Any) -> int:
    if not isinstance(amount, int) or isinstance(amount, bool) or not INT64_MIN <= amount <= INT64_MAX:
        raise MemoryStoreError(f"cannot increment {key!r}: amount must be a 64-bit integer, got {amount!r}")
    return amount


def _check_object_keys(value: Any) -> None:
    """Refuse object keys that are not strings: json.dumps would silently turn 1, True or None into text."""
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise TypeError(f"object keys must be strings, got {key!r}")
            _check_object_keys(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            _check_object_keys(item)


def json_encoder(
    *, ensure_ascii: bool = True, allow_nan: bool = True, default: Callable[[Any], Any] | None = None
) -> Callable[[Any], str]:
    """``json.JSONEncoder(...).encode`` with the C encoder built once, not per call (twice as fast on the small
    values a cycle encodes several of). No circular-reference check: a cycle ends in ``RecursionError``."""
    if c_make_encoder is None:  # pragma: no cover - CPython always has it
        return json.JSONEncoder(ensure_ascii=ensure_ascii, allow_nan=allow_nan, default=default).encode
    quote = encode_basestring_ascii if ensure_ascii else encode_basestring
    encode = c_make_encoder(None, default or _refuse, quote, None, ": ", ", ", False, False, allow_nan)
    return lambda value: "".join(encode(value, 0))


def _refuse(value: Any) -> Any:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


_scan = make_scanner(json.JSONDecoder())  # type: ignore[arg-type]


def decode_own(text: str) -> Any:
    """The value of JSON text this process wrote with :func:`encode_value` (no whitespace around it): the decoder's
    scanner without ``json.loads``'s layers, four times as fast on a small value."""
    return _scan(text, 0)[0]


_encode_readable = json_encoder(ensure_ascii=False, allow_nan=False)
_encode_escaped = json_encoder(allow_nan=False)


def encode_value(key: str, value: Any) -> str:
    """``value`` as JSON text, or MemoryStoreError naming ``key`` (NaN, sets, bytes, objects, non-str keys).

    Every memory backend stores this text, so a value reads back the same whichever backend holds it.
    """
    try:
        _check_object_keys(value)
        text = _encode_readable(value)
    except (TypeError, ValueError, RecursionError) as exc:
        raise MemoryStoreError(f"value for {key!r} is not JSON-serialisable: {exc}") from None
    if not is_utf8(text):  # a lone surrogate inside a string: keep it, escaped, as JSON allows
        text = _encode_escaped(value)
    return text


def increment_error(key: str, amount: int, current: Any) -> MemoryStoreError:
    """Why an increment was refused: the stored value is no 64-bit integer, or the sum would leave the range."""
    if isinstance(current, int) and not isinstance(current, bool) and INT64_MIN <= current <= INT64_MAX:
        return MemoryStoreError(
            f"cannot increment {key!r}: {current} + {amount} leaves the 64-bit integer range"
        )
    shown = json.dumps(current, ensure_ascii=False)
    shown = shown if len(shown) <= 80 else shown[:77] + "..."
    return MemoryStoreError(f"cannot increment {key!r}: it holds {shown}, not a 64-bit integer")


def decode_value(key: str, text: str | bytes) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        raise MemoryStoreError(
            f"the value stored under {key!r} is not JSON; was it written by Aeon?"
        ) from None
