"""Click options that several commands share, written once: stepping through a run in the inspector, taking over
a run another host holds, more cycles for a resumed run."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

#: ``aeon resume`` and ``aeon flow resume``: more cycles for a run whose TTL expired (issue 27)
more_ttl_option = click.option(
    "--ttl",
    type=click.IntRange(min=1),
    help="Give the run N more cycles (recorded in its history): how a run whose TTL expired goes on.",
)
take_over_option = click.option(
    "--take-over",
    is_flag=True,
    help="Also take a run held by a process on another host (which cannot be checked): say that it is gone.",
)


def step_through_options(what: str) -> Callable[[Any], Any]:
    """``--inspect`` (``what`` says where it pauses and what the page shows) and ``--no-browser``."""

    def decorate(command: Any) -> Any:
        command = click.option(
            "--no-browser", is_flag=True, help="With --inspect: print the page's URL, open no browser."
        )(command)
        return click.option(
            "--inspect",
            is_flag=True,
            help=f"Step through {what}; Step, Continue and Stop drive it. Stop exits with status 130, the run "
            "resumable.",
        )(command)

    return decorate
