"""The components ``aeon.toml`` selects, built from the kinds table (:mod:`aeon_kernel.kinds`), each once.

A kind's row says how it is chosen, what its factory must return, and which other components its factory gets:
``needs`` always, ``offered`` when the factory's signature names them (a deterministic convergence engine is not
handed the model). So building any kind is the same few lines, and a new kind is one row in ``kinds.py`` plus its
hook. Tools are the exception the issue-17 rules make: one is built only once ``[tools.<name>] grant`` grants it
some of the permissions it declares.

Nothing is built before it is asked for, so ``aeon plugins`` or ``aeon tools`` never loads a model; every factory
is called through its registry, which turns a failure or a result of the wrong type into a ``ConfigError`` naming
it (:class:`~aeon_kernel.registry.ComponentRegistry`).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from aeon_kernel.config import AeonConfig, Choice, resolve_secrets
from aeon_kernel.errors import AeonError, ConfigError, ToolRegistrationError, UnknownComponentError
from aeon_kernel.kinds import BY_NAME, KINDS

if TYPE_CHECKING:
    from aeon_kernel.contracts import SecretProvider, TelemetrySink
    from aeon_kernel.llm.client import ModelClient
    from aeon_kernel.plugins import AeonPluginManager, Registries
    from aeon_kernel.policy import Policy
    from aeon_kernel.tools import Tool, ToolRegistry

#: a component ``check_components`` builds: ``(kind, name, build)``
Selected = tuple[str, str, Callable[[], object]]


class ComponentSet:
    """The components of one engine: built on first use from its configuration and registries, closed with it."""

    def __init__(
        self,
        config: AeonConfig,
        registries: Registries,
        pm: AeonPluginManager,
        *,
        record: str | Path | None = None,
        replay: str | Path | None = None,
    ) -> None:
        self.config, self.registries, self.pm = config, registries, pm
        self.record, self.replay = record, replay
        self._llm: ModelClient | None = None
        #: one component per ``one``/``optional`` kind, by kind name
        self._built: dict[str, Any] = {}
        self._factories: dict[str, Callable[[], Any]] = {}
        self._tools: ToolRegistry | None = None
        #: the tools built so far, by registered name: built once, whether for a run or for a check
        self._built_tools: dict[str, list[Tool]] = {}
        self._secret_providers: dict[str, SecretProvider] = {}
        self._policies: list[tuple[str, Policy]] | None = None
        self.sinks: list[TelemetrySink] = []
        self._sinks_attached = False

    # --- any kind, from the table --------------------------------------------------------------------------------

    def choice(self, kind: str) -> Choice | None:
        """What ``aeon.toml`` chooses for a ``one`` or ``optional`` kind (None: an optional kind left off)."""
        spec = BY_NAME[kind]
        return (
            self.config.optional(spec.section)
            if spec.selection == "optional"
            else self.config.choice(spec.section)
        )

    def factory(self, kind: str) -> Callable[[], Any]:
        """How to build the component chosen for ``kind``: its options, what it needs and what it is offered, bound
        once (a scheduler is built again for every run)."""
        if kind not in self._factories:
            choice = self.choice(kind)
            if choice is None:
                raise ConfigError(f"[{BY_NAME[kind].section}] is not set in aeon.toml")
            registry = self.registries[kind]
            spec = BY_NAME[kind]
            takes = registry.parameters(choice.use)
            offered = {dep: self.dependency(dep) for dep in spec.offered if takes and dep in takes}
            needs = {dep: self.dependency(dep) for dep in spec.needs}
            options = choice.resolved_options(self.secret_provider)
            self._factories[kind] = registry.bound(choice.use, offered, **needs, **options)
        return self._factories[kind]

    def one(self, kind: str) -> Any:
        """The component ``aeon.toml`` chooses for ``kind``, built once (None for an optional kind left off)."""
        if kind not in self._built:
            if kind == "llm_adapters":
                return self.llm
            self._built[kind] = None if self.choice(kind) is None else self.factory(kind)()
            self._attach(kind, self._built[kind])
        return self._built[kind]

    def dependency(self, name: str) -> Any:
        """What a factory may be handed by name: the run's model (retrying), a built component, a setting, or a
        builder of a component only some schedulers use (``depth_heuristic``, ``semantic_validator``)."""
        settings = {"max_tokens": self.config.max_tokens, "temperature": self.config.temperature}
        if name in settings:
            return settings[name]
        if name in _BUILDERS:
            return partial(self.one, _BUILDERS[name])
        if name == "llm":
            return self.llm
        if name == "tools":
            return self.tools
        return self.one({"validator": "validators", "supervisor": "supervisors"}[name])

    def _attach(self, kind: str, component: Any) -> None:
        """A built artifact store keeps every cycle's outputs from then on (spec 004 §10.1)."""
        if kind == "artifact_stores" and component is not None:
            from aeon_kernel.runtime.artifacts import ArtifactCollector

            self.pm.register(ArtifactCollector(component), name="aeon.artifacts")

    # --- the model -------------------------------------------------------------------------------------------------

    @property
    def llm(self) -> ModelClient:
        """The chosen model, wrapped in the kernel's retrying client (a cassette's replay stands in for it)."""
        if self._llm is None:
            from aeon_kernel.llm.cassette import RecordingAdapter, ReplayAdapter
            from aeon_kernel.llm.client import ModelClient

            if self.replay is not None:
                adapter: Any = ReplayAdapter(self.replay)
            else:
                adapter = self.factory("llm_adapters")()
                if self.record is not None:
                    adapter = RecordingAdapter(adapter, self.record)
            self._llm = ModelClient(adapter)
        return self._llm

    def without_model(self, reason: str) -> None:
        """No run asks a model (a flow without agent nodes): none is loaded, and a call fails saying ``reason``."""
        from aeon_kernel.llm.client import ModelClient, NoModel

        if self._llm is None:
            self._llm = ModelClient(NoModel(reason))

    # --- tools, with their grants (issue 17) -------------------------------------------------------------------

    @property
    def tools(self) -> ToolRegistry:
        """Every registered tool, or only those ``[tools] enabled`` lists; a tool that declares permissions only
        when ``[tools.<name>] grant`` grants some (the default is deny)."""
        if self._tools is None:
            from aeon_kernel.tools import ToolRegistry

            names = self.tool_names()
            for name in sorted(set(self.config.tool_options) - set(names)):
                self.unused_tool_options(name)
            tools = ToolRegistry()
            for name in names:
                for tool in self.tool(name):
                    tools.register(tool)
            self._tools = tools
        return self._tools

    def tool_names(self) -> list[str]:
        enabled = self.config.tools_enabled
        return list(enabled) if enabled is not None else self.registries["tools"].names()

    def tool_overview(self) -> list[dict[str, Any]]:
        """Every registered tool: whether runs get it (and why not), the permissions it declares and those granted,
        and the tools it stands for (a toolset's members) — ``aeon tools --all``."""
        self.tools  # noqa: B018 - builds what runs get, so _built_tools holds it
        enabled = self.tool_names()
        overview = []
        for name in self.registries["tools"].names():
            members = self._built_tools.get(name, [])
            declared = _declared_permissions(self.registries["tools"].get(name).factory)
            if declared is None:
                declared = members[0].permissions if members else {}
            entry: dict[str, Any] = {
                "name": name,
                "on": bool(members),
                "permissions": declared,
                "granted": sorted(members[0].granted) if members else [],
                "tools": [tool.name for tool in members],
            }
            if name not in enabled:
                entry["why_off"] = "not in [tools] enabled"
            elif not members and declared:
                entry["why_off"] = f"nothing granted: add grant = [...] to [tools.{name}]"
            overview.append(entry)
        return overview

    def unused_tool_options(self, name: str) -> None:
        """A ``[tools.<name>]`` table for a tool that is not built (misspelt, or not enabled) is a ConfigError: its
        options would otherwise be ignored without a word."""
        registry = self.registries["tools"]
        why = (
            "is not in [tools] enabled"
            if name in registry
            else f"no loaded plugin registers (registered: {', '.join(registry.names()) or 'none'})"
        )
        raise ConfigError(f"[tools.{name}] sets options for the tool {name!r}, which {why}")

    def tool(self, name: str) -> list[Tool]:
        """The tools registered as ``name`` — one, or a toolset's members (``name.*``, an MCP server's tools) —
        built with the ``[tools.<name>]`` options and ``grant``, once (an MCP server is started once). A tool that
        declares permissions is not built at all (``[]``) while nothing grants it any; asked for without a grant,
        it is a ConfigError."""
        if name not in self._built_tools:
            self._built_tools[name] = self._build_tool(name)
        return self._built_tools[name]

    def _build_tool(self, name: str) -> list[Tool]:
        registry = self.registries["tools"]
        options = dict(self.config.tool_options.get(name, {}))
        grant = _grant(name, options.pop("grant", None))
        ask = _grant(name, options.pop("ask", None), "ask")
        declared = _declared_permissions(registry.get(name).factory)
        if declared and not grant:
            return self._ungranted(name, declared)
        if grant:
            options["granted"] = grant
        built = registry.create(name, **resolve_secrets(options, name, self.secret_provider))
        tools: list[Tool] = list(built) if isinstance(built, (list, tuple)) else [built]
        provider = registry.get(name).provider
        for tool in tools:
            if tool.name != name and not (
                isinstance(built, (list, tuple)) and tool.name.startswith(f"{name}.")
            ):
                raise ToolRegistrationError(
                    f"the factory registered as tool {name!r} by {provider} returned {tool.name!r}; it must return "
                    f"a Tool named {name!r} (or a list of tools named {name}.*)"
                )
            if tool.granted != (grant or frozenset()):
                raise ToolRegistrationError(
                    f"the factory registered as tool {name!r} by {provider} did not keep the permissions granted "
                    f"to it ({sorted(grant or ())}); it must pass granted= on to the Tool"
                )
            if tool.permissions and not tool.granted:
                return self._ungranted(name, tool.permissions)
        if ask is not None:  # every use of these permissions waits for a person's approval
            for tool in tools:
                if unknown := sorted(ask - set(tool.permissions)):
                    raise ConfigError(
                        f"[tools.{name}] ask names {', '.join(map(repr, unknown))}, which {tool.name} does not "
                        f"declare (it has: {', '.join(sorted(tool.permissions)) or 'none'})"
                    )
            tools = [tool.model_copy(update={"ask": ask}) for tool in tools]
        return tools

    def _ungranted(self, name: str, permissions: dict[str, str]) -> list[Tool]:
        """A tool that needs a grant and has none: left off, or a ConfigError when aeon.toml asks for it."""
        if name not in (self.config.tools_enabled or ()) and name not in self.config.tool_options:
            return []  # off by default: nothing was granted
        listing = "; ".join(f"{p!r}: {what}" for p, what in sorted(permissions.items()))
        raise ConfigError(
            f"the tool {name!r} can do nothing until it is granted some of its permissions ({listing}): "
            f"add grant = [...] to [tools.{name}] in aeon.toml"
        )

    # --- secrets, policies, sinks --------------------------------------------------------------------------------

    def secret_provider(self, name: str) -> SecretProvider | None:
        """The secret provider a plugin registered as ``name`` (built once), or None when none did."""
        if name not in self._secret_providers:
            registry = self.registries["secret_providers"]
            if name not in registry:
                return None
            self._secret_providers[name] = registry.create(name)
        return self._secret_providers[name]

    @property
    def policies(self) -> list[tuple[str, Policy]]:
        """The policies ``[policy] use`` names, as ``(name, policy)``, built once; from then on every tool call is
        judged by them first (:class:`~aeon_kernel.policy.PolicyGate`)."""
        if self._policies is None:
            from aeon_kernel.policy import PolicyGate

            registry = self.registries["policies"]
            self._policies = [
                (choice.use, registry.create(choice.use, **choice.resolved_options(self.secret_provider)))
                for choice in self.config.policies
            ]
            if self._policies:
                self.pm.register(PolicyGate(self._policies), name="aeon.policy")
        return self._policies

    def add_sink(self, name: str, **options: Any) -> TelemetrySink:
        """Build a registered telemetry sink and register it on the plugin manager, so it gets every event."""
        sink: TelemetrySink = self.registries["telemetry_sinks"].create(name, **options)
        self.pm.register(sink, name=f"sink:{name}:{len(self.sinks)}")
        self.sinks.append(sink)
        return sink

    def configured_sinks(self) -> list[Callable[[], object]]:
        """How to attach each sink ``[telemetry]`` names; empty once they are attached (it happens once)."""
        if self._sinks_attached:
            return []
        self._sinks_attached = True
        return [
            partial(lambda c: self.add_sink(c.use, **c.resolved_options(self.secret_provider)), choice)
            for choice in self.config.telemetry
        ]

    # --- every selected component ----------------------------------------------------------------------------

    def selected(self) -> list[Selected]:
        """``(kind, name, build)`` for every component ``aeon.toml`` selects, in an order that builds what each
        depends on first; the configured sinks are attached by their ``build``. An executor is only checked
        against its options here: it is made for each use, from the engine it runs tasks on."""
        config = self.config
        scheduler = config.choice("scheduler").use
        wanted: list[Selected] = [
            ("llm_adapters", config.choice("llm").use, lambda: self.llm),
            ("validators", config.choice("validator").use, partial(self.one, "validators")),
            ("memory_backends", config.choice("memory").use, partial(self.one, "memory_backends")),
        ]
        names = self.tool_names()
        wanted += [("tools", name, partial(self.tool, name)) for name in names]
        unused = sorted(set(config.tool_options) - set(names))
        wanted += [("tools", name, partial(self.unused_tool_options, name)) for name in unused]
        for kind in KINDS:  # the supervisor, the planner, the convergence engine, what the scheduler asks for
            if kind.selection != "one" or kind.name in _BUILT_ABOVE:
                continue
            if kind.used_by in (None, scheduler) or kind.section in config.explicit:
                build = self._checked_executor if kind.name == "executors" else partial(self.one, kind.name)
                wanted.append((kind.name, config.choice(kind.section).use, build))
        wanted.append(("schedulers", scheduler, self._scheduler))
        for store in ("state_stores", "artifact_stores"):
            if (chosen := self.choice(store)) is not None:
                wanted.append((store, chosen.use, partial(self.one, store)))
        wanted += [("policies", choice.use, lambda: self.policies) for choice in config.policies]
        wanted += [
            ("telemetry_sinks", choice.use, attach)
            for choice, attach in zip(config.telemetry, self.configured_sinks(), strict=False)
        ]
        return wanted

    def _scheduler(self) -> object:
        return self.factory("schedulers")()

    def _checked_executor(self) -> object:
        """The executor's options checked against its factory (nothing started)."""
        choice = self.config.choice("executor")
        options = choice.resolved_options(self.secret_provider)
        return self.registries["executors"].bound(choice.use, source=None, **options)  # source: each use's

    def problems(self) -> list[dict[str, Any]]:
        """Build every component ``aeon.toml`` selects, as ``aeon run`` would — the model included, however long
        loading it takes — and describe each one that cannot be built (``aeon plugins --check``): the keys of a
        plugin load error (``plugin``, ``distribution``, ``stage`` = ``"build"``, ``error``) and the component's
        ``kind`` and ``name``, each problem once (not again for what depends on it)."""
        problems: list[dict[str, Any]] = []
        seen: set[str] = set()
        for kind_name, name, build in self.selected():
            try:
                build()
            except AeonError as exc:
                if str(exc) in seen:
                    continue  # a dependency's failure, reported once
                seen.add(str(exc))
                provider = self.registries[kind_name].providers().get(name)
                source = self.pm.sources.get(provider) if provider else None
                problems.append(
                    {
                        "plugin": provider,
                        "distribution": source.distribution if source else None,
                        "stage": "build",
                        "kind": kind_name,
                        "name": name,
                        "error": str(exc),
                    }
                )
        return problems

    def check_choices(self) -> None:
        """Fail early, listing what is available, when aeon.toml names a component no plugin registered."""
        config = self.config
        scheduler = config.choice("scheduler").use
        for kind in KINDS:
            registry = self.registries[kind.name]
            if kind.used_by not in (None, scheduler) and kind.section not in config.explicit:
                continue  # a kind only another scheduler uses
            if kind.selection == "one" and (kind.section != "llm" or self.replay is None):
                registry.get(config.choice(kind.section).use)
            elif kind.selection == "many":
                for choice in config.chosen(kind.section):
                    registry.get(choice.use)
            elif kind.selection == "optional" and (chosen := config.optional(kind.section)) is not None:
                registry.get(chosen.use)
            elif kind.selection == "subset":
                for name in config.tools_enabled or ():
                    if name not in registry:
                        raise UnknownComponentError(kind.name, name, registry.providers())

    def close(self) -> None:
        """Close what was built: sinks, tools holding a connection or a process, memory, stores, the model."""
        for sink in self.sinks:
            sink.close()
        for tool in (tool for built in self._built_tools.values() for tool in built):
            close = getattr(tool, "close", None)
            if callable(close):  # a tool holding a connection or a process (an MCP server's session)
                close()
        for kind in ("memory_backends", "state_stores", "artifact_stores"):
            if self._built.get(kind) is not None:
                self._built[kind].close()
        if self._llm is not None:
            self._llm.close()


