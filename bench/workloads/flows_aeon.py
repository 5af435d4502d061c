"""Aeon, W5 to W9: declarative flows (spec 004) through the public API, ``Engine.from_config_dir(dir)``.

The flow directories (``flow.yaml`` and ``aeon.toml`` with ``[memory] use = "in_memory"``) are written at bench
time into a temporary directory. The node code is this module's: it is a plugin (``aeon_register_nodes``) and is
passed as one, ``plugins=[flows_aeon]``, with the kernel's built-in plugins and autoloading off. No node is an
agent, so no model is loaded. The flow is built once per case; each timed ``run()`` is a fresh
``flow.run(input)``, which always records the history (one record per stage). W7 is W5's flow with K workers.
W8 is a map (a split with ``over: /items``: one subtask per item, met at the merge in item order); W9 a loop (a
``route_by`` decision whose edge back to ``step`` has ``max_iterations``).
"""

from __future__ import annotations

import itertools
import json
import sys
from pathlib import Path
from typing import Any

from aeon_kernel import Engine, hookimpl
from aeon_kernel.registry import Register

from . import flows
from .aeon_w import BUILTIN_PLUGINS
from .common import Case

NAME = "aeon"
#: Aeon always records the history (spec 004 §6): there is no variant without it.
VARIANTS = {w: ("history",) for w in ("W5", "W6", "W7", "W8", "W9")}
AEON_TOML = '[memory]\nuse = "in_memory"\n'


def version() -> str:
    import aeon_kernel

    return aeon_kernel.__version__


# --- the node implementations: this module is the plugin -------------------------------------------------------


def _start() -> Any:
    return lambda value, context: flows.start_work(value)


def _add(amount: int) -> Any:
    return lambda value, context: flows.add_work(value, amount)


def _map_start() -> Any:
    return lambda value, context: flows.map_start_work(value)


def _loop_start() -> Any:
    return lambda value, context: flows.loop_start_work(value)


def _count() -> Any:
    return lambda value, context: flows.count_work(value)


def _merge() -> Any:
    # A merge receives [{"task", "from", "status", "output"}, ...]: the parts are the outputs.
    return lambda value, context: flows.merge_work([entry["output"] for entry in value])


@hookimpl
def aeon_register_nodes(register: Register) -> None:
    register("bench.start", _start)
    register("bench.add", _add)
    register("bench.merge", _merge)
    register("bench.map_start", _map_start)
    register("bench.loop_start", _loop_start)
    register("bench.count", _count)


# --- the flow directories ------------------------------------------------------------------------------------------


def _node(node_id: str, role: str, impl: str | None = None, over: str | None = None, **options: Any) -> str:
    fields = [f"id: {node_id}", f"role: {role}"]
    if impl is not None:
        fields.append(f"impl: {impl}")
    if over is not None:
        fields.append(f"over: {over}")
    if options:
        fields.append("options: " + json.dumps(options))
    return "  - {" + ", ".join(fields) + "}"


def _write(
    directory: Path,
    name: str,
    nodes: list[str],
    edges: list[tuple[str, str] | str],
    head: tuple[str, ...] = (),
) -> Path:
    """``edges``: pairs, or an edge already written in flow.yaml's syntax (a loop edge); ``head``: more top-level
    lines (``ttl: N``)."""
    directory.mkdir(parents=True, exist_ok=True)
    lines = [f"name: {name}", "version: 1", *head, "nodes:", *nodes, "edges:"]
    lines += [f"  - {edge}" if isinstance(edge, str) else f"  - [{edge[0]}, {edge[1]}]" for edge in edges]
    (directory / "flow.yaml").write_text("\n".join(lines) + "\n")
    (directory / "aeon.toml").write_text(AEON_TOML)
    return directory


def write_fanout(directory: Path, width: int = flows.FANOUT_WIDTH) -> Path:
    """``start → split → w0 … w{width-1} → merge → exit``: a split with one subtask per outbound edge, one merge."""
    workers = [f"w{i}" for i in range(width)]
    nodes = [_node("start", "start", "bench.start"), _node("split", "split")]
    nodes += [_node(w, "linear", "bench.add", amount=flows.amount(i)) for i, w in enumerate(workers)]
    nodes += [_node("merge", "merge", "bench.merge"), _node("done", "exit")]
    edges = [("start", "split"), *(("split", w) for w in workers), *((w, "merge") for w in workers)]
    edges.append(("merge", "done"))
    return _write(directory, "bench-fanout", nodes, edges)


