"""The face: the ``aeon`` command (click, rich, jinja2), the web inspector, ``aeon init`` and ``aeon plugin new``.

Never imported by ``import aeon_kernel`` or by an embedding program; its libraries are the ``[cli]`` extra.
"""

from __future__ import annotations

import sys

INSTALL = "pip install 'aeon-core[cli]'"


def command() -> None:
    """The ``aeon`` console script: the command line when its libraries are installed, else how to get them."""
    try:
        from aeon_cli.main import main as command
    except ModuleNotFoundError as exc:
        if exc.name not in {"click", "rich", "jinja2", "platformdirs", "yaml"}:
            raise
        sys.stderr.write(f"aeon: the command line needs {exc.name!r}, which is not installed: {INSTALL}\n")
        raise SystemExit(2) from None
    command()
