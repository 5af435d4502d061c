"""Step-through (spec 004 §10.7): ``aeon run --inspect`` and ``aeon flow run --inspect`` drive their run one cycle
at a time from the inspector's page.

:func:`plan_cycles` and :func:`flow_stages` are what the two commands iterate instead of the run's own iterator:
the same cycle (stage) records, each produced only once the page said so, so the commands print, record and exit
as they always do. They start the server at once — its URL is printed (on stderr: ``--json`` keeps stdout for the
result) before the run starts — and the iterator closes it when the run ends.

Before each cycle the run is paused: the page shows the run so far and the pending unit of work (the run's
preview, :mod:`.pending`), and its buttons answer through :class:`~aeon_cli.inspect.control.Control`. No pause is
made where no cycle is left (the plan finished, the flow's root task ended): the run then ends at once. When it
ends, the page is given a moment to show the result before the server goes.

*Stop* ends the run where it is: the run is closed, which releases it in its state store (the CLI records every
run by default), so ``aeon resume RUN_ID`` (``aeon flow resume``) goes on from there; the command says so and
exits with status 130, as an interrupted ``aeon batch`` does. Ctrl-C in the terminal, and SIGTERM (a supervisor's
stop; :func:`aeon_cli.inspect.local.stopping`, which also restores a SIGINT a background job inherited ignored),
end the command as Ctrl-C ends any run: the server closes, the run is released, and the command's Ctrl-C report
(:mod:`aeon_cli.interrupts`) says how to resume it and exits 130.

The page's URL carries the session's secret (:mod:`aeon_cli.inspect.gate`): it is printed on stderr, for the user
who started the command, and only a browser that opened it can see the run or press a button.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack
from typing import TYPE_CHECKING, Any, Final, Literal, NoReturn

import click

from aeon_cli.inspect import pending
from aeon_cli.inspect.control import Control
from aeon_cli.inspect.live import Moment
from aeon_cli.inspect.liveapp import LiveInspector
from aeon_cli.inspect.local import Browser, stopping
from aeon_cli.inspect.server import InspectorServer
from aeon_cli.output import echo_json
from aeon_kernel.kit import Approval
from aeon_kernel.models import LogEntry
from aeon_kernel.secrets import register_secret, scrub_secrets

if TYPE_CHECKING:
    from aeon_kernel.orchestrator import Orchestrator
    from aeon_kernel.runtime.artifacts import ArtifactStore
    from aeon_kernel.runtime.run import Run
    from aeon_plugins.flow.engine import FlowEngine

EXIT_STOPPED: Final = 130
#: how long the command waits, once the run ended, for the page to show it
SHOW_END: Final = 3.0
#: and then serves on, for what that page asks next (a request under way when it was served)
GRACE: Final = 0.3

Pending = Callable[["Run"], dict[str, Any] | None]


class Stopped(Exception):
    """The page stopped the run; it is closed (resumable where it has a state store)."""

    def __init__(self, run_id: str, cycles: int, resumable: bool, message: str) -> None:
        super().__init__(message)
        self.run_id, self.cycles, self.resumable, self.message = run_id, cycles, resumable, message

    def exit(self, as_json: bool) -> NoReturn:
        """Say so (and, with ``--json``, print it as JSON on stdout); exit with status 130."""
        click.echo(scrub_secrets(self.message), err=True)
        if as_json:
            echo_json(
                {
                    "run_id": self.run_id,
                    "status": "stopped",
                    "cycles": self.cycles,
                    "resumable": self.resumable,
                    "message": self.message,
                }
            )
        sys.exit(EXIT_STOPPED)


class Session:
    """One step-through: the page's control and the server, serving in a background thread from construction."""

    def __init__(self, *, no_browser: bool, artifacts: ArtifactStore | None = None) -> None:
        self._cleanup = ExitStack()
        self._cleanup.enter_context(stopping())  # SIGTERM (and an inherited-ignored SIGINT) as Ctrl-C
        self.control = Control()
        self.server = InspectorServer(LiveInspector(self.control, artifacts))
        register_secret(self.server.gate.token)  # never in a page, a record or an answer
        self._thread = threading.Thread(
            target=self.server.serve_forever, name="aeon-step-through", daemon=True
        )
        self._thread.start()
        #: the page's address, with the session's secret: printed on stderr for the user who started the command
        self.url = self.server.login("/live")
        click.echo(f"Aeon step-through: {self.url}  (Step, Continue or Stop in the page)", err=True)
        self._browser = Browser()
        if not no_browser:
            self._browser.open(self.url)

    def close(self) -> None:
        try:
            self.server.shutdown()
            self.server.server_close()
            self._thread.join()
            self._browser.close()
        finally:
            self._cleanup.close()

    def drive(
        self, run: Run, upcoming: Pending, resume_with: str, earlier: Sequence[dict[str, Any]] = ()
    ) -> Iterator[LogEntry]:
        """``run``'s cycles, each run when the page says so; raises :class:`Stopped` when the page stops it.
        ``earlier``: a resumed run's stored cycle records, shown before the ones this session runs."""
        entries: list[dict[str, Any]] = list(earlier)

        def moment(next_work: dict[str, Any] | None = None, **end: Any) -> Moment:
            return Moment(
                run.state,
                tuple(entries),
                dict(run.manifest),
                next_work,
                resumable=run.store is not None and bool(entries),  # a run starts with its first cycle
                **end,
            )

        try:
            # however the loop ends (Ctrl-C and SIGTERM too, on their way to the command's Ctrl-C report), an
            # unfinished run is released in its store: resumable
            with run:
                while True:
                    work = upcoming(run)
                    if work is not None and self.control.pause(moment(work)) == "stop":
                        break
                    entry = run.next()
                    if entry is None and run.result is not None and run.result.status == "waiting":
                        action, reason = self.control.ask(moment(result=run.result.to_dict()))
                        if action == "stop":
                            break
                        run.answer(Approval(action == "approve", reason, by="the inspector's page"))
                        continue
                    if entry is None:
                        break
                    entries.append(entry.model_dump(mode="json", exclude={"plan_state"}))
                    yield entry
            if run.result is not None and run.result.status != "waiting":
                self._show_end(moment(result=run.result.to_dict()), "finished")
                return
            stopped = _stopped(run, len(entries), resume_with)
            self._show_end(moment(stopped=stopped.message), "stopped")
        finally:
            self.close()
        raise stopped

    def _show_end(self, moment: Moment, mode: Literal["finished", "stopped"]) -> None:
        """Publish the run's end, and give a watching page the time to show it before the server goes."""
        self.control.end(moment, mode)
        if self.control.wait_delivered(SHOW_END):
            time.sleep(GRACE)


