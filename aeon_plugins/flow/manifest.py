"""The manifest format of a flow directory (spec 004 §2): ``flow.yaml``, ``schemas/``, ``context.yaml`` and
``memory.yaml``.

These models say what each file may hold; :mod:`aeon_plugins.flow.loader` reads the files into them and
:mod:`aeon_plugins.flow.checks` checks what a single model cannot (the DAG, references between files). The JSON
Schema of ``flow.yaml`` (``aeon schemas``, ``docs/schemas/flow.json``) is generated from :class:`FlowSpec`.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema, model_validator

Role = Literal["start", "linear", "decision", "branch", "split", "merge", "exit"]
NodeKind = Literal["agent", "deterministic"]
Layer = Literal["task", "project", "global"]
LAYERS: tuple[Layer, ...] = ("task", "project", "global")
#: What a node carries beside what every node has, by role (spec 004 §2.2 "role-specific metadata").
ROLE_FIELDS: dict[str, Role] = {
    "route_key": "decision",
    "strategy": "merge",
    "always_fail": "exit",
    "over": "split",
    "first_success": "branch",
}

_ID = r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$"


class _Spec(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ProfileRef(_Spec):
    """``context: {profile: NAME}``: the node's context is assembled by the profile ``NAME`` of ``context.yaml``."""

    profile: str


class OutputCheck(_Spec):
    """A check on a node's output (docs/flows.md "Checks"): two templates over ``{"input", "output", "tools"}``
    that must be ``equal``, or the first's text found ``within`` the second's. A failed check fails the node."""

    equal: tuple[Any, Any] | None = None
    within: tuple[Any, Any] | None = None
    #: what a failure says (default: both values)
    message: str | None = None

    @model_validator(mode="after")
    def _one(self) -> OutputCheck:
        if (self.equal is None) == (self.within is None):
            raise ValueError("a check has one of equal and within")
        return self


class NodeSpec(_Spec):
    """One node of ``flow.yaml`` (spec 004 §2.2)."""

    id: str = Field(pattern=_ID, max_length=128)
    role: Role
    kind: NodeKind = "deterministic"
    description: str = ""
    #: deterministic nodes: the registered implementation (``aeon_register_nodes``); ``identity`` when omitted
    impl: str | None = None
    #: options given to the implementation's factory
    options: dict[str, Any] = Field(default_factory=dict)
    #: agent nodes: what the model is asked to do (the node's input and context follow it in the prompt)
    instruction: str | None = None
    #: agent nodes: one example of a good reply, shown in the prompt (small models need one)
    example: Any = None
    #: names of JSON Schemas in ``schemas/`` (``ticket`` is ``schemas/ticket.json``); none: any JSON value
    input_schema: str | None = None
    output_schema: str | None = None
    #: ``none`` (default), ``global`` (every memory layer), or ``{profile: NAME}``
    context: Literal["none", "global"] | ProfileRef = "none"
    #: the tools this node may call; any other call is tool misuse and fails the node (spec 004 §5)
    tools: tuple[str, ...] = ()
    #: per tool, the permissions this node's calls may use: fewer than ``[tools.<name>] grant`` gives, never more
    #: (a tool not named here keeps its whole grant)
    permissions: dict[str, tuple[str, ...]] = Field(default_factory=dict)
    #: checks on the node's output; an agent node whose reply fails one is asked once more, with the finding
    checks: tuple[OutputCheck, ...] = ()
    #: on failure, go on with the task marked ``partial`` (and the output it had before this node)
    continue_on_failure: bool = False
    #: the default: a failed node ends its task with ``failure``
    fail_on_failure: bool | None = None
    #: decision nodes: the output key holding the id of the next node
    route_key: str | None = None
    #: merge nodes: ``collect`` passes failed inputs too and makes the task ``partial`` when any failed;
    #: ``successes`` passes and counts only successful ones
    strategy: Literal["collect", "successes"] | None = None
    #: exit nodes: present ``failure`` whatever the task's status
    always_fail: bool | None = None
    #: branch nodes: the first clone to succeed settles the branch and the others are cancelled
    first_success: bool | None = None
    #: split nodes: a map: a JSON pointer to a list in the node's output; one subtask per item (docs/flows.md "Maps")
    over: str | None = None

    @property
    def decides_by(self) -> str:
        """A decision's output key that names the next node (``route`` unless ``route_key`` says otherwise)."""
        return self.route_key or "route"


