"""Plugin discovery: one PluginManager per engine, built here, never global (DESIGN rule 3).

Entry points in the ``aeon`` group are walked by hand so that allow/block lists apply *before* ``ep.load()``
(blocked code is never imported) and a plugin that fails to import or register becomes a recorded error while
the host keeps working. Built-in plugins arrive through the same entry points as third-party ones.

"Fails" means any exception the plugin's code raises while it is imported, registered or runs its
``aeon_register_*`` hooks — ``SystemExit`` (a plugin calling ``sys.exit``) and a ``KeyboardInterrupt`` it raises
itself included — except a Ctrl-C the user pressed meanwhile, which still stops Aeon (:class:`_PluginCode`).
"""

from __future__ import annotations

import difflib
import importlib
import os
import signal
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from types import FrameType, TracebackType
from typing import TYPE_CHECKING, Any, Final

import pluggy

from aeon_kernel import hookspecs
from aeon_kernel.errors import DuplicateComponentError
from aeon_kernel.kinds import KINDS
from aeon_kernel.markers import PROJECT, hookimpl
from aeon_kernel.registry import ComponentRegistry, Lazy, Register

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

ENTRY_POINT_GROUP = PROJECT
#: Set to any non-empty value to skip entry-point discovery (like PYTEST_DISABLE_PLUGIN_AUTOLOAD).
DISABLE_AUTOLOAD_ENV = "AEON_DISABLE_PLUGIN_AUTOLOAD"
#: Comma-separated plugin (entry point) or distribution names, applied on top of aeon.toml's lists.
ALLOW_ENV = "AEON_PLUGINS_ALLOW"
BLOCK_ENV = "AEON_PLUGINS_BLOCK"
#: Plugin names the kernel registers itself; no plugin may take them.
ESSENTIAL_PREFIX = "aeon."
#: The default implementations every engine has, registered by module path before any entry point (simonw/llm's
#: DEFAULT_PLUGINS), so that ``AeonConfig()`` plans and runs with plugin autoloading off. Registering one imports
#: only its package's ``__init__``; each component's code is imported when it is first built (decision 0015).
DEFAULT_PLUGINS: Final = (
    ("aeon.planning", "aeon_plugins.planning"),
    ("aeon.multipass", "aeon_plugins.multipass"),
    ("aeon.flow", "aeon_plugins.flow"),
)


@dataclass
class PluginLoadFailure:
    plugin: str
    distribution: str | None
    stage: str  # "import", "register" or a hook name
    error: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "plugin": self.plugin,
            "distribution": self.distribution,
            "stage": self.stage,
            "error": self.error,
        }


@dataclass
class PluginSource:
    distribution: str | None = None
    version: str | None = None


class AeonPluginManager(pluggy.PluginManager):
    """A pluggy manager that also remembers where each plugin came from and what failed to load."""

    def __init__(self) -> None:
        super().__init__(ENTRY_POINT_GROUP)
        self.add_hookspecs(hookspecs)
        self.failures: list[PluginLoadFailure] = []
        self.sources: dict[str, PluginSource] = {}
        self.skipped: list[str] = []
        self._callers: dict[str, Callable[..., Any]] = {}
        self._each: dict[str, tuple[tuple[str, Callable[..., Any]], ...]] = {}
        self._monitored = False
        #: bumped whenever a plugin is registered or unregistered, so derived data can be cached safely
        self.generation = 0

    def register(self, plugin: Any, name: str | None = None) -> str | None:
        self._forget()
        return super().register(plugin, name)

    def unregister(self, plugin: Any = None, name: str | None = None) -> Any:
        self._forget()
        return super().unregister(plugin, name)

    def add_hookcall_monitoring(self, before: Any, after: Any) -> Callable[[], None]:
        self._monitored = True  # tracing sees every call: no shortcuts from now on
        self._forget()
        return super().add_hookcall_monitoring(before, after)

    def _forget(self) -> None:
        self._callers.clear()
        self._each.clear()
        self.generation += 1

    def caller(self, hook_name: str) -> Callable[..., Any]:
        """What ``pm.hook.<hook_name>`` does, at the cost of what is registered (the loop calls hooks per cycle).

        With no implementation, a no-op; with one plain implementation, that function itself (given the
        arguments it declares, as pluggy would); otherwise pluggy's hook caller. Cached until a plugin is
        registered or unregistered.
        """
        cached = self._callers.get(hook_name)
        if cached is None:
            cached = self._callers[hook_name] = self._shortest_caller(getattr(self.hook, hook_name))
        return cached

    def listens(self, hook_name: str) -> bool:
        """Whether any plugin implements ``hook_name`` (so the loop can skip building an event nobody reads)."""
        return self.caller(hook_name) not in (_no_result, _no_results)

    def each(self, hook_name: str) -> tuple[tuple[str, Callable[..., Any]], ...]:
        """An event hook's implementations as ``(plugin name, call)``, in pluggy's order, to call one by one.

        pluggy stops a call at the first implementation that raises, so the ones after it would miss the event;
        calling them separately lets every sink get every event however another one fails. Under tracing, or
        with a wrapper, the hook is one entry (pluggy's caller), so what a plugin author observes is unchanged.
        """
        cached = self._each.get(hook_name)
        if cached is None:
            hook: pluggy.HookCaller = getattr(self.hook, hook_name)
            impls = hook.get_hookimpls()
            if self._monitored or any(i.hookwrapper or i.wrapper for i in impls):
                cached = ((hook_name, hook),)
            else:
                cached = tuple((impl.plugin_name, _bound(impl, False)) for impl in reversed(impls))
            self._each[hook_name] = cached
        return cached

    def _shortest_caller(self, hook: pluggy.HookCaller) -> Callable[..., Any]:
        impls = hook.get_hookimpls()
        firstresult = bool(hook.spec and hook.spec.opts.get("firstresult"))
        if self._monitored or len(impls) > 1 or any(i.hookwrapper or i.wrapper for i in impls):
            return hook
        if not impls:
            return _no_result if firstresult else _no_results
        if firstresult and hook.spec is not None and impls[0].argnames == hook.spec.argnames:
            # It takes every argument, by the same names: the caller's keywords fit as they are.
            return impls[0].function
        return _bound(impls[0], firstresult)


