"""Loading a flow directory: every file read and checked, every problem listed (spec 004 §8 steps 1-4).

:func:`load_flow` returns a :class:`~aeon_plugins.flow.graph.Flow` or raises :class:`FlowError` holding *all*
the problems found, each naming its file, line, key and node, so that ``aeon flow validate`` can list them
together instead of one per attempt.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel
from pydantic import ValidationError as PydanticValidationError

from aeon_kernel.errors import AeonError, ValidationError
from aeon_kernel.kit import check_schema, schema_errors
from aeon_plugins.flow.checks import DEGREES, Known, Malformed, Sources, check_flow, near
from aeon_plugins.flow.graph import Flow
from aeon_plugins.flow.manifest import ContextFile, EdgeSpec, FlowSpec, MemoryFile, NodeSpec
from aeon_plugins.flow.yamlfile import Loaded, Problem, load_file

M = TypeVar("M", bound=BaseModel)
MAX_SCHEMAS = 1000


class FlowError(AeonError):
    """A flow directory cannot be used; ``problems`` lists everything wrong with it."""

    def __init__(self, directory: str, problems: list[Problem]) -> None:
        self.directory, self.problems = directory, problems
        listing = "\n".join(f"  - {problem}" for problem in problems)
        noun = "problem" if len(problems) == 1 else "problems"
        super().__init__(f"flow {directory} has {len(problems)} {noun}:\n{listing}")

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "problems": [problem.to_dict() for problem in self.problems]}


def load_flow(directory: str | Path, known: Known | None = None) -> Flow:
    """The flow in ``directory``; raises :class:`FlowError` listing every problem found."""
    root = Path(directory)
    problems: list[Problem] = []
    hashes: dict[str, str] = {}
    if not root.is_dir():
        raise FlowError(str(root), [Problem(str(root), "is not a directory holding a flow.yaml")])

    def read(name: str, required: bool) -> Loaded | None:
        path = root / name
        if not required and not path.exists() and not path.is_symlink():
            return None
        loaded = load_file(path, name)
        if isinstance(loaded, Problem):
            problems.append(loaded)
            return None
        hashes[name] = loaded.digest
        return loaded

    flow_file = read("flow.yaml", required=True)
    spec = _model(FlowSpec, flow_file, problems) if flow_file else None
    context_file = read("context.yaml", required=False)
    context = _model(ContextFile, context_file, problems) if context_file else ContextFile()
    memory_file = read("memory.yaml", required=False)
    memory = _model(MemoryFile, memory_file, problems) if memory_file else MemoryFile()
    schemas, schema_files = _schemas(root, problems, hashes)
    if flow_file is None:
        raise FlowError(str(root), problems)
    sources = Sources(flow_file, context_file, memory_file, schema_files)
    if spec is not None:
        problems += check_flow(
            spec, sources, schemas, context or ContextFile(), memory or MemoryFile(), known or Known()
        )
    else:  # still check what can be checked: the nodes and edges that are well formed
        partial = _partial(flow_file.value)
        if partial is not None:
            problems += check_flow(
                partial[0],
                sources,
                schemas,
                context or ContextFile(),
                memory or MemoryFile(),
                known or Known(),
                partial[1],
            )
    if problems or spec is None or context is None or memory is None:
        raise FlowError(str(root), problems)
    return Flow(
        spec=spec,
        directory=root.resolve(),
        schemas=schemas,
        profiles=dict(context.profiles),
        memory=memory,
        hashes=dict(sorted(hashes.items())),
        node_lines={node.id: flow_file.line(("nodes", i)) or 0 for i, node in enumerate(spec.nodes)},
    )


def _partial(value: Any) -> tuple[FlowSpec, Malformed] | None:
    """The well-formed part of a ``flow.yaml`` that does not validate: its valid nodes, the id (and role, when
    valid) of the others, whose own checks are skipped, and its valid edges; with what was left out."""
    if not isinstance(value, dict) or not isinstance(value.get("nodes"), list):
        return None
    nodes: list[NodeSpec] = []
    positions: list[int] = []
    unchecked: set[str] = set()
    roleless: set[str] = set()
    idless = 0
    for place, raw in enumerate(value["nodes"]):
        try:
            nodes.append(NodeSpec.model_validate(raw))
        except PydanticValidationError:
            node_id = raw.get("id") if isinstance(raw, dict) else None
            if not isinstance(node_id, str):
                idless += 1
                continue
            role = raw.get("role")
            if role not in DEGREES:
                role = "linear"  # a stand-in: its degree and role are not checked
                roleless.add(node_id)
            nodes.append(NodeSpec.model_construct(id=node_id, role=role))
            unchecked.add(node_id)
        positions.append(place)
    edges: list[EdgeSpec] = []
    raw_edges: list[Any] = value["edges"] if isinstance(value.get("edges"), list) else []
    for raw in raw_edges:
        with contextlib.suppress(PydanticValidationError):
            edges.append(EdgeSpec.model_validate(raw))
    if not nodes:
        return None
    start = value.get("start") if isinstance(value.get("start"), str) else None
    spec = FlowSpec.model_construct(name="?", nodes=tuple(nodes), edges=tuple(edges), start=start)
    return spec, Malformed(
        frozenset(unchecked), frozenset(roleless), idless, tuple(positions), len(edges) == len(raw_edges)
    )


def _model(model: type[M], loaded: Loaded, problems: list[Problem]) -> M | None:
    """``loaded`` as ``model``; each pydantic error becomes a problem at its key's line."""
    if loaded.value is None:
        problems.append(Problem(loaded.file, "is empty"))
        return None
    try:
        return model.model_validate(loaded.value)
    except PydanticValidationError as exc:
        errors = exc.errors(include_url=False)
        missing = [tuple(e["loc"]) for e in errors if e["type"] == "missing"]
        meant: dict[tuple[Any, ...], str] = {}  # a misspelt key -> the required key it stands for
        for error in errors:
            path = tuple(error["loc"])
            if error["type"] == "extra_forbidden":
                key = near(path[-1], [m[-1] for m in missing if m[:-1] == path[:-1]], cutoff=0.5)
                if key:
                    meant[path] = key
        told = {(*path[:-1], key) for path, key in meant.items()}
        for error in errors:
            path = tuple(error["loc"])
            if path in told:
                continue  # told at the misspelt key: one problem, not "unknown" and "required"
            message = _phrase(error)
            if path in meant:
                message = f"is not a known key; did you mean {meant[path]!r}? (see docs/flows.md)"
            problems.append(loaded.problem(path, message, _node_id(loaded.value, path)))
        return None


