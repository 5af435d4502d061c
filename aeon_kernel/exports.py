"""Lazy re-exports (PEP 562) for the public modules: ``aeon_kernel``, ``aeon_kernel.kit`` and plugin packages.

A public module lists what it offers once, as imports under ``if TYPE_CHECKING:`` (what type checkers and readers
see); ``python scripts/exports.py`` writes the table below them (name -> defining module) that
:func:`lazy_getattr` serves at run time, and a test fails when the table is stale. Importing the public module
then costs almost nothing: each name loads its module on first use.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_getattr(package: str, table: Mapping[str, str], namespace: dict[str, Any]) -> Callable[[str], Any]:
    """The module ``__getattr__`` of ``package``: a name of ``table`` is imported from its module on first use and
    kept in ``namespace`` (the module's globals), so later lookups do not come here."""

    def __getattr__(name: str) -> Any:
        module = table.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    return __getattr__