def _bound(impl: pluggy.HookImpl, firstresult: bool) -> Callable[..., Any]:
    """One implementation, called as pluggy would: given the arguments it declares, its result as pluggy returns it."""
    function, names = impl.function, impl.argnames

    def call(**kwargs: Any) -> Any:
        result = function(*[kwargs[name] for name in names])
        return result if firstresult else ([] if result is None else [result])

    return call


def _no_result(**kwargs: Any) -> None:
    return None


def _no_results(**kwargs: Any) -> list[Any]:
    return []


class _PluginCode:
    """While plugin code runs (import, registration, ``aeon_register_*`` hooks): tells a Ctrl-C the user pressed
    from a ``KeyboardInterrupt`` the plugin raised itself.

    ``SystemExit`` and every other exception from plugin code is the plugin's failure, recorded under "errors"
    (the docs promise that a failing plugin never stops Aeon). A ``KeyboardInterrupt`` is too, unless SIGINT
    arrived meanwhile: the user's Ctrl-C propagates, and one that a plugin swallowed is raised again on leaving
    (when Python's own handler was in place; an embedder's handler has done its job already).
    Python delivers signals to the main thread only, so elsewhere (or when SIGINT is ignored or not Python's to
    handle) no ``KeyboardInterrupt`` can be the user's. ``os._exit`` and a crash of the interpreter cannot be caught.
    """

    def __init__(self) -> None:
        self.pressed = False
        self._previous: Any = None
        self._handler: Callable[[int, FrameType | None], Any] | None = None

    def __enter__(self) -> _PluginCode:
        if threading.current_thread() is not threading.main_thread():
            return self
        previous = signal.getsignal(signal.SIGINT)
        if not callable(previous):  # SIG_IGN or SIG_DFL: Ctrl-C raises nothing in Python
            return self

        def handler(signum: int, frame: FrameType | None) -> Any:
            self.pressed = True
            return previous(signum, frame)

        try:
            signal.signal(signal.SIGINT, handler)
        except ValueError:  # not the main interpreter
            return self
        self._previous, self._handler = previous, handler
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._handler is not None and signal.getsignal(signal.SIGINT) is self._handler:
            signal.signal(signal.SIGINT, self._previous)  # unless plugin code installed its own meanwhile
        if self.pressed and exc is None and self._previous is signal.default_int_handler:
            raise KeyboardInterrupt  # the user's Ctrl-C, which plugin code swallowed

    def failed(self, exc: BaseException) -> bool:
        """Whether ``exc``, raised by plugin code, is the plugin's failure to record (else: re-raise it)."""
        return not (isinstance(exc, KeyboardInterrupt) and self.pressed)


def _names_from_env(var: str) -> set[str]:
    return {part.strip() for part in os.environ.get(var, "").split(",") if part.strip()}


