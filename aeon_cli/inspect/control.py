"""Step-through's hand-off between the page and the run it drives (``aeon run --inspect``, spec 004 §10.7).

The command's own thread drives the run; the server's threads answer the page. They meet only here. Before each
cycle the run publishes what the page is to show (an immutable moment: no page ever reads a run mid-cycle) and
waits in :meth:`Control.pause` for the page's action: *step* (one cycle, then pause again), *continue* (no more
pauses) or *stop* (end here; the run stays resumable). An action is taken only from a page that saw the moment
it acts on (``seen``): a click on a page that is out of date, or a second click while a step runs, is refused
rather than run one cycle more than was asked for.

The token is the page's proof that it was served by this server (CSRF: another site cannot read it); it is
compared in constant time by the app. It is not the session's secret (the cookie, :mod:`aeon_cli.inspect.gate`),
which no page holds: a script could read this one from the page, never that one.
"""

from __future__ import annotations

import secrets
import threading
import time
from dataclasses import dataclass
from typing import Any, Final, Literal, get_args

Action = Literal["step", "continue", "stop", "approve", "deny"]
#: ``paused``: waiting for the page; ``stepping``: one cycle running; ``continuing``: running to the end;
#: ``stopping``: a stop asked for, taken at the next cycle boundary; ``waiting``: the run waits for a person's
#: approval of a call (decision 0021), answered by *approve* or *deny*; ``finished`` / ``stopped``: the run's end
Mode = Literal["paused", "stepping", "continuing", "stopping", "waiting", "finished", "stopped"]
ACTIONS: Final[tuple[str, ...]] = get_args(Action)
ENDED: Final = frozenset({"finished", "stopped"})
#: how often a waiting thread looks up (Ctrl-C reaches a waiting command within this)
_TICK: Final = 0.25


class Refused(Exception):
    """An action the run cannot take now; the message says why (the page shows it)."""


@dataclass(frozen=True)
class Published:
    """What the page sees: the moment the run published last, its number, and what the run is doing."""

    version: int
    mode: Mode
    #: the moment itself (:class:`aeon_cli.inspect.live.Moment`); None before the first
    moment: Any


class Control:
    """One step-through session's state, shared by the driving thread and the server's threads."""

    def __init__(self) -> None:
        #: embedded in the page; every control request must carry it
        self.token = secrets.token_urlsafe(32)
        self._lock = threading.Condition()
        self._published = Published(0, "stepping", None)
        self._action: Action | None = None
        self._stop_asked = False
        #: a denial's reason, and the mode a waiting run goes back to once answered
        self._reason = ""
        self._resume_mode: Mode = "stepping"
        #: the highest version a page was served at, and when a page last asked for anything
        self._delivered = -1
        self._last_seen: float | None = None

    # --- the driving thread --------------------------------------------------------------------------------------

    def pause(self, moment: Any) -> Action:
        """Publish ``moment`` (the run between cycles) and wait for what to do next: ``step``, ``continue`` (once
        continuing, every later pause returns at once) or ``stop``."""
        with self._lock:
            if self._stop_asked:
                return "stop"
            if self._published.mode == "continuing":
                self._publish(moment, "continuing")
                return "continue"
            self._action = None
            self._publish(moment, "paused")
            while self._action is None:
                self._lock.wait(_TICK)
            action, self._action = self._action, None
            return action

    def ask(self, moment: Any) -> tuple[Action, str]:
        """Publish ``moment`` (the run waiting for approval) and wait for the page's answer: ``approve``, ``deny``
        (with the reason the page gave) or ``stop``; a run that was continuing continues once answered."""
        with self._lock:
            if self._stop_asked:
                return "stop", ""
            self._resume_mode = self._published.mode if self._published.mode == "continuing" else "stepping"
            self._action = None
            self._publish(moment, "waiting")
            while self._action is None:
                self._lock.wait(_TICK)
            action, self._action = self._action, None
            return action, self._reason

    def end(self, moment: Any, mode: Literal["finished", "stopped"]) -> None:
        """The run ended (``finished``) or was stopped: the page shows ``moment`` and offers no more actions."""
        with self._lock:
            self._publish(moment, mode)

    def wait_delivered(self, timeout: float, recent: float = 3.0) -> bool:
        """Wait (at most ``timeout`` seconds) until a page has been served the last moment — so the page shows how
        the run ended before the server goes — unless no page asked for anything in the last ``recent`` seconds
        (nobody is watching)."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while self._delivered < self._published.version:
                now = time.monotonic()
                if now >= deadline or self._last_seen is None or now - self._last_seen > recent:
                    return False
                self._lock.wait(min(_TICK, deadline - now))
            return True

    # --- the server's threads ------------------------------------------------------------------------------------

    def look(self) -> Published:
        """What the page is to show now (a page asking is also a sign that somebody is watching)."""
        with self._lock:
            self._last_seen = time.monotonic()
            return self._published

    def served(self, version: int) -> None:
        """A page showing ``version`` was sent."""
        with self._lock:
            self._delivered = max(self._delivered, version)
            self._lock.notify_all()

    def act(self, action: Action, seen: int | None, reason: str = "") -> int:
        """Take the page's action and return the version that says so; :class:`Refused` says why not. ``seen`` is
        the version the page showed: a step or continue is taken only from the moment the run is paused at, an
        approval or a denial (``reason``) only from the moment it waits at."""
        with self._lock:
            published = self._published
            if published.mode in ENDED:
                raise Refused(f"the run has {published.mode}: there is nothing left to drive")
            if action in ("approve", "deny"):
                if published.mode != "waiting":
                    raise Refused("the run is not waiting for approval: there is nothing to answer")
                if seen is not None and seen != published.version:
                    raise Refused("this page is out of date: the run moved on since it was shown; reload it")
                if action == "deny" and not reason.strip():
                    raise Refused("say why the call is refused: the reason is recorded with the refusal")
                self._action, self._reason = action, reason.strip()
                self._publish(published.moment, self._resume_mode)
                return self._published.version
            if action == "stop":
                self._stop_asked = True
                if published.mode in ("paused", "waiting"):
                    self._action = "stop"
                elif published.mode != "stopping":
                    self._publish(published.moment, "stopping")
                self._lock.notify_all()
                return self._published.version
            if published.mode != "paused":
                raise Refused(
                    f"the run is not paused ({published.mode}): wait for it to pause, then act again"
                )
            if seen is not None and seen != published.version:
                raise Refused("this page is out of date: the run moved on since it was shown; reload it")
            self._action = action
            self._publish(published.moment, "stepping" if action == "step" else "continuing")
            return self._published.version

    def wait_change(self, version: int, timeout: float) -> None:
        """Wait (at most ``timeout``) for a version after ``version``: an action's answer then shows its effect
        when the cycle is quick, instead of a page that says the run is still busy."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while self._published.version <= version:
                left = deadline - time.monotonic()
                if left <= 0:
                    return
                self._lock.wait(left)

    # --- internals -----------------------------------------------------------------------------------------------

    def _publish(self, moment: Any, mode: Mode) -> None:
        self._published = Published(self._published.version + 1, mode, moment)
        self._lock.notify_all()
