"""Registries: one per kind of component, filled by the ``aeon_register_*`` hooks, plus spec 002's ToolRegistry.

A registry remembers which plugin registered each name, so an unknown name can list what is available and who
provides it, and a name registered twice is an error naming both plugins rather than a silent override.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from aeon_kernel.contracts import Tool
from aeon_kernel.errors import DuplicateComponentError, ToolRegistrationError, UnknownComponentError

T = TypeVar("T")

#: The callback a ``aeon_register_*`` hook receives: ``register(name, factory)``.
Register = Callable[[str, Callable[..., Any]], None]

COMPONENT_KINDS: tuple[str, ...] = (
    "llm_adapters",
    "memory_backends",
    "tools",
    "validators",
    "supervisors",
    "convergence_engines",
    "telemetry_sinks",
    "state_stores",
)


@dataclass(frozen=True)
class Registration:
    name: str
    factory: Callable[..., Any]
    provider: str


class ComponentRegistry(Generic[T]):
    """Named factories of one kind of component, each tagged with the plugin that provided it."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._entries: dict[str, Registration] = {}
        self._conflicts: dict[str, DuplicateComponentError] = {}

    def add(self, name: str, factory: Callable[..., T], provider: str) -> None:
        if not isinstance(name, str) or not name:
            raise TypeError(f"{provider}: a {self.kind} name must be a non-empty string, got {name!r}")
        if not callable(factory):
            raise TypeError(f"{provider}: the factory for {self.kind} {name!r} is not callable")
        existing = self._entries.get(name)
        if existing is not None:
            raise DuplicateComponentError(self.kind, name, existing.provider, provider)
        self._entries[name] = Registration(name, factory, provider)

    def mark_conflict(self, name: str, error: DuplicateComponentError) -> None:
        """Remember that two plugins claimed ``name``: choosing it then fails, naming both."""
        self._conflicts[name] = error

    def get(self, name: str) -> Registration:
        if name in self._conflicts:
            raise self._conflicts[name]
        try:
            return self._entries[name]
        except KeyError:
            raise UnknownComponentError(self.kind, name, self.providers()) from None

    def create(self, name: str, **options: Any) -> T:
        """Call the factory registered as ``name`` with ``options``."""
        return self.get(name).factory(**options)  # type: ignore[no-any-return]

    def providers(self) -> dict[str, str]:
        return {name: reg.provider for name, reg in self._entries.items()}

    def names(self) -> list[str]:
        return sorted(self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __len__(self) -> int:
        return len(self._entries)


class ToolRegistry:
    """The tools a run may call (FR-020…022), with spec 002's interface."""

    def __init__(self, tools: list[Tool] | None = None) -> None:
        self._tools: dict[str, Tool] = {}
        for tool in tools or ():
            self.register(tool)

    def register(self, tool: Tool) -> None:
        """Add ``tool``. Its schemas were validated when it was built; a duplicate name is refused."""
        if not isinstance(tool, Tool):
            raise ToolRegistrationError(
                f"expected an aeon_kernel.Tool, got {type(tool).__name__}; wrap functions with FunctionTool"
            )
        if tool.name in self._tools:
            raise ToolRegistrationError(f"a tool named {tool.name!r} is already registered")
        self._tools[tool.name] = tool

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def list_all(self) -> list[str]:
        return list(self._tools)

    def unregister(self, name: str) -> None:
        self._tools.pop(name, None)

    def export_tools_for_llm(self) -> list[dict[str, Any]]:
        """Every tool's name, description, schemas and example, for prompts and repairs."""
        return [tool.describe() for tool in self._tools.values()]

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __iter__(self) -> Iterator[Tool]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)