def _stopped(run: Run, cycles: int, resume_with: str) -> Stopped:
    """Why the run ended, and how to go on. A new run starts (is created in its store) with its first cycle:
    stopped before it, there is nothing to resume."""
    where = f"before cycle {cycles + 1}"
    if run.result is not None and run.result.status == "waiting":
        message = (
            f"Stopped while run {run.run_id} waits for approval: it stays waiting in the state store; `aeon approve "
            f"{run.run_id}` (or --deny REASON) answers it and goes on."
        )
        return Stopped(run.run_id, cycles, run.store is not None, message)
    if not cycles:
        message = f"Stopped before the first cycle: run {run.run_id} never started, so nothing was recorded."
        return Stopped(run.run_id, cycles, False, message)
    if run.store is not None:
        message = (
            f"Stopped {where}: run {run.run_id} is kept in the state store; "
            f"`{resume_with} {run.run_id}` goes on from here."
        )
    else:
        message = (
            f"Stopped {where}: run {run.run_id} was not recorded in a state store, so it cannot be resumed "
            "(record it: drop --no-log, or set [state] in aeon.toml)."
        )
    return Stopped(run.run_id, cycles, run.store is not None, message)


def plan_cycles(
    orchestrator: Orchestrator,
    request: str,
    *,
    no_browser: bool,
    as_json: bool,
    output_schema: dict[str, Any] | None = None,
) -> Iterator[LogEntry]:
    """``aeon run --inspect``: ``orchestrator.iter(request)``, one cycle per Step (all of them after Continue).

    The run is started here (a request that cannot start raises before the server does) and made the
    orchestrator's latest run, so ``orchestrator.result`` is its result once the iterator is exhausted."""
    run = orchestrator.run = orchestrator.start(request, output_type=output_schema)
    return _plan_session(orchestrator, run, (), no_browser=no_browser, as_json=as_json)


