"""The mapping language of the declarative nodes (``call_tool``, ``template``): a JSON value whose strings may hold
``{/json/pointer}`` slots (RFC 6901, by the ``jsonpointer`` library) into a document — never an expression.

A string that is one slot (``"{/amount}"``) becomes the value there, whatever its type; a slot inside a longer
string (``"{/a} + {/b}"``) is replaced by the value's text (a string as it is, anything else as compact JSON). Any
other ``{`` is literal. Pointers are parsed when the node is built, so a malformed one is a load-time problem.
"""

from __future__ import annotations

import json
import re
from typing import Any

import jsonpointer

from aeon_kernel.errors import ValidationError

_SLOT = re.compile(r"\{(/[^{}]*)\}")


class Template:
    """A JSON value with slots, filled from a document by :meth:`fill`; ``where`` names it in errors."""

    def __init__(self, value: Any, where: str, of: str = "the input") -> None:
        self.value, self.where, self.of = value, where, of
        self._pointers: dict[str, jsonpointer.JsonPointer] = {}
        self._parse(value, where)

    def _parse(self, value: Any, where: str) -> None:
        if isinstance(value, dict):
            for key, item in value.items():
                self._parse(item, f"{where}.{key}")
        elif isinstance(value, list):
            for i, item in enumerate(value):
                self._parse(item, f"{where}[{i}]")
        elif isinstance(value, str):
            for pointer in _SLOT.findall(value):
                try:
                    self._pointers[pointer] = jsonpointer.JsonPointer(pointer)
                except jsonpointer.JsonPointerException as exc:
                    raise ValidationError(f"{where}: {{{pointer}}} is not a JSON pointer: {exc}") from None
        elif not (value is None or isinstance(value, bool | int | float)):
            raise ValidationError(f"{where}: a template holds JSON values, not {type(value).__name__}")

    def fill(self, document: Any) -> Any:
        """The template with every slot replaced by the value ``document`` holds there."""
        return self._fill(self.value, document, self.where)

    def _fill(self, value: Any, document: Any, where: str) -> Any:
        if isinstance(value, dict):
            return {key: self._fill(item, document, f"{where}.{key}") for key, item in value.items()}
        if isinstance(value, list):
            return [self._fill(item, document, f"{where}[{i}]") for i, item in enumerate(value)]
        if not isinstance(value, str) or "{/" not in value:
            return value
        whole = _SLOT.fullmatch(value)
        if whole:
            return self._at(whole.group(1), document, where)
        return _SLOT.sub(lambda slot: text(self._at(slot.group(1), document, where)), value)

    def _at(self, pointer: str, document: Any, where: str) -> Any:
        try:
            return self._pointers[pointer].resolve(document)
        except jsonpointer.JsonPointerException:
            have = sorted(document) if isinstance(document, dict) else type(document).__name__
            raise ValidationError(f"{where}: {{{pointer}}} is not in {self.of} (it has {have})") from None


def text(value: Any) -> str:
    """A value as text: a string as it is, anything else as compact JSON."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, separators=(",", ":"))
