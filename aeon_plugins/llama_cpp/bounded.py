"""A JSON Schema made fit for llama.cpp's grammar converter where it would silently loosen it.

The converter follows a string's ``pattern`` and ignores its ``minLength``/``maxLength``: the calculator's
expression (``^[-+*/%^().0-9eE ]+$``, at most 200 characters) became an unbounded string, and Gemma 3 270M, asked
for a stock price, wrote "1000…" until ``max_tokens`` cut the plan off. A pattern that is one character class (or
one escaped or plain character) repeated, anchored at both ends, gets the length bounds as its repetition
(``^[…]{1,200}$``), which the converter does follow. Other patterns are left as they are; the kernel still
validates every value against the schema as written.

:func:`to_gbnf` converts with one correction: llama-cpp-python's converter escapes quotes but not backslashes in
the literals it writes for ``const`` and ``enum`` strings, so a string holding a ``"`` (JSON ``\\"``) became a
grammar llama.cpp cannot parse — a plan's goal fixed to a request that quotes something failed every time.
"""

from __future__ import annotations

import re
from typing import Any, Final

#: ``^ATOM+$`` or ``^ATOM*$``: one character class, escape or character, repeated, anchored
_REPEATED: Final = re.compile(r"\^(\[(?:\\.|[^\]\\])+\]|\\.|[^\\\[\](){}|?*+^$])([+*])\$")


#: longer length bounds are left to the kernel's validation: llama.cpp spells a bound out as that many nested
#: optional repetitions, and refuses one of 1,200 (at 100,000 it crashed); 1,000 still parses
GRAMMAR_LENGTH: Final = 1000
#: an escaped character of a pattern that GBNF cannot escape: written as a one-character class instead
_PUNCTUATION: Final = re.compile(r"(?<!\\)\\([$.\-/#&~!@%,;:'<>=`])")


def bounded(schema: Any) -> Any:
    """``schema`` with the length bounds of its repeated-atom patterns written into the patterns, lengths above
    :data:`GRAMMAR_LENGTH` dropped, and escaped punctuation in patterns written as classes (a copy)."""
    if isinstance(schema, list):
        return [bounded(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    copy = {key: bounded(value) for key, value in schema.items()}
    for key in ("minLength", "maxLength"):
        if (_count(copy.get(key)) or 0) > GRAMMAR_LENGTH:
            del copy[key]
    pattern, low, high = copy.get("pattern"), _count(copy.get("minLength")), _count(copy.get("maxLength"))
    if isinstance(pattern, str):
        pattern = copy["pattern"] = _outside_classes(pattern)
    match = _REPEATED.fullmatch(pattern) if isinstance(pattern, str) else None
    if match is not None and (low is not None or high is not None):
        atom, repeat = match.groups()
        least = max(low or 0, 1 if repeat == "+" else 0)
        if high is None or least <= high:
            copy["pattern"] = f"^{atom}{{{least},{'' if high is None else high}}}$"
    return copy


def _outside_classes(pattern: str) -> str:
    """Outside character classes, ``\\$`` as ``[$]`` (and the like) and a stray ``]`` escaped (the converter loops
    for ever on ``[[:alpha:]]``): the same regular expression, which llama.cpp can spell."""
    parts = re.split(r"(\[(?:\\.|[^\]\\])*\])", pattern)  # character classes at odd places, kept as they are
    return "".join(
        part if i % 2 else _PUNCTUATION.sub(r"[\1]", _STRAY.sub(r"\\]", part)) for i, part in enumerate(parts)
    )


_STRAY: Final = re.compile(r"(?<!\\)\]")


def _count(value: Any) -> int | None:
    """A length bound, or None for what is none (absent, not a whole number >= 0)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def to_gbnf(schema: dict[str, Any], llama_grammar: Any) -> str:
    """``schema`` (bounded) as GBNF, by ``llama_grammar``'s converter with its literals escaped in full."""

    class Converter(llama_grammar.SchemaConverter):  # type: ignore[misc]
        def _format_literal(self, literal: str) -> str:
            return '"' + _LITERAL_ESCAPE.sub(lambda m: _LITERAL_ESCAPES[m.group(0)], literal) + '"'

    converter = Converter(prop_order={}, allow_fetch=False, dotall=False, raw_pattern=False)
    converter.visit(converter.resolve_refs(bounded(schema), "stdin"), "")
    return str(converter.format_grammar())


_LITERAL_ESCAPE: Final = re.compile(r'[\r\n"\\]')
_LITERAL_ESCAPES: Final = {"\r": "\\r", "\n": "\\n", '"': '\\"', "\\": "\\\\"}
