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


def read_output_schema(value: str | None) -> dict[str, Any] | None:
    """``aeon run --schema``: a JSON Schema written inline (``'{...}'``) or the path of a file holding one."""
    if value is None:
        return None
    import json
    from pathlib import Path

    text, where = value, "--schema"
    if not value.lstrip().startswith("{"):
        path = Path(value)
        if not path.is_file():
            raise click.BadParameter(f"{value!r} is neither a JSON object nor a file", param_hint="--schema")
        try:
            text, where = path.read_text(encoding="utf-8"), str(path)
        except (OSError, UnicodeDecodeError) as exc:
            raise click.BadParameter(f"cannot read {value!r}: {exc}", param_hint="--schema") from None
    try:
        schema = json.loads(text)
    except ValueError as exc:
        raise click.BadParameter(f"{where} is not JSON: {exc}", param_hint="--schema") from None
    from aeon_kernel.errors import ValidationError
    from aeon_kernel.output_types import check_output_schema

    try:
        return check_output_schema(schema)
    except ValidationError as exc:
        raise click.BadParameter(str(exc), param_hint="--schema") from None


output_schema_option = click.option(
    "--schema",
    "output_schema",
    callback=lambda _ctx, _param, value: read_output_schema(value),
    help="A JSON Schema (inline '{...}' or a file) for a typed output: one more step writes the result under it, "
    "checked like every model output; the result's `output`.",
)
