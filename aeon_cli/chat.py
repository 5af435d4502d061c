"""``aeon chat`` and ``aeon sessions``: conversations that span runs (issue 29; :mod:`aeon_plugins.sessions`).

Each line said is a turn, run with the live view (or printed as a JSON line with ``--json``). The turns are runs
in the state store (the user data directory's, where ``aeon.toml`` names none), so ``aeon chat --continue`` or
``--session ID`` picks a conversation up later, in any process, and a turn that ``kill -9`` or Ctrl-C cut short
is finished before the next.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Final, NoReturn

import click

from aeon_cli.output import echo_json
from aeon_kernel.errors import AeonError
from aeon_kernel.secrets import scrub_secrets

EXIT_SETUP_ERROR: Final = 2
#: what ends a conversation typed at the prompt (end of input does too)
_GOODBYE = frozenset({"exit", "quit", "/exit", "/quit", "bye"})


def _fail(exc: AeonError | str) -> NoReturn:
    click.echo(f"Error: {scrub_secrets(str(exc))}", err=True)
    sys.exit(EXIT_SETUP_ERROR)


@contextmanager
def _engine_for(config: str | None) -> Iterator[Any]:
    """The engine, with the default state store where the configuration names none (a session needs one)."""
    from aeon_cli import recording
    from aeon_kernel.config import load_config
    from aeon_kernel.engine import Engine

    try:
        engine = Engine(recording.with_default_store(load_config(config)))
        engine.check_choices()
        engine.build_selected()
    except AeonError as exc:
        _fail(exc)
    try:
        yield engine
    finally:
        engine.close()


@click.command("chat")
@click.option("--session", "session_id", help="Go on with this conversation (aeon sessions lists them).")
@click.option("--continue", "go_on", is_flag=True, help="Go on with the most recent conversation.")
@click.option(
    "-m",
    "--message",
    "messages",
    multiple=True,
    help="Say this, then stop (repeat for several turns); without it, lines are read from the terminal.",
)
@click.option("--ttl", type=click.IntRange(min=1), help="Maximum number of cycles for each turn.")
@click.option("--config", type=click.Path(dir_okay=False), help="aeon.toml to use.")
@click.option("--json", "as_json", is_flag=True, help="Print each turn's result as a JSON line.")
def chat(
    session_id: str | None,
    go_on: bool,
    messages: tuple[str, ...],
    ttl: int | None,
    config: str | None,
    as_json: bool,
) -> None:
    """Talk with the model and its tools: each line is a turn, planned and run like `aeon run`, and later turns
    see the earlier ones ("now double that").

    Exit status: 0 when every turn completed, 1 when one did not, 2 when the conversation could not start, 130
    on Ctrl-C (the turn is kept: `aeon chat --session ID` finishes it).
    """
    from aeon_plugins.sessions import Session, sessions

    if session_id and go_on:
        raise click.UsageError(
            "--session and --continue cannot go together: name one conversation, or the last"
        )
    with _engine_for(config) as engine:
        if go_on:
            known = sessions(engine.state_store)
            if not known:
                _fail("no conversation to continue yet: start one with aeon chat")
            session_id = known[0].session_id
        session = Session(engine, session_id)
        if session_id and not session.turns():
            _fail(f"no conversation {session_id!r} in the state store (aeon sessions lists them)")
        if not as_json:
            click.echo(f"session {session.id} (aeon chat --session {session.id} goes on with it)", err=True)
        statuses = []
        said = iter(messages) if messages else _typed()
        try:
            for message in said:
                statuses.append(_turn(session, message, ttl, as_json))
        except KeyboardInterrupt:
            click.echo(
                f"\nInterrupted: the turn under way is kept; aeon chat --session {session.id} finishes it.",
                err=True,
            )
            sys.exit(130)
    sys.exit(0 if all(status == "completed" for status in statuses) else 1)


def _turn(session: Any, message: str, ttl: int | None, as_json: bool) -> str:
    try:
        run = session.start(message, ttl=ttl)
    except AeonError as exc:
        _fail(exc)
    with run:
        try:
            if as_json:
                result = run.execute().to_dict()
                keys = ("run_id", "status", "answer", "message", "verification")
                echo_json({key: result[key] for key in keys})
            else:
                from aeon_cli.live import LiveView

                result = LiveView(message).run(run, run)
        except AeonError as exc:  # the turn could not be stored (another process took it meanwhile)
            _fail(exc)
    return str(result["status"])


def _typed() -> Iterator[str]:
    """Lines typed at the prompt, until one says goodbye or the input ends."""
    while True:
        try:
            line = click.prompt("you", prompt_suffix="> ", default="", show_default=False, err=True)
        except (EOFError, click.Abort):
            return
        if line.strip().lower() in _GOODBYE:
            return
        if line.strip():
            yield line.strip()


@click.command("sessions")
@click.option("--config", type=click.Path(dir_okay=False), help="aeon.toml to use.")
@click.option("--json", "as_json", is_flag=True, help="Print the sessions as a JSON list.")
def list_sessions(config: str | None, as_json: bool) -> None:
    """List the conversations, most recent first: session id, turns, last status, updated, first message."""
    from aeon_plugins.sessions import sessions

    with _engine_for(config) as engine:
        try:
            found = [session.to_dict() for session in sessions(engine.state_store)]
        except AeonError as exc:
            _fail(exc)
    if as_json:
        echo_json(found)
        return
    if not found:
        click.echo("no conversations yet: aeon chat starts one", err=True)
    for session in found:
        first = scrub_secrets(session["started_with"])
        first = first if len(first) <= 50 else first[:49] + "…"
        click.echo(
            f"{session['session_id']}  {session['turns']:>3} turns  {session['status']:<11}  "
            f"{session['updated']}  {first}"
        )