#: what a scheduler may be handed as a builder (it builds the component when a run first needs it), by kind
_BUILDERS: Final = {"depth_heuristic": "depth_heuristics", "semantic_validator": "semantic_validators"}
#: the kinds :meth:`ComponentSet.selected` lists first, by their own lines
_BUILT_ABOVE = frozenset({"llm_adapters", "validators", "memory_backends", "schedulers"})


def _grant(name: str, grant: Any, key: str = "grant") -> frozenset[str] | None:
    """``[tools.<name>] grant`` (or ``ask``) as a set of permission names (None when absent)."""
    if grant is None:
        return None
    if not isinstance(grant, list) or not all(isinstance(p, str) and p for p in grant):
        raise ConfigError(f"[tools.{name}] {key} must be a list of permission names, got {grant!r}")
    return frozenset(grant)


def _declared_permissions(factory: Any) -> dict[str, str] | None:
    """The permissions a tool factory declares without being called: a Tool class's ``permissions`` default, or a
    ``permissions`` attribute on any other factory (None when it does not say)."""
    from aeon_kernel.tools import Tool

    if isinstance(factory, type) and issubclass(factory, Tool):
        declared = factory.model_fields["permissions"].default
    else:
        declared = getattr(factory, "permissions", None)
    return declared if isinstance(declared, dict) else None