def write_chain(directory: Path) -> Path:
    """``start → step_0 … step_97 → exit``."""
    steps = [f"step_{i}" for i in range(flows.CHAIN_STEPS)]
    nodes = [_node("start", "start", "bench.start")]
    nodes += [_node(s, "linear", "bench.add", amount=flows.amount(i)) for i, s in enumerate(steps)]
    nodes.append(_node("done", "exit"))
    path = ["start", *steps, "done"]
    return _write(directory, "bench-chain", nodes, list(itertools.pairwise(path)))


def write_map(directory: Path, items: int = flows.MAP_ITEMS) -> Path:
    """``start → split (over: /items) → work → merge → exit``: one ``work`` subtask per item.

    The TTL is set to what W7's static fan-out of the same width gets by default (10 cycles per node executed):
    the default, 10 per node *declared*, would be 50 cycles, and with ``parallelism: 1`` each subtask's stage
    takes one."""
    nodes = [
        _node("start", "start", "bench.map_start"),
        _node("split", "split", over="/items"),
        _node("work", "linear", "bench.add", amount=flows.MAP_AMOUNT),
        _node("merge", "merge", "bench.merge"),
        _node("done", "exit"),
    ]
    edges: list[tuple[str, str] | str] = [
        ("start", "split"),
        ("split", "work"),
        ("work", "merge"),
        ("merge", "done"),
    ]
    return _write(directory, "bench-map", nodes, edges, head=(f"ttl: {10 * flows.map_nodes(items)}",))


def write_loop(directory: Path) -> Path:
    """``start → step → check``, ``check`` going back to ``step`` (a loop edge) until ``n`` reaches the rounds."""
    routes = {str(flows.LOOP_ROUNDS): "done"}
    nodes = [
        _node("start", "start", "bench.loop_start"),
        _node("step", "linear", "bench.count"),
        _node("check", "decision", "route_by", key="n", routes=routes, default="step"),
        _node("done", "exit"),
    ]
    back = f"{{from: check, to: step, max_iterations: {flows.LOOP_ROUNDS}, otherwise: done}}"
    edges: list[tuple[str, str] | str] = [("start", "step"), ("step", "check"), back, ("check", "done")]
    return _write(directory, "bench-loop", nodes, edges)


def build(directory: Path) -> Any:
    """The flow ready to run: its aeon.toml, the built-in plugins and this module's nodes, no autoloading."""
    return Engine.from_config_dir(
        directory, plugins=[*BUILTIN_PLUGINS, sys.modules[__name__]], autoload=False
    )


def history_bytes_per_node(result: Any) -> float:
    """The run's history as JSON, per stage (one stage per node executed)."""
    return len(json.dumps(result.history)) / len(result.history)


def _case(directory: Path, nodes: int, check_output: Any, given: Any = flows.INPUT) -> Case:
    flow = build(directory)

    def run() -> Any:
        return flow.run(given)

    def check(result: Any) -> None:
        assert result.status == "success", result.message
        assert len(result.history) == nodes, len(result.history)
        check_output(result.output)

    return Case(
        run=run,
        units=nodes,
        check=check,
        close=flow.close,
        history_bytes=lambda: history_bytes_per_node(run()),
    )


def fanout(variant: str, tmp: Path, width: int = flows.FANOUT_WIDTH) -> Case:
    directory = write_fanout(tmp / f"fanout-{width}", width)
    return _case(directory, flows.fanout_nodes(width), flows.fanout_check(width))


def chain(variant: str, tmp: Path) -> Case:
    return _case(write_chain(tmp / "chain"), flows.CHAIN_NODES, flows.check_chain)


def map_items(variant: str, tmp: Path, items: int = flows.MAP_ITEMS) -> Case:
    directory = write_map(tmp / f"map-{items}", items)
    return _case(directory, flows.map_nodes(items), flows.map_check(items), flows.map_input(items))


def loop(variant: str, tmp: Path) -> Case:
    return _case(write_loop(tmp / "loop"), flows.LOOP_NODES, flows.check_loop, flows.LOOP_INPUT)
