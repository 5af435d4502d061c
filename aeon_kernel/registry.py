"""Registries: one per kind of component (:mod:`aeon_kernel.kinds`), filled by the ``aeon_register_*`` hooks.

A registry remembers which plugin registered each name, so an unknown name can list what is available and who
provides it, and a name registered twice is an error naming both plugins rather than a silent override.

Every component is built here (:meth:`ComponentRegistry.bound`), so this is the one place where a factory that
raises, or returns something that is not its kind's contract, becomes a :class:`ComponentBuildError` — a
configuration error naming the kind, the name and the plugin — instead of a traceback (issue 13).
"""

from __future__ import annotations

import importlib
import inspect
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Generic, TypeVar

from aeon_kernel.errors import (
    AeonError,
    ComponentBuildError,
    ConfigError,
    DuplicateComponentError,
    UnknownComponentError,
)
from aeon_kernel.kinds import BY_NAME, label

if TYPE_CHECKING:
    from aeon_kernel.tools import Tool

T = TypeVar("T")

#: The callback a ``aeon_register_*`` hook receives: ``register(name, factory)`` (for a tool, the Tool itself too).
Register = Callable[[str, "Callable[..., Any] | Tool"], None]


_REDACTED: Final = "**********"


class Lazy:
    """A factory named by ``"module:attribute"``, imported when it is first called or its signature is read.

    A plugin registers what it provides without importing it (``register("multipass",
    Lazy("aeon_plugins.multipass.passes:MultiPassScheduler"))``), so an engine that never builds a component
    never loads its code. The path is the plugin's own, written in its code: configuration never names one
    (DESIGN rule 6).
    """

    __slots__ = ("_loaded", "target")

    def __init__(self, target: str) -> None:
        module, _, attribute = target.partition(":")
        if not module or not attribute:
            raise ValueError(f'a lazy factory is named as "module:attribute", got {target!r}')
        self.target = target
        self._loaded: Callable[..., Any] | None = None

    def load(self) -> Callable[..., Any]:
        """The factory itself (imported once)."""
        if self._loaded is None:
            module, _, attribute = self.target.partition(":")
            loaded: Any = importlib.import_module(module)
            for name in attribute.split("."):  # "Class.method" too
                loaded = getattr(loaded, name)
            self._loaded = loaded
        return self._loaded

    @property
    def __signature__(self) -> inspect.Signature:
        return inspect.signature(self.load())

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.load()(*args, **kwargs)

    def __repr__(self) -> str:
        return f"Lazy({self.target!r})"


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
        if self.kind == "tools" and not callable(factory):  # a tool itself (``@aeon_kernel.tool``)
            from aeon_kernel.tools import Tool

            factory = factory.as_factory() if isinstance(factory, Tool) else factory
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
        :class:`ConfigError` naming them, raised here. When the factory is called, an exception it raises (other
        than an :class:`AeonError`, which says what is wrong already, and ``KeyboardInterrupt``, which is the
        user's) or a result that is not the kind's contract is a :class:`ComponentBuildError`.
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
        return _Builder(self.kind, registration, options)

    def parameters(self, name: str) -> frozenset[str] | None:
        """The parameter names of the factory registered as ``name`` (None when it has no signature to read)."""
        signature = self._signature(self.get(name))
        return frozenset(signature.parameters) if signature is not None else None

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


class _Builder(Generic[T]):
    """A factory with its options bound, which checks what it builds (see :meth:`ComponentRegistry.bound`)."""

    __slots__ = ("_contract", "kind", "options", "registration")

    def __init__(self, kind: str, registration: Registration, options: dict[str, Any]) -> None:
        self.kind, self.registration, self.options = kind, registration, options
        self._contract: type | None = None

    def __call__(self) -> T:
        registration = self.registration
        try:
            component = registration.factory(**self.options)
        except AeonError:
            raise  # raised on purpose: its message already says what to do
        except (Exception, SystemExit) as exc:  # SystemExit too: a plugin's sys.exit() must not end Aeon
            raise self._error(f"{type(exc).__name__}: {exc}") from exc
        contract = self._contract or self._load_contract()
        if self.kind == "tools" and isinstance(component, (list, tuple)) and contract is not None:
            strays = [member for member in component if not isinstance(member, contract)]
            if strays:  # a toolset: every member a Tool
                raise self._error(f"its factory returned a list holding {_kind_of(strays[0])}, not a Tool")
            return component  # type: ignore[return-value]
        if contract is not None and not isinstance(component, contract):
            raise self._error(
                f"its factory returned {_kind_of(component)}, which is not an instance of "
                f"aeon_kernel.{contract.__name__}"
            )
        if contract is None and self.kind in ("nodes", "retrieval_policies") and not callable(component):
            raise self._error(f"its factory returned {_kind_of(component)}, which is not callable")
        result: T = component
        return result

    def _load_contract(self) -> type | None:
        kind = BY_NAME.get(self.kind)
        path = kind.contract if kind is not None else None
        if path is None:
            return None
        module, _, name = path.partition(":")
        contract: type = getattr(importlib.import_module(module), name)
        self._contract = contract
        return contract

    def _error(self, problem: str) -> ComponentBuildError:
        return ComponentBuildError(
            self.kind, self.registration.name, self.registration.provider, _scrub(problem, self.options)
        )


def _kind_of(value: object) -> str:
    return "None" if value is None else f"a {type(value).__module__}.{type(value).__qualname__}"


def _scrub(text: str, options: dict[str, Any]) -> str:
    """``text`` without the value of any secret option, in any of the forms an exception message may quote it."""
    for secret in _secrets(options):
        if not secret:
            continue
        forms = {secret, repr(secret)[1:-1], json.dumps(secret)[1:-1], secret.strip()}
        for form in sorted((f for f in forms if f), key=len, reverse=True):
            text = text.replace(form, _REDACTED)
    return text


def _secrets(value: Any) -> list[str]:
    from pydantic import SecretStr

    if isinstance(value, SecretStr):
        return [value.get_secret_value()]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _secrets(v)]
    if isinstance(value, (list, tuple)):
        return [s for v in value for s in _secrets(v)]
    return []
