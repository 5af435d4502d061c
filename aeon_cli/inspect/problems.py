"""What the inspector's readers raise when something cannot be shown (its own module: the run sources and the
artifact readers both raise it, and neither imports the other)."""

from __future__ import annotations


class Unreadable(LookupError):
    """A run (or a whole source) that cannot be shown; the message says why."""
