"""W5 to W9, the flow workloads (spec 004): what every framework shares — the shapes, the node work, the checks.

W5 fan-out/merge: ``start → split → w0 … w9 → merge → exit``. The split hands its output to ten workers, each
adds its own number; the merge waits for all ten and sums them; the exit presents the result. 14 nodes.
W6 chain: ``start → step_0 … step_97 → exit``, each step adding its own number. 100 nodes.
W7 wide fan-out: W5's shape at width K (``start → split → w0 … w{K-1} → merge → exit``, K + 4 nodes), K = 100 and
1,000 (issue 31: the cost per branch must not grow with K).
W8 map (issue 30): ``start → split → work → merge → exit`` with ``work`` run once per item, K + 4 nodes executed:
the start keeps the input's list of K items, the split hands out one subtask per item (a *dynamic* fan-out: one
``work`` node declared), each adds :data:`MAP_AMOUNT` to its item's total, the merge sums the K parts. K = 1,000.
W9 loop (issue 30): ``start → 100 x (step → check) → exit``, 202 nodes executed: ``step`` counts ``n`` up, the
decision ``check`` names ``step`` again until ``n`` reaches :data:`LOOP_ROUNDS`, then the exit (the edge back is
taken 99 times).

Every framework runs exactly these nodes, each doing exactly this module's work (a dict in, a dict out: the
node work is trivial on purpose, so only orchestration is timed); what a framework adds to express the shape —
LangGraph's reducer and ``Send``, pydantic-graph's fork, join and decision, Haystack's variadic socket — is its own
structure, not a node.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

#: W5: how many subtasks the split creates (one worker node per outbound edge)
FANOUT_WIDTH = 10


def fanout_nodes(width: int = FANOUT_WIDTH) -> int:
    """A fan-out's node count: start, split, ``width`` workers, merge, exit."""
    return width + 4


#: W5: start, split, the workers, merge, exit
FANOUT_NODES = fanout_nodes(FANOUT_WIDTH)
#: W6: start, CHAIN_NODES - 2 linear steps, exit
CHAIN_NODES = 100
CHAIN_STEPS = CHAIN_NODES - 2

INPUT: dict[str, Any] = {"total": 0, "note": "dropped by the start node"}


def amount(index: int) -> int:
    """What worker (W5, W7) or step (W6) ``index`` adds."""
    return index + 1


# --- the node work, the same in every framework ----------------------------------------------------------------


def start_work(value: dict[str, Any]) -> dict[str, int]:
    """The start node: keep only ``total`` (a start node normalises the raw input)."""
    return {"total": value["total"]}


def add_work(value: dict[str, Any], amount: int) -> dict[str, int]:
    """A worker or chain step: a new dict with ``amount`` added to ``total``."""
    return {"total": value["total"] + amount}


def merge_work(parts: list[dict[str, Any]]) -> dict[str, int]:
    """The merge: the sum of the parts' totals."""
    return {"total": sum(part["total"] for part in parts)}


def identity_work(value: dict[str, Any]) -> dict[str, Any]:
    """The split and the exit: the value as it is."""
    return value


# --- what a finished run must have produced ---------------------------------------------------------------------


def fanout_expected(width: int = FANOUT_WIDTH) -> dict[str, int]:
    """A fan-out's output: the sum of every worker's part (each worker adds its amount to the input's total)."""
    return {"total": sum(INPUT["total"] + amount(i) for i in range(width))}


FANOUT_EXPECTED = fanout_expected(FANOUT_WIDTH)
CHAIN_EXPECTED = {"total": INPUT["total"] + sum(amount(i) for i in range(CHAIN_STEPS))}


def check_fanout(output: dict[str, Any]) -> None:
    assert output == FANOUT_EXPECTED, output


def fanout_check(width: int = FANOUT_WIDTH) -> Callable[[dict[str, Any]], None]:
    """The check of a fan-out of ``width`` workers (W5: :func:`check_fanout`; W7: K workers)."""
    expected = fanout_expected(width)

    def check(output: dict[str, Any]) -> None:
        assert output == expected, output

    return check


def check_chain(output: dict[str, Any]) -> None:
    assert output == CHAIN_EXPECTED, output


# --- W8: a map over K items -----------------------------------------------------------------------------------

#: W8: how many items the map hands out (issue 30: 1,000; ``--smoke`` takes fewer)
MAP_ITEMS = 1000
#: W8: what each item's subtask adds to the item's total
MAP_AMOUNT = 1


def map_nodes(items: int = MAP_ITEMS) -> int:
    """The nodes a map run executes: start, split, one ``work`` per item, merge, exit."""
    return items + 4


def map_input(items: int = MAP_ITEMS) -> dict[str, Any]:
    """The map's input: ``items`` dicts ``{"total": i}`` (built once per case; no node changes it)."""
    return {"items": [{"total": i} for i in range(items)], "note": "dropped by the start node"}


def map_start_work(value: dict[str, Any]) -> dict[str, Any]:
    """The map's start node: keep only ``items``."""
    return {"items": value["items"]}


def map_expected(items: int = MAP_ITEMS) -> dict[str, int]:
    return {"total": sum(i + MAP_AMOUNT for i in range(items))}


def map_check(items: int = MAP_ITEMS) -> Callable[[dict[str, Any]], None]:
    """The check of a map over ``items`` items: the merge's sum of every item's part."""
    expected = map_expected(items)

    def check(output: dict[str, Any]) -> None:
        assert output == expected, output

    return check


# --- W9: a loop of 100 rounds ----------------------------------------------------------------------------------

#: W9: how many times ``step`` (and ``check``) run; the edge back from ``check`` to ``step`` is taken one time fewer
LOOP_ROUNDS = 100
#: W9: start, ``step`` and ``check`` once per round, exit
LOOP_NODES = 2 * LOOP_ROUNDS + 2
LOOP_INPUT: dict[str, Any] = {"n": 0, "note": "dropped by the start node"}
#: W9: the routes ``check`` names (each framework maps them to its own nodes)
LOOP_AGAIN, LOOP_DONE = "step", "done"


def loop_start_work(value: dict[str, Any]) -> dict[str, int]:
    """The loop's start node: keep only ``n``."""
    return {"n": value["n"]}


def count_work(value: dict[str, Any]) -> dict[str, int]:
    """The loop's ``step``: a new dict with ``n`` counted up."""
    return {"n": value["n"] + 1}


def route_work(value: dict[str, Any]) -> dict[str, Any]:
    """The loop's decision ``check``: the input with ``route`` naming the next node (Aeon's built-in ``route_by``
    does the same: ``{**value, "route": routes.get(str(value["n"]), default)}``)."""
    return {**value, "route": LOOP_DONE if value["n"] >= LOOP_ROUNDS else LOOP_AGAIN}


def check_loop(output: dict[str, Any]) -> None:
    assert output.get("n") == LOOP_ROUNDS and output.get("route", LOOP_DONE) == LOOP_DONE, output


def payload_bytes(value: Any) -> int:
    """The bytes held in ``bytes`` objects anywhere inside ``value`` (a checkpointer's serialised storage)."""
    if isinstance(value, bytes | bytearray):
        return len(value)
    if isinstance(value, dict):
        return sum(payload_bytes(v) for v in value.values())
    if isinstance(value, list | tuple):
        return sum(payload_bytes(v) for v in value)
    return 0
