"""Ctrl-C in ``aeon run``, ``aeon resume``, ``aeon flow run`` and ``aeon flow resume`` (issue 27).

The kernel stops the run as ``kill -9`` would (nothing of the cycle under way is committed, the run's claim is
released); the command then says what the state store kept and the command that goes on, and exits 130 — no
traceback. A second Ctrl-C while the command closes down is ignored.
"""

from __future__ import annotations

import contextlib
import shlex
import signal
import sys
import threading
from collections.abc import Iterator
from typing import Any, Final

import click

from aeon_cli.output import echo_json
from aeon_kernel.secrets import scrub_secrets

EXIT_INTERRUPTED: Final = 130
#: ``Interrupt.store`` before the engine is built
UNKNOWN: Final = object()


def resume_command(command: str, config: str | None) -> str:
    """The command that resumes a run (``aeon resume``, ``aeon flow resume``), with the --config it needs."""
    return f"{command} --config {shlex.quote(config)}" if config else command


class Interrupt:
    """What Ctrl-C says: the run it stopped (``run_id``, once known) and the store keeping it (None: none)."""

    def __init__(self, command: str, run_id: str | None, *, as_json: bool) -> None:
        self.command, self.run_id, self.as_json = command, run_id, as_json
        self.store: Any = UNKNOWN
        self._resuming, self._reported = run_id is not None, False
        self._previous: Any = None

    def quiet(self) -> None:
        """Ignore another Ctrl-C until the command exits: the first one is being handled."""
        if self._previous is None and threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, signal.SIG_IGN)

    def restore(self) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)
            self._previous = None

    def report(self) -> None:
        """Say that the run was interrupted, what its state store keeps, and how to go on (or why it cannot)."""
        if self._reported:
            return
        self._reported = True
        run_id, store, stored = self.run_id, self.store, None
        if run_id is not None and store is not None and store is not UNKNOWN:
            with contextlib.suppress(Exception):
                stored = store.load(run_id).state
        go_on = f"Resume it with: {self.command} {run_id}"
        if run_id is None:
            message = "Interrupted before the run started: nothing was recorded."
        elif store is UNKNOWN and self._resuming:
            message = f"Interrupted before run {run_id} went on; it is as it was. {go_on}"
        elif store is None:
            message = (
                f"Interrupted: run {run_id} was not recorded in a state store (--no-log), so it cannot be "
                "resumed; run it again (without --no-log, or with [state] in aeon.toml, to make it resumable)."
            )
        elif stored is None:
            message = f"Interrupted before run {run_id} was recorded: there is nothing to resume."
        elif stored.status != "running":
            message = (
                f"Interrupted after run {run_id} had ended ({stored.status}): there is nothing to resume."
            )
        else:
            cycles = f"{stored.cycle} committed cycle{'' if stored.cycle == 1 else 's'}"
            message = (
                f"Interrupted: run {run_id} stopped; the state store keeps its {cycles} (the cycle under way is "
                f"not kept). {go_on}"
            )
        click.echo(scrub_secrets(message), err=True)
        if self.as_json:
            resumable = go_on in message
            cycles_kept = stored.cycle if stored is not None else None
            echo_json(
                {
                    "run_id": run_id,
                    "status": "interrupted",
                    "cycles": cycles_kept,
                    "resumable": resumable,
                    "message": message,
                }
            )


@contextlib.contextmanager
def interruptible(command: str, run_id: str | None = None, *, as_json: bool) -> Iterator[Interrupt]:
    """Ctrl-C (``KeyboardInterrupt``) in the block: the run is reported (the block reports it itself where it must
    read the store before closing it) and the command exits 130."""
    interrupt = Interrupt(command, run_id, as_json=as_json)
    try:
        yield interrupt
    except KeyboardInterrupt:
        interrupt.quiet()
        interrupt.report()
        interrupt.restore()
        sys.exit(EXIT_INTERRUPTED)
    finally:
        interrupt.restore()