def _permitted(ep: EntryPoint, allow: set[str] | None, block: set[str]) -> bool:
    names = {ep.name}
    if ep.dist is not None:
        names.add(ep.dist.name)
    if names & block:
        return False
    return allow is None or bool(names & allow)


def build_plugin_manager(
    plugins: Iterable[Any] = (),
    *,
    autoload: bool | None = None,
    allow: Sequence[str] | None = None,
    block: Sequence[str] = (),
) -> AeonPluginManager:
    """Build a fresh plugin manager.

    :param plugins: plugin objects (modules, instances) to register directly, as tests and embedders do.
    :param autoload: walk the ``aeon`` entry points; defaults to True unless ``AEON_DISABLE_PLUGIN_AUTOLOAD`` is set.
    :param allow: when given, only entry points (or distributions) with these names are loaded.
    :param block: entry points (or distributions) that are never imported.
    """
    # The kernel's own implementation, imported here rather than at import time (DESIGN rule 5).
    from aeon_kernel.invocation import KernelToolInvoker

    pm = AeonPluginManager()
    pm.register(KernelToolInvoker(), name="aeon.tools")
    pm.register(_KernelComponents(), name="aeon.kernel")
    if autoload is None:
        autoload = not os.environ.get(DISABLE_AUTOLOAD_ENV)
    with _PluginCode() as guard:
        for name, module in DEFAULT_PLUGINS:
            _register_default(pm, name, module, guard)
        if autoload:
            allowed = None
            if allow is not None or os.environ.get(ALLOW_ENV):
                allowed = set(allow or ()) | _names_from_env(ALLOW_ENV)
            _load_entry_points(pm, allowed, set(block) | _names_from_env(BLOCK_ENV), guard)
        for plugin in plugins:
            name = getattr(plugin, "__name__", None) or f"{type(plugin).__name__}-{id(plugin):x}"
            _register(pm, plugin, name, PluginSource(), guard)
    return pm


class _KernelComponents:
    """What the kernel itself provides as components: the ``local`` executor (threads in this process)."""

    @hookimpl
    def aeon_register_executors(self, register: Register) -> None:
        register("local", Lazy("aeon_kernel.runtime.executor:LocalExecutor"))


def _register_default(pm: AeonPluginManager, name: str, module: str, guard: _PluginCode) -> None:
    """One of :data:`DEFAULT_PLUGINS`; one that cannot be imported (a broken install) is a recorded failure."""
    try:
        pm.register(importlib.import_module(module), name=name)
    except BaseException as exc:
        if not guard.failed(exc):
            raise
        pm.failures.append(PluginLoadFailure(name, None, "import", _describe(exc)))


def _load_entry_points(
    pm: AeonPluginManager, allow: set[str] | None, block: set[str], guard: _PluginCode
) -> None:
    from importlib.metadata import entry_points

    seen: set[str] = set()
    for ep in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
        source = PluginSource(ep.dist.name, ep.dist.version) if ep.dist is not None else PluginSource()
        if ep.name in seen:  # the same distribution visible twice on sys.path
            continue
        seen.add(ep.name)
        if not _permitted(ep, allow, block):
            pm.skipped.append(ep.name)
            continue
        try:
            plugin = ep.load()
        except BaseException as exc:  # a broken plugin must not take the host down (simonw/llm#1280)
            if not guard.failed(exc):
                raise
            pm.failures.append(PluginLoadFailure(ep.name, source.distribution, "import", _describe(exc)))
            continue
        _register(pm, plugin, ep.name, source, guard)


def _register(
    pm: AeonPluginManager, plugin: Any, name: str, source: PluginSource, guard: _PluginCode
) -> None:
    if name.startswith(ESSENTIAL_PREFIX):
        pm.failures.append(
            PluginLoadFailure(
                name, source.distribution, "register", f"the name prefix {ESSENTIAL_PREFIX!r} is reserved"
            )
        )
        return
    if pm.is_registered(plugin) or pm.has_plugin(name):
        return
    try:  # reading a plugin object's attributes runs its code (a property, __getattr__)
        problem = _hookspec_mismatch(getattr(plugin, "AEON_HOOKSPEC_VERSION", None))
        if not problem:
            pm.register(plugin, name=name)  # pluggy rejects bad signatures
    except BaseException as exc:
        if not guard.failed(exc):
            raise
        problem = _describe(exc)
        if pm.get_plugin(name) is plugin:  # pluggy failed half-way: take back what it registered
            pm.unregister(name=name)
    if problem:
        pm.failures.append(PluginLoadFailure(name, source.distribution, "register", problem))
        return
    unknown = [caller.name for caller in pm.get_hookcallers(plugin) or () if not caller.has_spec()]
    if unknown:  # most likely a typo; pluggy would only notice at check_pending()
        pm.unregister(plugin)
        known = [n for n in dir(hookspecs) if n.startswith("aeon_")]
        hints = [f"{u} (did you mean {difflib.get_close_matches(u, known, n=1)}?)" for u in unknown]
        pm.failures.append(
            PluginLoadFailure(name, source.distribution, "register", f"unknown hooks: {hints}")
        )
        return
    pm.sources[name] = source


