"""Registries: one per kind of component (:mod:`aeon_kernel.kinds`), filled by the ``aeon_register_*`` hooks.

A registry remembers which plugin registered each name, so an unknown name can list what is available and who
provides it, and a name registered twice is an error naming both plugins rather than a silent override.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, Generic, TypeVar

from aeon_kernel.errors import ConfigError, DuplicateComponentError, UnknownComponentError
from aeon_kernel.kinds import label

T = TypeVar("T")

#: The callback a ``aeon_register_*`` hook receives: ``register(name, factory)``.
Register = Callable[[str, Callable[..., Any]], None]


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
        self._signatures: dict[str, inspect.Signature | None] = {}

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
        return self.bound(name, **options)()

    def bound(self, name: str, offered: dict[str, Any] | None = None, **options: Any) -> Callable[[], T]:
        """The factory registered as ``name`` with ``options`` bound, for components built again and again.

        ``offered`` are dependencies the factory gets only if its signature names them (the run's model, say,
        which a deterministic component does not take). Options the factory's signature cannot take are a
        :class:`ConfigError` naming them, raised here; a ``TypeError`` raised *inside* the factory is its own bug
        and propagates as it is.
        """
        registration = self.get(name)
        if offered:
            signature = self._signature(registration)
            named = set(signature.parameters) if signature is not None else set()
            options = {**{k: v for k, v in offered.items() if k in named and k not in options}, **options}
        signature = self._signature(registration) if options else None
        if signature is not None:
            try:
                signature.bind(**options)
            except TypeError as exc:
                raise ConfigError(
                    f"the {label(self.kind)} {name!r} (from {registration.provider}) cannot be built with the "
                    f"options {sorted(options)}: {exc}. Check its table in aeon.toml."
                ) from None
        return partial(registration.factory, **options)

    def _signature(self, registration: Registration) -> inspect.Signature | None:
        """The factory's signature, read once (some factories are built per run), or None when it has none."""
        if registration.name not in self._signatures:
            try:
                self._signatures[registration.name] = inspect.signature(registration.factory)
            except (TypeError, ValueError):  # no signature to check (some builtins): let the call decide
                self._signatures[registration.name] = None
        return self._signatures[registration.name]

    def providers(self) -> dict[str, str]:
        return {name: reg.provider for name, reg in self._entries.items()}

    def names(self) -> list[str]:
        return sorted(self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __len__(self) -> int:
        return len(self._entries)
