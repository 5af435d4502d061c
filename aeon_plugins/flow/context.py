"""The context assembler (spec 004 §4, §10.10): what a node may read, from the task, project and global memory layers.

Each layer is a prefix in a memory backend (the engine's, or the one ``memory.yaml`` names for the layer):

- ``task``: ``flow/<run_id>/<task_id>/<seq>-<node>`` — the outputs of the task's earlier stages and of its
  ancestors' (a clone sees what its parent did before the branch); written by the router after each stage, when
  some node of the flow reads the task layer;
- ``project``: ``project/<flow name>/<key>`` and ``global``: ``global/<key>`` — written by nodes with
  :meth:`~aeon_plugins.flow.nodes.NodeContext.remember`, and kept across runs by a durable backend.

Items are ``{"layer", "key", "value", "seq"}``; a retrieval policy (``recency``, ``prefix``, or one a plugin
registers with ``aeon_register_retrieval_policies``) orders and filters them, ``limit`` caps each layer, and the
token budget (4 characters of JSON per token) takes them in that order while they fit, leaving out any too large.
The context is handed to the node as a copy and recorded in the stage's history.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from typing import Any

from aeon_kernel import Memory
from aeon_plugins.flow.manifest import LAYERS, Layer, ProfileRef, ProfileSpec

#: ``policy(items, profile) -> items``: choose and order a layer's items
RetrievalPolicy = Callable[[list[dict[str, Any]], ProfileSpec], list[dict[str, Any]]]
GLOBAL_PROFILE = ProfileSpec()


def recency(items: list[dict[str, Any]], profile: ProfileSpec) -> list[dict[str, Any]]:
    """Newest first."""
    return sorted(items, key=lambda item: item["seq"], reverse=True)


def by_prefix(items: list[dict[str, Any]], profile: ProfileSpec) -> list[dict[str, Any]]:
    """In key order (the items already start with the profile's prefix)."""
    return sorted(items, key=lambda item: item["key"])


def estimate_tokens(value: Any) -> int:
    return (len(json.dumps(value, ensure_ascii=False, default=str)) + 3) // 4


class Layers:
    """Where each layer lives, for one flow: ``backends`` by layer (the engine's memory where none is named)."""

    def __init__(self, flow_name: str, backends: Mapping[Layer, Memory]) -> None:
        self.flow_name = flow_name
        self.backends = backends

    def prefix(self, layer: Layer, run_id: str, task_id: str) -> str:
        if layer == "task":
            return f"flow/{run_id}/{task_id}/"
        return f"project/{self.flow_name}/" if layer == "project" else "global/"

    def release(self, run_id: str) -> None:
        """The run ended: its task layer is no longer needed (a memory that keeps data only for its process drops
        it; a resumed run writes back what it lost)."""
        self.backends["task"].release(f"flow/{run_id}/")

    def write_stage(
        self, run_id: str, task_id: str, seq: int, node_id: str, output: Any, *, unless_present: bool = False
    ) -> None:
        """The task layer: a stage's validated output, under its sequence number (recency needs it).

        ``unless_present``: a resumed run puts back what a memory that did not survive the process lost."""
        key = f"{self.prefix('task', run_id, task_id)}{seq:08d}-{node_id}"
        backend = self.backends["task"]
        if not unless_present or backend.read(key) is None:
            backend.write(key, {"value": output, "seq": seq})

    def write_earlier(self, run_id: str, name: str, value: Any, order: int) -> None:
        """What came before the run (a session's earlier turns) in its root task's layer, as if it had been a stage
        before the first (key ``00000000-<name>``); ``order`` counts up from the oldest, for recency."""
        key = f"{self.prefix('task', run_id, 't1')}{0:08d}-{name}"
        self.backends["task"].write(key, {"value": value, "seq": order - 1_000_000})

    def remember(self, layer: Layer, run_id: str, task_id: str, key: str, value: Any) -> None:
        """A node's note in ``layer``; ``seq`` is the write time in nanoseconds, for recency across runs."""
        full = self.prefix(layer, run_id, task_id) + key
        self.backends[layer].write(full, {"value": value, "seq": time.time_ns()})

    def items(self, layer: Layer, run_id: str, lineage: list[str], prefix: str) -> list[dict[str, Any]]:
        tasks = lineage if layer == "task" else lineage[:1]
        found: list[dict[str, Any]] = []
        for task_id in tasks:
            base = self.prefix(layer, run_id, task_id)
            for key, stored in self.backends[layer].search(base + (prefix if layer != "task" else "")):
                short = key[len(base) :]
                if isinstance(stored, dict) and "value" in stored:
                    value, seq = stored["value"], stored.get("seq", 0)
                else:  # written by someone else directly: still readable
                    value, seq = stored, 0
                if layer == "task" and prefix and not short.split("-", 1)[-1].startswith(prefix):
                    continue
                found.append({"layer": layer, "key": short, "value": value, "seq": seq})
        return found


def assemble(
    layers: Layers,
    choice: str | ProfileRef,
    profiles: Mapping[str, ProfileSpec],
    policies: Mapping[str, RetrievalPolicy],
    run_id: str,
    lineage: list[str],
) -> list[dict[str, Any]]:
    """The context of one stage: ``none`` is empty, ``global`` every layer by recency, a profile as it says."""
    if choice == "none":
        return []
    profile = GLOBAL_PROFILE if choice == "global" else profiles[choice.profile]  # type: ignore[union-attr]
    policy = policies[profile.policy]
    chosen: list[dict[str, Any]] = []
    budget = profile.max_tokens - 1  # the list's brackets
    for layer in LAYERS:
        if layer in profile.layers:
            items = policy(layers.items(layer, run_id, lineage, profile.prefix), profile)
            taken, budget = fitted(items[: profile.limit], budget)
            chosen += taken
    return chosen


def fitted(items: list[dict[str, Any]], budget: int) -> tuple[list[dict[str, Any]], int]:
    """The ``items`` that fit ``budget`` tokens, taken in their order (one too large is left out, the next may
    fit), and the budget left: how a context is cut to size, for a flow's stage and a session's turn alike."""
    taken = []
    for item in items:
        cost = estimate_tokens(item) + 1  # and a comma
        if cost <= budget:
            taken.append(item)
            budget -= cost
    return taken, budget
