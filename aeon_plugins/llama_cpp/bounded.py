"""A JSON Schema made fit for llama.cpp's grammar converter where it would silently loosen it.

The converter follows a string's ``pattern`` and ignores its ``minLength``/``maxLength``: the calculator's
expression (``^[-+*/%^().0-9eE ]+$``, at most 200 characters) became an unbounded string, and Gemma 3 270M, asked
for a stock price, wrote "1000…" until ``max_tokens`` cut the plan off. A pattern that is one character class (or
one escaped or plain character) repeated, anchored at both ends, gets the length bounds as its repetition
(``^[…]{1,200}$``), which the converter does follow. Other patterns are left as they are; the kernel still
validates every value against the schema as written.
"""

from __future__ import annotations

import re
from typing import Any, Final

#: ``^ATOM+$`` or ``^ATOM*$``: one character class, escape or character, repeated, anchored
_REPEATED: Final = re.compile(r"\^(\[(?:\\.|[^\]\\])+\]|\\.|[^\\\[\](){}|?*+^$])([+*])\$")


def bounded(schema: Any) -> Any:
    """``schema`` with the length bounds of its repeated-atom patterns written into the patterns (a copy)."""
    if isinstance(schema, list):
        return [bounded(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    copy = {key: bounded(value) for key, value in schema.items()}
    pattern, low, high = copy.get("pattern"), _count(copy.get("minLength")), _count(copy.get("maxLength"))
    match = _REPEATED.fullmatch(pattern) if isinstance(pattern, str) else None
    if match is not None and (low is not None or high is not None):
        atom, repeat = match.groups()
        least = max(low or 0, 1 if repeat == "+" else 0)
        if high is None or least <= high:
            copy["pattern"] = f"^{atom}{{{least},{'' if high is None else high}}}$"
    return copy


def _count(value: Any) -> int | None:
    """A length bound, or None for what is none (absent, not a whole number >= 0)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None
