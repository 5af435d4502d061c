"""``python -m aeon_cli`` is the ``aeon`` command."""

from aeon_cli import command

command()
