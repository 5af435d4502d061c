"""``aeon inspect [LOG ...]``: the click command. Only click is imported with ``aeon``; the server, Jinja and the
sources are imported when the command runs.

The secrets ``aeon.toml`` references (``$env``, ``$file``) are registered before anything is served, so a value a
store or a log kept from before it was a secret is scrubbed from every page as well; so is the session's own secret
(the token of the URL printed on stdout, :mod:`aeon_cli.inspect.gate`).
"""

from __future__ import annotations

import sys
from typing import Any, Final

import click

from aeon_kernel.errors import AeonError
from aeon_kernel.secrets import register_secret, scrub_secrets

EXIT_SETUP_ERROR: Final = 2


def register_config_secrets(config: Any) -> None:
    """Resolve (and so register) each ``$env``/``$file`` reference of the configuration's options that resolves;
    one that does not (an unset variable) is skipped: the inspector needs no component built."""
    from aeon_kernel.config import resolve_secrets

    choices = [*config.choices.values(), *config.telemetry, *config.policies, config.state, config.artifacts]
    options = [choice.options for choice in choices if choice is not None]
    options += list(config.tool_options.values())
    for table in options:
        for key, value in table.items():
            try:
                resolve_secrets(value, key)
            except AeonError:
                continue


@click.command("inspect")
@click.argument("logs", nargs=-1, type=click.Path(exists=True, dir_okay=False))
@click.option(
    "--config",
    type=click.Path(dir_okay=False),
    help="aeon.toml whose [state] store to read (default: $AEON_CONFIG, ./aeon.toml; else the user data "
    "directory's, where `aeon run` records).",
)
@click.option(
    "--port",
    type=click.IntRange(min=0, max=65535),
    default=0,
    help="Port on 127.0.0.1 (default: a free one).",
)
@click.option("--no-browser", is_flag=True, help="Print the URL only; do not open a browser.")
def inspect_runs(logs: tuple[str, ...], config: str | None, port: int, no_browser: bool) -> None:
    """Browse recorded runs in a local web app: the list, each run's cycles (model calls, tool calls, repairs,
    plan), flow graphs, and two runs side by side. Read-only; served on 127.0.0.1 until Ctrl-C (or SIGTERM).

    Shows the state store `aeon run` records into, and each JSONL log LOGS names (--log files, runs.jsonl).
    The URL printed carries this session's secret: only a browser that opened it is served.
    """
    from aeon_cli.inspect.local import Browser, stopping
    from aeon_cli.inspect.server import start
    from aeon_cli.inspect.sources import open_catalog
    from aeon_kernel.config import load_config

    try:
        register_config_secrets(load_config(config))
        catalog = open_catalog(config, logs)
    except AeonError as exc:
        click.echo(f"Error: {scrub_secrets(str(exc))}", err=True)
        sys.exit(EXIT_SETUP_ERROR)
    try:
        server = start(catalog, port)
    except OSError as exc:
        catalog.close()
        click.echo(f"Error: cannot serve on 127.0.0.1:{port}: {exc.strerror or exc}", err=True)
        sys.exit(EXIT_SETUP_ERROR)
    browser = Browser()
    # Ctrl-C and SIGTERM end it alike (status 0), even where SIGINT was inherited ignored (a background job)
    with stopping():
        try:
            register_secret(server.gate.token)  # never shown on a page, whatever a run holds
            # the URL with the secret: to this user's terminal only (never scrubbed: it is what they open)
            click.echo(f"Aeon inspector: {server.login()}  (read-only; Ctrl-C to stop)", err=False)
            sys.stdout.flush()
            if not no_browser:
                browser.open(server.login())
            server.serve_forever()
        except KeyboardInterrupt:
            pass
        finally:
            server.server_close()
            catalog.close()
            browser.close()
