"""Driving a run with a preview before every cycle, as the inspector's step-through does: each preview must change
nothing and say what the cycle then does."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aeon_kernel import LogEntry, Preview, Run


def previewed(run: Run, calls: Callable[[], int] = lambda: 0) -> list[tuple[Preview, LogEntry]]:
    """Run ``run`` to its end, asking ``run.preview()`` (twice) before each cycle; every cycle with its preview.

    Asserts that a preview changes nothing — the state (its memo included), and ``calls()``, a count of the
    model's calls — and agrees with the cycle: its phase and step id are the cycle record's, and it is None
    exactly when the run ends instead of running a cycle.
    """
    cycles: list[tuple[Preview, LogEntry]] = []
    while True:
        before, made = run.state.model_dump(mode="json"), calls()
        preview = run.preview()
        assert run.preview() == preview, "a second preview differs from the first"
        assert run.state.model_dump(mode="json") == before, "the preview changed the state"
        assert calls() == made, "the preview called the model"
        entry = run.next()
        if entry is None:
            assert preview is None, f"the preview said {preview} but the run ended"
            return cycles
        assert preview is not None, f"cycle {entry.step_number} ({entry.phase}) ran but the preview said none"
        assert (preview.phase, preview.step_id) == (entry.phase, entry.step_id), (preview, entry.step_number)
        cycles.append((preview, entry))


def shown(cycles: list[tuple[Preview, LogEntry]]) -> list[tuple[str, Any]]:
    """Each preview's kind and title."""
    return [(preview.kind, preview.title) for preview, _ in cycles]