class EdgeSpec(_Spec):
    """``{from: A, to: B}`` or ``[A, B]``; a loop edge ``{from: check, to: revise, max_iterations: 3}``."""

    source: str = Field(alias="from")
    target: str = Field(alias="to")
    #: a loop edge (it goes back): a task may take it at most this many times (docs/flows.md "Loops")
    max_iterations: int | None = Field(default=None, ge=1, le=10_000)
    #: a loop edge's way out: the decision's chosen edge once this one is used up (none: the decision fails)
    otherwise: str | None = None

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    @model_validator(mode="before")
    @classmethod
    def _pair(cls, value: Any) -> Any:
        if isinstance(value, list | tuple):
            if len(value) != 2:
                raise ValueError(f"an edge is [from, to]; got {len(value)} items")
            return {"from": value[0], "to": value[1]}
        return value


_EDGE_JSON_SCHEMA: dict[str, Any] = {
    "anyOf": [
        {
            "type": "object",
            "properties": {
                "from": {"type": "string"},
                "to": {"type": "string"},
                "max_iterations": {"type": "integer", "minimum": 1, "maximum": 10_000},
                "otherwise": {"type": "string"},
            },
            "required": ["from", "to"],
            "additionalProperties": False,
        },
        {"type": "array", "items": {"type": "string"}, "minItems": 2, "maxItems": 2},
    ]
}


class FlowSpec(_Spec):
    """``flow.yaml``: the nodes and edges of one workflow."""

    name: str = Field(min_length=1, max_length=200)
    description: str = ""
    version: str | int | None = None
    #: the start node used when a run names none (default: the first start node declared)
    start: str | None = None
    #: cycles the run may take; default: 10 per node, and one per node for each iteration a loop edge allows
    ttl: Annotated[int, Field(ge=1)] | None = None
    #: how many clones or subtasks run at once
    parallelism: int = Field(default=1, ge=1, le=64)
    #: record each stage's CPU time and the process's peak RSS too (spec 004 §10.4; a few µs a stage)
    profile: bool = False
    nodes: tuple[NodeSpec, ...] = Field(min_length=1)
    edges: tuple[Annotated[EdgeSpec, WithJsonSchema(_EDGE_JSON_SCHEMA)], ...] = ()


class ProfileSpec(_Spec):
    """A context profile of ``context.yaml`` (spec 004 §4): which layers, which items, how much."""

    layers: tuple[Layer, ...] = LAYERS
    #: how items are chosen: ``recency`` (newest first), ``prefix`` (key order), or a registered policy
    policy: str = "recency"
    #: only keys starting with this (within each layer)
    prefix: str = ""
    #: at most this many items per layer
    limit: int = Field(default=10, ge=0, le=10_000)
    #: the context's size limit, in tokens (estimated as 4 characters of JSON each); oldest items go first
    max_tokens: int = Field(default=1000, ge=1)


class ContextFile(_Spec):
    """``context.yaml``."""

    profiles: dict[str, ProfileSpec] = Field(default_factory=dict)


class LayerSpec(BaseModel):
    """One memory layer of ``memory.yaml``: a registered memory backend and its options."""

    model_config = ConfigDict(frozen=True, extra="allow")

    use: str


class MemoryFile(_Spec):
    """``memory.yaml`` (spec 004 §10.10): a backend per layer; a layer not listed uses the engine's memory."""

    layers: dict[Layer, LayerSpec] = Field(default_factory=dict)
