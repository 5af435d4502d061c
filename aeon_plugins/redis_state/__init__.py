"""The ``redis`` state store: durable runs on a Redis server, so ``aeon runs`` and ``aeon resume`` see every run
that any process, on any machine reaching the server, has recorded.

A run is kept as deltas under ``{namespace}`` (``aeon:`` by default), like the ``sqlite`` store's three tables:

* ``{namespace}run:{run_id}`` — a hash of the run's counters and fields (request, status, TTL, cycle, current
  step, manifest, result, owner), rewritten field by field per cycle;
* ``{namespace}steps:{run_id}`` — a hash of the plan's steps, field ``0``, ``1``, … → the step's JSON, a field
  rewritten only when its step changes (the whole hash when the plan does);
* ``{namespace}cycles:{run_id}`` — a list of the cycle records, one appended per cycle;
* ``{namespace}runs`` — a sorted set of every run id, scored by ``{namespace}runs:created`` (a counter the server
  increments), so ``list_runs`` is newest first in the order the server saw the runs start, whatever the clocks of
  the machines that started them say.

Every write is one Lua script, so it is atomic and isolated: it checks the keys hold what Aeon writes, checks
that this store's claim still holds the run (its random token is the run's ``owner_token``) and, for a cycle,
that the cycle follows the ones stored, before it writes anything — a run taken over by another claim is never
overwritten, and a failed check writes nothing. Reads of a run are one ``MULTI``/``EXEC``, a consistent snapshot.

Ownership is per claim, as in the ``sqlite`` store: a claim records a fresh random token with its pid and host;
a run held by a live claim — another process, or another thread or Engine of this one — is refused; a claim
whose process is gone (same host, pid not running) is stale and can be taken; a claim from another host cannot
be checked and is taken only with ``take_over``. Taking a claim is a compare-and-set on the token read, so of
two processes racing for a stale run exactly one gets it.

Everything is text: JSON, decimal integers, UTF-8 — nothing is pickled, and every secret the process knows is
scrubbed before it is written. What the server holds is distrusted when read: a key of the wrong type, a field
that is missing, not UTF-8, not a number or not JSON is a ``RunStoreError`` naming the key and what to do — never
a traceback, and never "no run" for a run that is there but damaged. A server that cannot be reached is a
``RunStoreError`` naming its URL (never the password). Targets one Redis server, not Redis Cluster.

The store is a package: :mod:`~aeon_plugins.redis_state.scripts` holds the Lua scripts,
:mod:`~aeon_plugins.redis_state.connection` the client and its calls, :mod:`~aeon_plugins.redis_state.reading`
the reads and what they distrust, :mod:`~aeon_plugins.redis_state.claims` the claims, and
:mod:`~aeon_plugins.redis_state.encoding` the text that goes in and comes out.
"""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Sequence
from typing import Any, Final

from pydantic import SecretStr

from aeon_kernel import (
    ConfigError,
    LogEntry,
    OrchestrationState,
    Register,
    RunStoreError,
    StateStore,
    hookimpl,
)
from aeon_kernel.kit import (
    is_utf8,
    storable_json,
    storable_model_json,
    storable_result,
    storable_text,
    utc_now,
)

from .claims import _LIVE_CLAIMS, _OWNER, _Claims
from .connection import _redact
from .encoding import _flat, _step_pairs
from .reading import FORMAT as FORMAT
from .scripts import _Refused

DEFAULT_URL: Final = "redis://127.0.0.1:6379/0"