def resumed_cycles(
    orchestrator: Orchestrator, run_id: str, *, take_over: bool, no_browser: bool, as_json: bool
) -> Iterator[LogEntry]:
    """``aeon resume --inspect``: the interrupted run claimed and continued one cycle per Step, its stored
    cycles shown on the page before the new ones."""
    run = orchestrator.run = orchestrator.start_resume(run_id, take_over=take_over)
    assert orchestrator.state_store is not None  # start_resume needs one
    stored = orchestrator.state_store.load(run_id).entries
    earlier = [entry.model_dump(mode="json", exclude={"plan_state"}) for entry in stored]
    return _plan_session(orchestrator, run, earlier, no_browser=no_browser, as_json=as_json)


def _plan_session(
    orchestrator: Orchestrator,
    run: Run,
    earlier: Sequence[dict[str, Any]],
    *,
    no_browser: bool,
    as_json: bool,
) -> Iterator[LogEntry]:
    collector = orchestrator.pm.get_plugin("aeon.artifacts")  # the engine's, when it keeps artifacts
    session = Session(no_browser=no_browser, artifacts=getattr(collector, "store", None))
    cycles = session.drive(run, pending.upcoming, "aeon resume", earlier)
    return _exiting(cycles, as_json)


def _exiting(cycles: Iterator[LogEntry], as_json: bool) -> Iterator[LogEntry]:
    try:
        yield from cycles
    except Stopped as stopped:
        stopped.exit(as_json)


def flow_stages(
    engine: FlowEngine,
    value: Any,
    *,
    start: str | None,
    ttl: int | None,
    no_browser: bool,
    as_json: bool,
) -> Iterator[dict[str, Any]]:
    """``aeon flow run --inspect``: ``engine.iter(value, ...)``, the stages of one cycle per Step; ``engine.result``
    is the task's result once the iterator is exhausted."""
    run = engine.start(value, start=start, ttl=ttl)
    session = Session(no_browser=no_browser, artifacts=getattr(engine.engine, "artifact_store", None))
    cycles = session.drive(run, pending.upcoming, "aeon flow resume")
    return _flow(engine, run, cycles, as_json)


def resumed_flow_stages(
    engine: FlowEngine, run_id: str, *, take_over: bool, no_browser: bool, as_json: bool
) -> Iterator[dict[str, Any]]:
    """``aeon flow resume RUN_ID --inspect``: the interrupted flow run continued one cycle of stages per Step, its
    stored cycles shown on the page before the new ones."""
    run, history = engine.start_resume(run_id, take_over=take_over)
    store = engine.engine.state_store
    assert store is not None  # start_resume needs one
    earlier = [entry.model_dump(mode="json", exclude={"plan_state"}) for entry in store.load(run_id).entries]
    session = Session(no_browser=no_browser, artifacts=getattr(engine.engine, "artifact_store", None))
    cycles = session.drive(run, pending.upcoming, "aeon flow resume", earlier)
    return _flow(engine, run, cycles, as_json, history)


def _flow(
    engine: FlowEngine,
    run: Run,
    cycles: Iterator[LogEntry],
    as_json: bool,
    history: list[dict[str, Any]] | None = None,
) -> Iterator[dict[str, Any]]:
    history = history if history is not None else []
    try:
        for entry in cycles:
            for stage in entry.stages:
                history.append(stage)
                yield stage
    except Stopped as stopped:
        stopped.exit(as_json)
    # what engine.iter sets at its end: the task's result from the run's (the flow engine's own reading of it)
    engine.result = engine._result(run, history)
