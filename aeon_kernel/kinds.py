"""The one table of component kinds: every kind of pluggable component, its hook, its label and its config.

The registry, the plugin manager, the configuration, the engine, the error messages and the hook reference all
read this table instead of retyping the list, so a new kind (a planner, a scheduler, a semantic validator, ...)
is one row here plus its ``aeon_register_<kind>`` hook in :mod:`aeon_kernel.hookspecs`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

#: How ``aeon.toml`` selects components of a kind:
#: ``one`` — a ``[section]`` table with ``use = NAME`` (and a default);
#: ``optional`` — like ``one``, but off unless the section is present;
#: ``many`` — ``[section] use = [NAMES]``, each with its own ``[section.NAME]`` options table;
#: ``subset`` — every registered component, or those ``[section] enabled`` lists;
#: ``named`` — not chosen by a section of ``aeon.toml``: flow manifests name them (node implementations, retrieval
#: policies), or option values do (secret providers, as ``{ "$<name>" = "reference" }``).
Selection = Literal["one", "optional", "many", "subset", "named"]


@dataclass(frozen=True)
class Kind:
    """One kind of component."""

    #: registry key and hook suffix: ``aeon_register_<name>``
    name: str
    #: how messages name one component of this kind
    label: str
    #: the ``aeon.toml`` section that chooses it
    section: str
    selection: Selection
    #: the component used when the section does not say (for ``optional``: once the section exists)
    default: str | None = None
    #: only the scheduler named here uses this kind: its choice is checked only for that scheduler, or when set
    used_by: str | None = None
    #: what a factory of this kind must return, as ``module:Class`` (imported on first build, so that importing
    #: the kernel stays cheap); None: a plain callable (node code, retrieval policies) or anything (flow engines)
    contract: str | None = None
    #: the other components (and settings) its factory always gets, by parameter name
    needs: tuple[str, ...] = ()
    #: those it gets only when its signature names them (a deterministic component is not handed the model)
    offered: tuple[str, ...] = ()

    @property
    def hook(self) -> str:
        return f"aeon_register_{self.name}"


_CONTRACTS: Final = "aeon_kernel.contracts"
_SPEC_003: Final = "aeon_kernel.reasoning.contracts"
#: what a model-backed component may ask for: the run's model (retrying), validator and supervisor, ``[run]``'s
#: settings
_MODEL: Final = ("llm", "validator", "supervisor", "max_tokens", "temperature")

KINDS: Final[tuple[Kind, ...]] = (
    Kind("llm_adapters", "LLM adapter", "llm", "one", "llama_cpp", contract=f"{_CONTRACTS}:LLMAdapter"),
    Kind("memory_backends", "memory backend", "memory", "one", "in_memory", contract=f"{_CONTRACTS}:Memory"),
    Kind("tools", "tool", "tools", "subset", contract="aeon_kernel.tools:Tool"),
    Kind("validators", "validator", "validator", "one", "schema", contract=f"{_CONTRACTS}:Validator"),
    Kind(
        "supervisors",
        "supervisor",
        "supervisor",
        "one",
        "default",
        contract=f"{_CONTRACTS}:Supervisor",
        needs=("llm", "validator", "tools"),
    ),
    Kind(
        "convergence_engines",
        "convergence engine",
        "convergence",
        "one",
        "plan_finished",
        contract=f"{_CONTRACTS}:ConvergenceEngine",
        offered=_MODEL,
    ),
    Kind("planners", "planner", "planner", "one", "model", contract=f"{_CONTRACTS}:Planner", offered=_MODEL),
    Kind(
        "schedulers",
        "scheduler",
        "scheduler",
        "one",
        "linear",
        contract="aeon_kernel.runtime.scheduler:Scheduler",
        # builders of the components only some schedulers use, so a run builds them when it first needs them
        offered=("depth_heuristic", "semantic_validator"),
    ),
    Kind(
        "depth_heuristics",
        "adaptive-depth heuristic",
        "depth",
        "one",
        "model",
        used_by="multipass",
        contract=f"{_SPEC_003}:AdaptiveDepth",
        offered=_MODEL,
    ),
    Kind(
        "semantic_validators",
        "semantic validator",
        "semantic_validator",
        "one",
        "model",
        used_by="multipass",
        contract=f"{_SPEC_003}:SemanticValidator",
        offered=_MODEL,
    ),
    Kind("telemetry_sinks", "telemetry sink", "telemetry", "many", contract=f"{_CONTRACTS}:TelemetrySink"),
    Kind("policies", "policy", "policy", "many", contract="aeon_kernel.policy:Policy"),
    Kind("nodes", "flow node implementation", "nodes", "named"),
    Kind("retrieval_policies", "context retrieval policy", "retrieval_policies", "named"),
    Kind("flow_engines", "flow engine", "flow_engines", "named"),
    Kind(
        "secret_providers",
        "secret provider",
        "secret_providers",
        "named",
        contract=f"{_CONTRACTS}:SecretProvider",
    ),
    Kind(
        "state_stores",
        "state store",
        "state",
        "optional",
        "sqlite",
        contract="aeon_kernel.runtime.store:StateStore",
    ),
    Kind(
        "executors",
        "executor",
        "executor",
        "one",
        "local",
        contract="aeon_kernel.runtime.executor:Executor",
    ),
    Kind(
        "artifact_stores",
        "artifact store",
        "artifacts",
        "optional",
        "sqlite",
        contract="aeon_kernel.runtime.artifacts:ArtifactStore",
    ),
)

BY_NAME: Final[dict[str, Kind]] = {kind.name: kind for kind in KINDS}
BY_SECTION: Final[dict[str, Kind]] = {kind.section: kind for kind in KINDS}
#: the kinds ``aeon.toml`` chooses exactly one of, by section (``[llm] use = ...``)
ROLES: Final[dict[str, Kind]] = {kind.section: kind for kind in KINDS if kind.selection == "one"}


def label(kind: str) -> str:
    """How messages name one component of ``kind`` (the kind's key when it is not in the table)."""
    found = BY_NAME.get(kind)
    return found.label if found else kind


def default(kind: str) -> str:
    """The name of the component of ``kind`` used when ``aeon.toml`` does not choose one."""
    name = BY_NAME[kind].default
    if name is None:
        raise KeyError(f"the kind {kind!r} has no default component")
    return name
