"""``aeon init DIR --template local|service|ray``: the click command. Only click is imported with ``aeon``; Jinja
and the package metadata are read when the command runs (:mod:`aeon_cli.init.project`)."""

from __future__ import annotations

import sys
from typing import Final

import click

from aeon_kernel.errors import AeonError
from aeon_kernel.secrets import scrub_secrets

EXIT_SETUP_ERROR: Final = 2
#: :data:`aeon_cli.init.project.TEMPLATES`, written out so that ``aeon --help`` does not import it
TEMPLATE_NAMES: Final = ("local", "service", "ray")


@click.command("init")
@click.argument("directory", metavar="DIR", type=click.Path(file_okay=False))
@click.option(
    "--template",
    type=click.Choice(TEMPLATE_NAMES),
    default="local",
    show_default=True,
    help="local: the embedded model, SQLite; service: Redis state and memory, a model server; ray: service on a "
    "Ray cluster.",
)
@click.option("--name", help="The project's name (default: DIR's name): lower-case letters, digits, hyphens.")
@click.option(
    "--force",
    is_flag=True,
    help="Write into a non-empty DIR, replacing the files the template writes (other files stay).",
)
def init_project(directory: str, template: str, name: str | None, force: bool) -> None:
    """Lay out a project a team can deploy in DIR: aeon.toml, flows/, a pinned requirements.txt, a Dockerfile, a
    compose file, a Ray cluster config (ray), and a README of the bootstrap steps and the smoke command.

    requirements.txt pins what is installed here, so install the extras the template needs first. Exit status:
    0 created, 2 not created (DIR not empty without --force, an invalid name, a package not installed).
    """
    from aeon_cli.init.project import create, report

    try:
        created = create(directory, template, name=name, force=force)
    except AeonError as exc:
        click.echo(f"Error: {scrub_secrets(str(exc))}", err=True)
        sys.exit(EXIT_SETUP_ERROR)
    click.echo(report(created))
