"""The floor for W5 to W9: the same node work called in a plain Python loop, no framework, no history."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from . import flows
from .common import Case

NAME = "bare"
VARIANTS = {w: ("plain",) for w in ("W5", "W6", "W7", "W8", "W9")}


def version() -> str:
    import platform

    return "python " + platform.python_version()


def fanout(variant: str, tmp: Path, width: int = flows.FANOUT_WIDTH) -> Case:
    amounts = [flows.amount(i) for i in range(width)]

    def run() -> dict[str, Any]:
        value = flows.identity_work(flows.start_work(dict(flows.INPUT)))
        parts = [flows.add_work(value, amount) for amount in amounts]
        return flows.identity_work(flows.merge_work(parts))

    return Case(run=run, units=flows.fanout_nodes(width), check=flows.fanout_check(width))


def chain(variant: str, tmp: Path) -> Case:
    amounts = [flows.amount(i) for i in range(flows.CHAIN_STEPS)]

    def run() -> dict[str, Any]:
        value = flows.start_work(dict(flows.INPUT))
        for amount in amounts:
            value = flows.add_work(value, amount)
        return flows.identity_work(value)

    return Case(run=run, units=flows.CHAIN_NODES, check=flows.check_chain)


def map_items(variant: str, tmp: Path, items: int = flows.MAP_ITEMS) -> Case:
    given = flows.map_input(items)

    def run() -> dict[str, Any]:
        value = flows.identity_work(flows.map_start_work(given))
        parts = [flows.add_work(item, flows.MAP_AMOUNT) for item in value["items"]]
        return flows.identity_work(flows.merge_work(parts))

    return Case(run=run, units=flows.map_nodes(items), check=flows.map_check(items))


def loop(variant: str, tmp: Path) -> Case:
    def run() -> dict[str, Any]:
        value: dict[str, Any] = flows.loop_start_work(flows.LOOP_INPUT)
        while True:
            value = flows.route_work(flows.count_work(value))
            if value["route"] == flows.LOOP_DONE:
                return flows.identity_work(value)

    return Case(run=run, units=flows.LOOP_NODES, check=flows.check_loop)