def _hookspec_mismatch(declared: object) -> str | None:
    """A plugin may declare ``AEON_HOOKSPEC_VERSION``; a different major version cannot work with this kernel."""
    if declared is None:
        return None
    ours = hookspecs.HOOKSPEC_VERSION
    if not isinstance(declared, str) or declared.split(".")[0] != ours.split(".")[0]:
        return (
            f"targets hookspec version {declared!r} but this aeon-core provides {ours!r}; upgrade one of them"
        )
    return None


def _describe(exc: BaseException) -> str:
    if isinstance(exc, SystemExit):
        return f"SystemExit({exc.code!r}): the plugin called sys.exit(); a plugin must raise an exception instead"
    return f"{type(exc).__name__}: {exc}"


class Registries:
    """The component registries of one engine, filled by calling each plugin's ``aeon_register_*`` hooks."""

    def __init__(self, pm: AeonPluginManager) -> None:
        self.by_kind: dict[str, ComponentRegistry[Any]] = {
            kind.name: ComponentRegistry(kind.name) for kind in KINDS
        }
        self.conflicts: list[DuplicateComponentError] = []
        with _PluginCode() as guard:
            for kind in KINDS:
                self._collect(pm, kind.name, kind.hook, guard)

    def __getitem__(self, kind: str) -> ComponentRegistry[Any]:
        return self.by_kind[kind]

    def _collect(self, pm: AeonPluginManager, kind: str, hook_name: str, guard: _PluginCode) -> None:
        """Call each implementation separately so every registration is tagged with its plugin."""
        registry = self.by_kind[kind]
        for impl in getattr(pm.hook, hook_name).get_hookimpls():
            provider = pm.get_name(impl.plugin) or repr(impl.plugin)

            def register(name: str, factory: Any, _provider: str = provider) -> None:
                try:
                    registry.add(name, factory, _provider)
                except DuplicateComponentError as exc:
                    self.conflicts.append(exc)
                    registry.mark_conflict(name, exc)

            try:
                impl.function(*[{"register": register}[arg] for arg in impl.argnames])
            except BaseException as exc:
                if not guard.failed(exc):
                    raise
                source = pm.sources.get(provider, PluginSource())
                pm.failures.append(
                    PluginLoadFailure(provider, source.distribution, hook_name, _describe(exc))
                )

    def provided_by(self, plugin_name: str) -> dict[str, list[str]]:
        """What a plugin provides, by kind: ``{"tools": ["echo"], ...}`` (kinds with nothing are left out)."""
        provided: dict[str, list[str]] = {}
        for kind, registry in self.by_kind.items():
            names = [n for n, p in registry.providers().items() if p == plugin_name]
            if names:
                provided[kind] = sorted(names)
        return provided


def loaded_plugins(pm: AeonPluginManager) -> list[dict[str, Any]]:
    """Every plugin a run depends on, for its manifest: name, distribution, version, targeted hookspec."""
    found = []
    for name, plugin in sorted(pm.list_name_plugin(), key=lambda item: item[0] or ""):
        if not name or name.startswith((ESSENTIAL_PREFIX, "sink:")):
            continue
        source = pm.sources.get(name, PluginSource())
        found.append(
            {
                "name": name,
                "distribution": source.distribution,
                "version": source.version,
                "hookspec_version": getattr(plugin, "AEON_HOOKSPEC_VERSION", None),
            }
        )
    return found


def describe_plugins(pm: AeonPluginManager, registries: Registries) -> dict[str, Any]:
    """What ``aeon plugins`` prints: every loaded plugin, and every failure."""
    plugins = []
    for info in loaded_plugins(pm):
        callers = pm.get_hookcallers(pm.get_plugin(info["name"])) or ()
        hooks = sorted(caller.name for caller in callers)
        plugins.append({**info, "hooks": hooks, "components": registries.provided_by(info["name"])})
    errors = [f.to_dict() for f in pm.failures]
    errors += [{"plugin": c.second, "stage": "register", "error": str(c)} for c in registries.conflicts]
    return {"plugins": plugins, "errors": errors, "skipped": sorted(pm.skipped)}
