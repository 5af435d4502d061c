"""A run shown through the live view `aeon run` prints, captured as text."""

from __future__ import annotations

import io
from typing import Any

from rich.console import Console

from aeon_cli.live import LiveView
from aeon_kernel import Engine


def live_view_of(engine: Engine, request: str, width: int = 200) -> tuple[dict[str, Any], str]:
    """Run ``request`` on ``engine`` through the live view; its result and what the view printed."""
    out = io.StringIO()
    with engine:
        run = engine.orchestrator().start(request)
        view = LiveView(request, console=Console(file=out, width=width, force_terminal=False))
        with run:
            result = view.run(run, run)
    return result, out.getvalue()