class RedisStateStore(_Claims, StateStore):
    """Runs on a Redis server; ``namespace`` prefixes every key, keeping several stores apart on one server (a
    ``redis`` memory may share the namespace: its keys are ``{namespace}index`` and ``{namespace}k:...``)."""

    def __init__(
        self,
        url: str | SecretStr = DEFAULT_URL,
        password: str | SecretStr | None = None,
        namespace: str = "aeon:",
        socket_timeout: float = 5.0,
        ttl_days: float | None = None,
    ) -> None:
        self._import_client()
        raw_url = url.get_secret_value() if isinstance(url, SecretStr) else url
        raw_password = password.get_secret_value() if isinstance(password, SecretStr) else password
        if not isinstance(raw_url, str):
            raise ConfigError(f"redis state store: url must be a string, got {type(raw_url).__name__}")
        if raw_password is not None and not isinstance(raw_password, str):
            raise ConfigError("redis state store: password must be a string (or a secret reference)")
        if not isinstance(namespace, str) or not namespace or not is_utf8(namespace):
            raise ConfigError(f"redis state store: namespace must be a non-empty string, got {namespace!r}")
        if (
            isinstance(socket_timeout, bool)
            or not isinstance(socket_timeout, int | float)
            or socket_timeout <= 0
        ):
            raise ConfigError(
                f"redis state store: socket_timeout must be a positive number, not {socket_timeout!r}"
            )
        if ttl_days is not None and (
            isinstance(ttl_days, bool) or not isinstance(ttl_days, int | float) or not 0 < ttl_days < 1e6
        ):
            raise ConfigError(
                f"redis state store: ttl_days must be a positive number of days, not {ttl_days!r}"
            )
        self._display, self._secrets = _redact(raw_url)
        if raw_password:
            self._secrets.append(raw_password)
        self.namespace = namespace
        self.url = self._display  # what messages and `aeon runs` show: no password
        self._expire = "" if ttl_days is None else str(max(1, round(ttl_days * 86400)))
        self._lock = threading.Lock()
        #: the runs this store's claims hold, and their tokens
        self._claims: dict[str, str] = {}
        self._host = socket.gethostname()
        self._connect(raw_url, raw_password, socket_timeout)

    def __repr__(self) -> str:
        return f"RedisStateStore(url={self._display!r}, namespace={self.namespace!r})"

    # --- writing -----------------------------------------------------------------------------------------------

    def create_run(self, state: OrchestrationState, manifest: dict[str, Any]) -> None:
        run_id = state.run_id
        if not is_utf8(run_id):
            raise RunStoreError(f"run {run_id!r}: a run id must be UTF-8 text to be stored in Redis")
        now, token = utc_now(), os.urandom(16).hex()
        fields: dict[str, str] = {
            "format": FORMAT,
            "request": storable_text(state.request),
            "status": state.status,
            "ttl_remaining": str(state.ttl_remaining),
            "cycle": str(state.cycle),
            "manifest": storable_json(manifest),
            "started": now,
            "updated": now,
            "owner_token": token,
            "owner_pid": str(os.getpid()),
            "owner_host": self._host,
        }
        if isinstance(manifest.get("session"), str):  # a conversation's turn, for list_runs
            fields["session"] = storable_text(manifest["session"])
        if state.plan is not None:
            fields["goal"] = storable_text(state.plan.goal)
        if state.current_step_id is not None:
            fields["current_step_id"] = storable_text(state.current_step_id)
        if state.scheduler_state:
            fields["scheduler_state"] = storable_json(state.scheduler_state)
        steps = _step_pairs(state.plan, range(len(state.plan.steps))) if state.plan is not None else []
        keys = self._keys(run_id)
        args = [run_id, str(len(fields)), *_flat(fields), *steps]
        every: list[str] = [*keys, self._index, self._created]
        what = f"cannot record run {run_id!r}"
        with self._holding(run_id, token):
            try:
                self._script(what, "create", every, args, landed=lambda: self._holds(keys[0], token))
            except _Refused as refused:
                if refused.code == "exists":
                    raise RunStoreError(
                        f"{what} in {self._display}: keys of a run with that id are there already ({keys[0]})"
                    ) from None
                raise self._refusal(what, refused, every) from None

    def commit_cycle(
        self, state: OrchestrationState, entry: LogEntry, llm_outputs: list[dict[str, Any]]
    ) -> None:
        steps: list[str] = []
        replace = False
        if state.plan is not None:
            if entry.phase == "step":  # a step cycle changes its own step only
                changed = [i for i, s in enumerate(state.plan.steps) if s.step_id == entry.step_id]
                steps = _step_pairs(state.plan, changed)
            else:  # a new or refined plan: steps may have come, gone or moved
                replace, steps = True, _step_pairs(state.plan, range(len(state.plan.steps)))
        # The plan snapshot is left out: the steps hash holds the plan, and load() rebuilds each snapshot.
        cycle_entry, outputs = storable_model_json(entry, {"plan_state"}), storable_json(llm_outputs)
        record = f'{{"entry": {cycle_entry}, "llm_outputs": {outputs}}}'
        self._write(
            state,
            f"cannot store cycle {entry.step_number} of run {state.run_id!r}",
            record=(entry.step_number - 1, record),
            steps=steps,
            replace_steps=replace,
        )

    def finish_run(self, state: OrchestrationState, result: dict[str, Any]) -> None:
        """Record the end of the run; when its result cannot be stored whole, a summary of it (never left running).
        With ``ttl_days``, the run's keys expire that long after it ends."""
        text = storable_result(state, result)
        try:
            self._write(
                state,
                f"cannot record the end of run {state.run_id!r}",
                extra={"result": text},
                drop=_OWNER,
                expire=self._expire,
            )
        finally:  # this claim is over either way (a claim left in the store is stale once its token is not live)
            self._let_go(state.run_id)

    def close(self) -> None:
        with self._lock:
            for token in self._claims.values():
                _LIVE_CLAIMS.discard(token)
            self._claims.clear()
        self._client.close()

    # --- helpers -----------------------------------------------------------------------------------------------

    def _write(
        self,
        state: OrchestrationState,
        what: str,
        *,
        record: tuple[int, str] | None = None,
        steps: Sequence[str] = (),
        replace_steps: bool = False,
        extra: dict[str, str] | None = None,
        drop: Sequence[str] = (),
        expire: str = "",
    ) -> None:
        """The run's counters (and ``extra``), the ``steps`` pairs and the cycle ``record`` in one script, which
        refuses — writing nothing — when another claim holds the run, or the record does not follow the stored."""
        run_id = state.run_id
        if not is_utf8(run_id):
            raise self._no_run(run_id)
        token = self._claims.get(run_id, "")
        fields = {
            "status": state.status,
            "ttl_remaining": str(state.ttl_remaining),
            "cycle": str(state.cycle),
            "updated": utc_now(),
            **(extra or {}),
        }
        gone = list(drop)
        for name, value in (
            ("goal", None if state.plan is None else state.plan.goal),
            ("current_step_id", state.current_step_id),
        ):
            if value is None:
                gone.append(name)
            else:
                fields[name] = storable_text(value)
        if (
            state.scheduler_state
        ):  # what a scheduler must remember across a crash (the linear one needs nothing)
            fields["scheduler_state"] = storable_json(state.scheduler_state)
        before, text = ("", "") if record is None else (str(record[0]), record[1])
        args = [
            token,
            before,
            text,
            "1" if replace_steps else "0",
            expire,
            str(len(fields)),
            *_flat(fields),
            str(len(gone)),
            *gone,
            *steps,
        ]
        keys = self._keys(run_id)

        def landed() -> bool:
            if record is not None:  # each record is unique (its cycle number, its timestamp)
                return bool(self._client.lindex(keys[2], -1) == record[1].encode())
            wanted = extra or {}  # the end of a run: its result
            return bool(wanted) and self._client.hmget(keys[0], list(wanted)) == [
                v.encode() for v in wanted.values()
            ]

        try:
            self._script(what, "write", list(keys), args, landed=landed)
        except _Refused as refused:
            if refused.code == "taken":
                raise RunStoreError(
                    f"run {run_id!r} in {self._display} is no longer held by this run: another claim took it over"
                ) from None
            if refused.code == "missing":
                raise RunStoreError(
                    f"{what} in {self._display}: the run is not there ({keys[0]} is gone: deleted, or expired)"
                ) from None
            if refused.code == "cycles" and record is not None:
                raise RunStoreError(
                    f"{what} in {self._display}: {keys[2]} holds {refused.detail} cycle records, not {record[0]}; "
                    "something else wrote to this run (another process driving it?). Check `aeon runs`."
                ) from None
            raise self._refusal(what, refused, keys) from None


@hookimpl
def aeon_register_state_stores(register: Register) -> None:
    register("redis", RedisStateStore)