def _phrase(error: Any) -> str:
    """A pydantic error in the words a manifest author needs."""
    if error["type"] == "extra_forbidden":
        return "is not a known key (see docs/flows.md for the manifest reference)"
    if error["type"] == "missing":
        return "is required"
    if error["type"] == "literal_error":
        expected = [
            part.strip(" '") for part in str(error["ctx"]["expected"]).replace(" or ", ", ").split(",")
        ]
        meant = near(error["input"], expected)
        if meant:
            return f"{error['input']!r} is not one of {expected}; did you mean {meant!r}?"
    return str(error["msg"])


def _node_id(value: Any, path: tuple[Any, ...]) -> str | None:
    if len(path) >= 2 and path[0] == "nodes" and isinstance(path[1], int) and isinstance(value, dict):
        nodes = value.get("nodes")
        if isinstance(nodes, list) and path[1] < len(nodes) and isinstance(nodes[path[1]], dict):
            node_id = nodes[path[1]].get("id")
            return node_id if isinstance(node_id, str) else None
    return None


def _schemas(
    root: Path, problems: list[Problem], hashes: dict[str, str]
) -> tuple[dict[str, dict[str, Any]], frozenset[str]]:
    """Every ``schemas/NAME.json`` (or ``.yaml``) that is a valid JSON Schema, by NAME; and every NAME found."""
    folder = root / "schemas"
    if not folder.is_dir():
        return {}, frozenset()
    schemas: dict[str, dict[str, Any]] = {}
    files = sorted(p for p in folder.iterdir() if p.suffix in (".json", ".yaml", ".yml"))
    if len(files) > MAX_SCHEMAS:
        problems.append(Problem("schemas/", f"holds {len(files)} schema files; the limit is {MAX_SCHEMAS}"))
        return {}, frozenset()
    for path in files:
        shown = f"schemas/{path.name}"
        loaded = load_file(path, shown)
        if isinstance(loaded, Problem):
            problems.append(loaded)
            continue
        if path.stem in schemas:
            problems.append(Problem(shown, f"a schema named {path.stem!r} is defined twice"))
            continue
        if not isinstance(loaded.value, dict):
            problems.append(Problem(shown, "must hold a JSON Schema object"))
            continue
        try:
            check_schema(loaded.value)
        except ValidationError as exc:
            problems.append(Problem(shown, f"is not a valid JSON Schema: {exc}"))
            continue
        examples = loaded.value.get("examples")
        for i, example in enumerate(examples if isinstance(examples, list) else []):
            wrong = schema_errors(loaded.value, example)
            if wrong:  # a model shown an example copies it: one that is wrong is worse than none
                problems.append(Problem(shown, f"examples[{i}] does not match the schema: {wrong[0]}"))
        schemas[path.stem] = loaded.value
        hashes[shown] = loaded.digest
    return schemas, frozenset(path.stem for path in files)
