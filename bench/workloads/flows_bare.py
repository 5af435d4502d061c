"""The floor for W5, W6 and W7: the same node work called in a plain Python loop, no framework, no history."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from . import flows
from .common import Case

NAME = "bare"
VARIANTS = {"W5": ("plain",), "W6": ("plain",), "W7": ("plain",)}


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
