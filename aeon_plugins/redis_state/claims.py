"""Who drives a run of the ``redis`` state store: ownership per claim, as in the ``sqlite`` store.

A claim records a fresh random token with its pid and host in the run's hash; every write checks the token
still holds the run. A run held by a live claim is refused; a claim whose process is gone (same host, pid not
running) is stale and can be taken; a claim from another host is taken only with ``take_over``. Taking a claim
is a compare-and-set on the token read, so of two processes racing for a stale run exactly one gets it.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Final

from aeon_kernel import RunStoreError
from aeon_kernel.kit import check_claim, failure_text, is_utf8

from .encoding import _decoded
from .reading import _Reading
from .scripts import _Refused

_OWNER: Final = ("owner_pid", "owner_host", "owner_token")

#: The tokens of the claims live in this process (threads and Engines share it): a run whose recorded owner is
#: this process and whose token is here is being driven right now; any other token with this pid is stale.
_LIVE_CLAIMS: set[str] = set()


class _Claims(_Reading):
    """A store's claims: taking, holding and letting go of runs."""

    _host: str
    _lock: threading.Lock
    _claims: dict[str, str]

    def claim(self, run_id: str, *, take_over: bool = False) -> None:
        """Take the run for a new claim; refused while another live claim (any process, thread or Engine) holds it.

        A claim recorded by another host cannot be checked from here: it is refused unless ``take_over`` (the
        user says that host, or its process, is gone: ``aeon resume --take-over``)."""
        what = f"cannot claim run {run_id!r}"
        if not is_utf8(run_id):
            raise self._no_run(run_id)
        token = os.urandom(16).hex()
        key = self._keys(run_id)[0]
        with self._holding(run_id, token):
            kind, row = self._call(
                what,
                lambda: self._snapshot(lambda p: p.type(key).hmget(key, ["status", *_OWNER])),
                retry=True,
            )
            if _decoded(kind) == "none":
                raise self._missing(run_id)
            if _decoded(kind) != "hash" or not isinstance(row, list):
                raise self._wrong_type(run_id, key, _decoded(kind), "a hash")
            try:
                status, pid_text, host, held = (None if v is None else v.decode() for v in row)
                pid = None if pid_text is None else int(pid_text)
                if status is None:
                    raise ValueError("it has no status field")
                if pid is not None and pid <= 0:
                    raise ValueError(f"owner_pid is {pid}")
            except (UnicodeDecodeError, ValueError, AttributeError) as exc:
                raise RunStoreError(
                    f"run {run_id!r} in {self._display} is corrupt: the status and owner in {key} are not what "
                    f"Aeon writes ({failure_text(exc)[:200]}); it cannot be resumed (start it again, and delete its "
                    f"keys: {', '.join(self._keys(run_id))})"
                ) from None
            check_claim(
                run_id, status, pid, host, held, here=self._host, live=_LIVE_CLAIMS, take_over=take_over
            )
            args = [held or "", token, str(os.getpid()), self._host]
            try:
                self._script(what, "claim", [key], args, landed=lambda: self._holds(key, token))
            except _Refused as refused:
                if refused.code == "changed":
                    raise RunStoreError(
                        f"run {run_id!r} was claimed by another run (another process, or another thread or "
                        "Engine of this one) while this one was claiming it; it is being run there"
                    ) from None
                if refused.code == "finished":
                    raise RunStoreError(f"run {run_id!r} finished meanwhile; nothing to resume") from None
                if refused.code == "missing":
                    raise self._missing(run_id) from None
                raise self._refusal(what, refused, [key]) from None

    def delete_run(self, run_id: str) -> bool:
        """Delete the run's keys and its place in the index in one script; refused while a live claim holds it
        (as ``claim`` refuses), or when it was claimed since its owner was read."""
        what = f"cannot delete run {run_id!r}"
        if not is_utf8(run_id):
            return False
        keys = self._keys(run_id)
        kind, row = self._call(
            what,
            lambda: self._snapshot(lambda p: p.type(keys[0]).hmget(keys[0], ["status", *_OWNER])),
            retry=True,
        )
        status, pid_text, host, held = (
            (None if v is None else v.decode("utf-8", "replace") for v in row)
            if _decoded(kind) == "hash" and isinstance(row, list)
            else (None,) * 4
        )
        if status == "running" and pid_text is not None and pid_text.isdigit():
            check_claim(run_id, status, int(pid_text), host, held, here=self._host, live=_LIVE_CLAIMS)
        try:
            removed = self._call(
                what,
                lambda: self._scripts["delete"](keys=[*keys, self._index], args=[run_id, held or ""]),
                retry=True,  # harmless twice
            )
        except _Refused:
            raise RunStoreError(
                f"run {run_id!r} was claimed while it was being deleted; it is kept"
            ) from None
        return bool(removed)

    def release(self, run_id: str) -> None:
        """Let go of this store's claim on the run (another claim's hold is left alone)."""
        token = self._claims.get(run_id)
        if token is None:
            return
        key = self._keys(run_id)[0]
        try:
            self._call(
                f"cannot release run {run_id!r}",
                lambda: self._scripts["release"](keys=[key], args=[token]),
                retry=True,  # harmless twice: it deletes the owner only while this token is it
            )
        finally:
            self._let_go(run_id)

    def _holds(self, key: str, token: str) -> bool:
        return bool(self._client.hget(key, "owner_token") == token.encode())

    @contextmanager
    def _holding(self, run_id: str, token: str) -> Iterator[None]:
        """The claim ``token`` is live from before its script runs (so a claim racing it in this process sees it
        live, never stale); taken back when the claim fails."""
        with self._lock:
            previous = self._claims.get(run_id)
            _LIVE_CLAIMS.add(token)
        try:
            yield
        except BaseException:
            _LIVE_CLAIMS.discard(token)
            raise
        with self._lock:
            if previous is not None:
                _LIVE_CLAIMS.discard(previous)
            self._claims[run_id] = token

    def _let_go(self, run_id: str) -> None:
        with self._lock:
            token = self._claims.pop(run_id, None)
            if token is not None:
                _LIVE_CLAIMS.discard(token)
