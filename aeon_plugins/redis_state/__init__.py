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
"""

from __future__ import annotations

import json
import os
import socket
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TypeVar, cast
from urllib.parse import parse_qsl, urlsplit

from pydantic import SecretStr

from aeon_kernel import (
    ConfigError,
    LogEntry,
    OrchestrationState,
    Plan,
    PlanStep,
    Register,
    RunStoreError,
    RunSummary,
    StateStore,
    StepStatus,
    StoredRun,
    hookimpl,
    is_utf8,
    scrub_secrets,
    scrub_secrets_json,
    utc_now,
)

if TYPE_CHECKING:
    import redis

T = TypeVar("T")

DEFAULT_URL: Final = "redis://127.0.0.1:6379/0"
#: What a run hash's ``format`` field holds: a hash without it is not Aeon's.
FORMAT: Final = "1"
#: Runs whose summaries one pipeline fetches (``list_runs``): bounds the size of one reply.
_BATCH: Final = 1000
_OWNER: Final = ("owner_pid", "owner_host", "owner_token")

#: The tokens of the claims live in this process (threads and Engines share it): a run whose recorded owner is
#: this process and whose token is here is being driven right now; any other token with this pid is stale.
_LIVE_CLAIMS: set[str] = set()

# --- the scripts: each checks before it writes, so a refusal (an error reply) leaves everything as it was -------

_LUA_HELPERS: Final = """
local function hset(key, first, last)
  for i = first, last, 1000 do
    redis.call('HSET', key, unpack(ARGV, i, math.min(i + 999, last)))
  end
end
-- nil when KEYS[n] is one of the kinds, else the refusal 'AEON type n kind' (checked before anything is written)
local function unexpected(n, ...)
  local found = redis.call('TYPE', KEYS[n]).ok
  for _, kind in ipairs({...}) do
    if found == kind then return nil end
  end
  return redis.error_reply('AEON type ' .. n .. ' ' .. found)
end
"""

#: KEYS run, steps, cycles, index, created. ARGV run_id, n, n field/value pairs of the run, then the step pairs.
_CREATE: Final = (
    _LUA_HELPERS
    + """
if redis.call('EXISTS', KEYS[1], KEYS[2], KEYS[3]) > 0 then
  return redis.error_reply('AEON exists')
end
local refused = unexpected(4, 'zset', 'none') or unexpected(5, 'string', 'none')
if refused then return refused end
local order = redis.call('INCR', KEYS[5])
local n = tonumber(ARGV[2])
hset(KEYS[1], 3, 2 + 2 * n)
hset(KEYS[2], 3 + 2 * n, #ARGV)
redis.call('ZADD', KEYS[4], order, ARGV[1])
return order
"""
)

#: KEYS run, steps, cycles. ARGV token ('' = unchecked), cycles stored before this one ('' = no record), the
#: record, '1' to replace every step, seconds to expire in ('' = never), then n and n field/value pairs to set,
#: m and m fields to delete, and the step pairs to the end.
_WRITE: Final = (
    _LUA_HELPERS
    + """
local found = redis.call('TYPE', KEYS[1]).ok
if found == 'none' then return redis.error_reply('AEON missing') end
local refused = unexpected(1, 'hash') or unexpected(2, 'hash', 'none') or unexpected(3, 'list', 'none')
if refused then return refused end
if ARGV[1] ~= '' and redis.call('HGET', KEYS[1], 'owner_token') ~= ARGV[1] then
  return redis.error_reply('AEON taken')
end
if ARGV[2] ~= '' then
  local stored = redis.call('LLEN', KEYS[3])
  if stored ~= tonumber(ARGV[2]) then return redis.error_reply('AEON cycles ' .. stored) end
end
local i = 6
local n = tonumber(ARGV[i])
hset(KEYS[1], i + 1, i + 2 * n)
i = i + 2 * n + 1
n = tonumber(ARGV[i])
if n > 0 then redis.call('HDEL', KEYS[1], unpack(ARGV, i + 1, i + n)) end
i = i + n + 1
if ARGV[4] == '1' then redis.call('DEL', KEYS[2]) end
hset(KEYS[2], i, #ARGV)
if ARGV[2] ~= '' then redis.call('RPUSH', KEYS[3], ARGV[3]) end
if ARGV[5] ~= '' then
  for _, key in ipairs(KEYS) do redis.call('EXPIRE', key, ARGV[5]) end
end
return 1
"""
)

#: KEYS run. ARGV the owner token read ('' = none), then the new owner: token, pid, host.
_CLAIM: Final = (
    _LUA_HELPERS
    + """
if redis.call('TYPE', KEYS[1]).ok == 'none' then return redis.error_reply('AEON missing') end
local refused = unexpected(1, 'hash')
if refused then return refused end
if redis.call('HGET', KEYS[1], 'status') ~= 'running' then return redis.error_reply('AEON finished') end
if (redis.call('HGET', KEYS[1], 'owner_token') or '') ~= ARGV[1] then return redis.error_reply('AEON changed') end
redis.call('HSET', KEYS[1], 'owner_token', ARGV[2], 'owner_pid', ARGV[3], 'owner_host', ARGV[4])
return 1
"""
)

#: KEYS run. ARGV token: the owner fields go only if that token still holds the run.
_RELEASE: Final = """
if redis.call('TYPE', KEYS[1]).ok == 'hash' and redis.call('HGET', KEYS[1], 'owner_token') == ARGV[1] then
  return redis.call('HDEL', KEYS[1], 'owner_pid', 'owner_host', 'owner_token')
end
return 0
"""

#: KEYS run, steps, cycles, index. ARGV run_id: a run whose keys have all gone (expired) leaves the index.
_PRUNE: Final = """
if redis.call('EXISTS', KEYS[1], KEYS[2], KEYS[3]) == 0 then return redis.call('ZREM', KEYS[4], ARGV[1]) end
return 0
"""


class _Refused(Exception):
    """A script's own refusal (``AEON ...``): the check that failed, and what it found."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.code, _, self.detail = reason.partition(" ")


def _redact(url: str) -> tuple[str, list[str]]:
    """A form of ``url`` safe to show (no user info, no query), and the secrets it holds, to scrub from messages."""
    try:
        parts = urlsplit(url)
        secrets = [parts.password or ""] + [v for k, v in parse_qsl(parts.query) if k.lower() == "password"]
        host = parts.netloc.rpartition("@")[2]
    except ValueError:
        return "<invalid redis URL>", [url]
    return f"{parts.scheme}://{host}{parts.path}", [s for s in secrets if s]


def _alive(pid: int) -> bool:
    """Whether ``pid`` is a running (not zombie) process on this host."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"


class RedisStateStore(StateStore):
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
        try:
            import redis
            from redis.backoff import NoBackoff
            from redis.retry import Retry
        except ImportError:
            raise ConfigError(
                "the 'redis' state store needs the redis client library: pip install 'aeon-core[redis]'"
            ) from None
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
        self._dropped: type[Exception] = redis.ConnectionError
        self._transient: tuple[type[Exception], ...] = (redis.ConnectionError, redis.TimeoutError)
        self._redis_error: type[Exception] = redis.RedisError
        self._response_error: type[Exception] = redis.ResponseError
        options: dict[str, Any] = {} if raw_password is None else {"password": raw_password}
        try:
            # No automatic retries: a script whose reply was lost may have run. The store retries a dropped
            # connection once itself, and knows a retry refused for the first attempt's own work (_script).
            self._client: redis.Redis = redis.Redis.from_url(
                raw_url,
                socket_timeout=socket_timeout,
                socket_connect_timeout=socket_timeout,
                retry=Retry(NoBackoff(), 0),
                decode_responses=False,
                **options,
            )
        except (ValueError, TypeError) as exc:
            raise ConfigError(
                f"redis state store: cannot use the URL {self._display}: {self._scrub(exc)}"
            ) from None
        self._scripts = {
            name: self._client.register_script(source)
            for name, source in (
                ("create", _CREATE),
                ("write", _WRITE),
                ("claim", _CLAIM),
                ("release", _RELEASE),
                ("prune", _PRUNE),
            )
        }
        try:
            self._call("cannot connect", self._client.ping)  # a wrong URL or password fails here, at once
        except RunStoreError:
            self._client.close()
            raise

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
            "request": _text(state.request),
            "status": state.status,
            "ttl_remaining": str(state.ttl_remaining),
            "cycle": str(state.cycle),
            "manifest": _dumps(manifest),
            "started": now,
            "updated": now,
            "owner_token": token,
            "owner_pid": str(os.getpid()),
            "owner_host": self._host,
        }
        if state.plan is not None:
            fields["goal"] = _text(state.plan.goal)
        if state.current_step_id is not None:
            fields["current_step_id"] = _text(state.current_step_id)
        if state.scheduler_state:
            fields["scheduler_state"] = _dumps(state.scheduler_state)
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
        record = f'{{"entry": {_model_json(entry, {"plan_state"})}, "llm_outputs": {_dumps(llm_outputs)}}}'
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
        summary = {k: v for k, v in result.items() if k != "final_state"}
        try:
            text = _dumps(summary)
        except RunStoreError as exc:
            text = _dumps(
                {
                    "run_id": state.run_id,
                    "status": state.status,
                    "message": _text(str(summary.get("message", ""))),
                    "unstored": str(exc),
                }
            )
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
                    f"Aeon writes ({_reason(exc)[:200]}); it cannot be resumed (start it again, and delete its "
                    f"keys: {', '.join(self._keys(run_id))})"
                ) from None
            if status != "running":
                raise RunStoreError(f"run {run_id!r} already finished ({status}); nothing to resume")
            if pid is not None and host != self._host:  # an owner elsewhere: not checkable from here
                if not take_over:
                    raise RunStoreError(
                        f"run {run_id!r} is held by process {pid} on {host}, which cannot be checked from "
                        f"{self._host}. If that process is gone (a recreated container, another machine that "
                        f"stopped), take the run over: aeon resume {run_id} --take-over"
                    )
            elif pid is not None:
                if pid == os.getpid():
                    if held in _LIVE_CLAIMS:
                        raise RunStoreError(
                            f"run {run_id!r} is being run by another run of this process (another thread or "
                            "Engine); wait for it to end, or stop it"
                        )
                elif _alive(pid):
                    raise RunStoreError(
                        f"run {run_id!r} is being run by process {pid}; wait for it or stop it"
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

    # --- reading -----------------------------------------------------------------------------------------------

    def load(self, run_id: str) -> StoredRun:
        if not is_utf8(run_id):
            raise self._no_run(run_id)
        run_key, steps_key, cycles_key = self._keys(run_id)

        def read(pipe: Any) -> None:
            pipe.type(run_key).type(steps_key).type(cycles_key)
            pipe.hgetall(run_key).hgetall(steps_key).lrange(cycles_key, 0, -1)

        replies = self._call(f"cannot read run {run_id!r}", lambda: self._snapshot(read), retry=True)
        kinds = [_decoded(kind) for kind in replies[:3]]
        if kinds[0] == "none":
            raise self._missing(run_id, kinds)
        for key, kind, wanted in zip(self._keys(run_id), kinds, ("hash", "hash", "list"), strict=True):
            if kind not in (wanted, "none"):
                raise self._wrong_type(run_id, key, kind, f"a {wanted}")
        run, steps, cycles = replies[3:]
        try:
            fields = {_utf8(k, "a field name"): v for k, v in run.items()}
            if fields.get("format") != FORMAT.encode():
                raise ValueError(
                    f"its format field is {fields.get('format')!r}, not {FORMAT!r}: not a run Aeon wrote"
                )
            request, status, manifest = (_field(fields, name) for name in ("request", "status", "manifest"))
            goal, current, scheduler_state = (
                _field(fields, name, optional=True) for name in ("goal", "current_step_id", "scheduler_state")
            )
            ttl, cycle = (_number(_field(fields, name), name) for name in ("ttl_remaining", "cycle"))
            indexes = sorted(_number(_utf8(k, "a step index"), "a step index") for k in steps)
            if indexes != list(range(len(steps))):
                raise ValueError(f"its steps are numbered {indexes[:20]}, not 0 to {len(steps) - 1}")
            plan = (
                Plan(
                    goal=goal,
                    steps=tuple(
                        PlanStep.model_validate_json(steps[str(i).encode()]) for i in range(len(steps))
                    ),
                )
                if steps
                else None
            )
            records = [_record(raw) for raw in cycles]
            entries = _with_plan_snapshots(
                tuple(LogEntry.model_validate({**entry, "plan_state": None}) for entry, _ in records), plan
            )
            outputs = tuple(output for _, stored in records for output in stored)
            state = OrchestrationState(
                run_id=run_id,
                request=request,
                plan=plan,
                current_step_id=current,
                tool_history=tuple(c for e in entries for c in e.tool_calls),
                llm_outputs=outputs,
                supervisor_actions=tuple(a for e in entries for a in e.supervisor_actions),
                errors=tuple(err for e in entries for err in e.errors),
                ttl_remaining=ttl,
                cycle=cycle,
                status=status,
                scheduler_state=json.loads(scheduler_state) if scheduler_state else {},
            )
            if len(entries) != cycle:
                raise ValueError(f"{len(entries)} cycle records for {cycle} cycles")
            read_manifest = json.loads(manifest)
            if not isinstance(read_manifest, dict):
                raise ValueError(f"its manifest is a {type(read_manifest).__name__}, not an object")
            return StoredRun(state=state, manifest=read_manifest, entries=entries)
        except Exception as exc:  # whatever the keys hold, they do not make a run: corrupt
            raise RunStoreError(
                f"run {run_id!r} in {self._display} is corrupt ({', '.join(self._keys(run_id))}): "
                f"{_reason(exc)[:500]}; it cannot be resumed (start it again, and delete those keys)"
            ) from None

    def list_runs(self) -> list[RunSummary]:
        """Every run, newest first (the order the server saw them created). A summary's text that is not UTF-8
        is shown with U+FFFD; a run whose hash is not what Aeon writes is listed ``corrupt``; a run whose keys
        all expired (``ttl_days``) is dropped from the index."""
        kind = _decoded(
            self._call("cannot list the runs", lambda: self._client.type(self._index), retry=True)
        )
        if kind not in ("zset", "none"):
            raise RunStoreError(
                f"the state store at {self._display} cannot list the runs: its index {self._index!r} is "
                f"a {kind}, where Aeon keeps a sorted set; it is not Aeon's — delete it or use another "
                "[state] namespace"
            )
        # decode_responses=False: replies are bytes, whatever the client's type hints allow for.
        members = self._call(
            "cannot list the runs",
            lambda: cast("list[bytes]", self._client.zrevrange(self._index, 0, -1)),
            retry=True,
        )
        summaries: list[RunSummary] = []
        for start in range(0, len(members), _BATCH):
            batch = members[start : start + _BATCH]

            def fetch(batch: list[bytes] = batch) -> list[Any]:
                pipe = self._client.pipeline(transaction=False)
                for member in batch:
                    pipe.hmget(
                        self._namespaced("run:", member), ["request", "status", "cycle", "started", "updated"]
                    )
                return pipe.execute(raise_on_error=False)

            rows = self._call("cannot list the runs", fetch, retry=True)
            for member, row in zip(batch, rows, strict=True):
                run_id = member.decode("utf-8", "replace")
                if isinstance(row, Exception):  # a key of another type
                    summaries.append(RunSummary(run_id, "", "corrupt", -1, "", ""))
                    continue
                request, status, cycle, started, updated = row
                if all(v is None for v in row) and self._pruned(member):
                    continue
                summaries.append(
                    RunSummary(
                        run_id,
                        _shown(request),
                        _shown(status) if status is not None else "corrupt",
                        int(cycle) if cycle is not None and cycle.isdigit() else -1,
                        _shown(started),
                        _shown(updated),
                    )
                )
        return summaries

    def close(self) -> None:
        with self._lock:
            for token in self._claims.values():
                _LIVE_CLAIMS.discard(token)
            self._claims.clear()
        self._client.close()

    # --- helpers -----------------------------------------------------------------------------------------------

    @property
    def _index(self) -> str:
        return f"{self.namespace}runs"

    @property
    def _created(self) -> str:
        return f"{self.namespace}runs:created"

    def _namespaced(self, kind: str, run_id: bytes) -> bytes:
        return f"{self.namespace}{kind}".encode() + run_id

    def _keys(self, run_id: str) -> tuple[str, str, str]:
        """The run's hash, steps hash and cycles list (``run_id`` is UTF-8: callers check)."""
        return (
            f"{self.namespace}run:{run_id}",
            f"{self.namespace}steps:{run_id}",
            f"{self.namespace}cycles:{run_id}",
        )

    def _scrub(self, exc: BaseException) -> str:
        message = _reason(exc).rstrip(". ") or type(exc).__name__
        for secret in self._secrets:
            message = message.replace(secret, "***")
        return message

    def _call(self, what: str, operation: Callable[[], T], *, retry: bool = False) -> T:
        """Run ``operation``: a script's refusal is a ``_Refused``; any other client error a RunStoreError naming
        the server (never its password). ``retry``: once more on a dropped connection (for what is harmless twice)."""
        for attempt in (1, 2):
            try:
                return operation()
            except self._transient as exc:
                if retry and attempt == 1 and isinstance(exc, self._dropped):
                    continue  # a pooled connection the server had dropped: one fresh connection may do
                raise RunStoreError(
                    f"the state store at {self._display} {what}: {self._scrub(exc)}. Is the server running "
                    "and reachable, and are the credentials right?"
                ) from None
            except self._response_error as exc:
                message = str(exc)
                if message.startswith("AEON "):
                    raise _Refused(message[5:]) from None
                raise RunStoreError(
                    f"the state store at {self._display} {what}: {self._scrub(exc)}"
                ) from None
            except self._redis_error as exc:
                raise RunStoreError(
                    f"the state store at {self._display} {what}: {self._scrub(exc)}"
                ) from None
        raise AssertionError("unreachable")  # pragma: no cover

    def _script(
        self, what: str, name: str, keys: list[str], args: list[str], *, landed: Callable[[], bool]
    ) -> None:
        """Run a write script; on a dropped connection, once more. A retry the script refuses may be refusing the
        first attempt's own work (the connection dropped after it ran, taking the reply): ``landed`` says whether
        that attempt's writes are there, and then it is done."""
        attempts = 0

        def once() -> Any:
            nonlocal attempts
            attempts += 1
            return self._scripts[name](keys=keys, args=args)

        try:
            self._call(what, once, retry=True)
        except _Refused:
            if attempts > 1 and self._call(what, landed, retry=True):
                return
            raise

    def _holds(self, key: str, token: str) -> bool:
        return bool(self._client.hget(key, "owner_token") == token.encode())

    def _snapshot(self, queue: Callable[[Any], Any]) -> list[Any]:
        """The replies of the commands ``queue`` puts in one MULTI/EXEC (a consistent view); a command refused
        (a key of the wrong type) gives its error in place of its reply."""
        pipe = self._client.pipeline(transaction=True)
        queue(pipe)
        replies: list[Any] = pipe.execute(raise_on_error=False)
        return replies

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
                fields[name] = _text(value)
        if (
            state.scheduler_state
        ):  # what a scheduler must remember across a crash (the linear one needs nothing)
            fields["scheduler_state"] = _dumps(state.scheduler_state)
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

    def _refusal(self, what: str, refused: _Refused, keys: Sequence[str | bytes]) -> RunStoreError:
        """A refusal no caller expects: a key of the wrong type (``type N kind``: ``keys[N - 1]``), or worse."""
        number, _, kind = refused.detail.partition(" ")
        if refused.code == "type" and number.isdigit() and 0 < int(number) <= len(keys):
            key = keys[int(number) - 1]
            key = key.decode("utf-8", "replace") if isinstance(key, bytes) else key
            return RunStoreError(
                f"{what} in {self._display}: the key {key!r} is a {kind}, which is not what Aeon keeps there: it "
                "is not Aeon's, or it is damaged. Delete it, or set another [state] namespace in aeon.toml"
            )
        return RunStoreError(f"{what} in {self._display}: refused ({refused})")

    def _wrong_type(self, run_id: str, key: str, kind: str, wanted: str) -> RunStoreError:
        return RunStoreError(
            f"run {run_id!r} in {self._display} is corrupt: the key {key!r} is a {kind}, where Aeon keeps {wanted}; "
            f"it cannot be resumed (start it again, and delete its keys: {', '.join(self._keys(run_id))})"
        )

    def _missing(self, run_id: str, kinds: list[str] | None = None) -> RunStoreError:
        """ "No run" — unless the run's steps or cycles are there without its hash: then it is corrupt."""
        keys = self._keys(run_id)
        if kinds is None:
            kinds = [
                _decoded(k)
                for k in self._call(
                    f"cannot look for run {run_id!r}",
                    lambda: self._snapshot(lambda p: p.type(keys[0]).type(keys[1]).type(keys[2])),
                    retry=True,
                )
            ]
        left = [key for key, kind in zip(keys, kinds, strict=True) if kind != "none"]
        if left and kinds[0] == "none":
            return RunStoreError(
                f"run {run_id!r} in {self._display} is corrupt: its hash {keys[0]!r} is gone but "
                f"{', '.join(left)} {'is' if len(left) == 1 else 'are'} there; it cannot be resumed (start it "
                f"again, and delete {', '.join(left)})"
            )
        return self._no_run(run_id)

    def _no_run(self, run_id: str) -> RunStoreError:
        return RunStoreError(
            f"no run {run_id!r} in {self._display} (namespace {self.namespace!r}); `aeon runs` lists the "
            "stored runs"
        )

    def _pruned(self, member: bytes) -> bool:
        """Drop from the index a run whose keys are all gone (expired); False if some are left (listed corrupt)."""
        keys = [self._namespaced(kind, member) for kind in ("run:", "steps:", "cycles:")]
        removed = self._call(
            "cannot list the runs",
            lambda: self._scripts["prune"](keys=[*keys, self._index.encode()], args=[member]),
            retry=True,  # harmless twice
        )
        return bool(removed)

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


# --- text in, text out ----------------------------------------------------------------------------------------------


def _text(text: str) -> str:
    """``text`` as Redis can store it: a lone surrogate (from bytes that were not UTF-8) is kept as its escape,
    and no secret (:func:`aeon_kernel.scrub_secrets`)."""
    text = scrub_secrets(text)
    return text if is_utf8(text) else text.encode("utf-8", "backslashreplace").decode("utf-8")


def _reason(exc: BaseException) -> str:
    """What went wrong, as text a terminal can hold (even from an exception whose str() fails)."""
    try:
        return _text(str(exc))
    except Exception:
        return f"{type(exc).__name__} (its message cannot be shown)"


def _dumps(value: Any) -> str:
    """JSON text; ASCII-escaped, so even a lone surrogate is kept exactly."""
    try:
        return scrub_secrets_json(json.dumps(value, default=str))
    except Exception as exc:  # too deep, or an object whose str() fails
        raise RunStoreError(f"a value is not JSON: {type(exc).__name__}: {_reason(exc)[:300]}") from None


def _model_json(model: Any, exclude: set[str] | None = None) -> str:
    """A model's JSON; one holding a lone surrogate (which pydantic cannot write as UTF-8) is written escaped."""
    try:
        text: str = model.model_dump_json(exclude=exclude)
    except ValueError:
        return _dumps(model.model_dump(mode="json", exclude=exclude))
    return scrub_secrets_json(text)


def _flat(fields: dict[str, str]) -> list[str]:
    return [item for pair in fields.items() for item in pair]


def _step_pairs(plan: Plan, indexes: Any) -> list[str]:
    return [item for i in indexes for item in (str(i), _model_json(plan.steps[i]))]


def _decoded(reply: Any) -> str:
    """A TYPE reply as text (a refused command, or bytes that are not UTF-8, shows as what it is)."""
    if isinstance(reply, bytes):
        return reply.decode("utf-8", "replace")
    return str(reply)


def _utf8(value: bytes, what: str) -> str:
    try:
        return value.decode()
    except UnicodeDecodeError:
        raise ValueError(f"{what} is not UTF-8 ({value[:60]!r})") from None


def _field(fields: dict[str, bytes], name: str, *, optional: bool = False) -> Any:
    """A field of the run's hash as text; a required one that is missing is corruption."""
    value = fields.get(name)
    if value is None:
        if optional:
            return None
        raise ValueError(f"it has no {name} field")
    return _utf8(value, f"its {name} field")


def _number(text: str, name: str) -> int:
    if not (text.isascii() and text.isdigit()):
        raise ValueError(f"{name} is {text[:60]!r}, not a number")
    return int(text)


def _record(raw: bytes) -> tuple[dict[str, Any], list[Any]]:
    """One element of the cycles list: ``{"entry": {...}, "llm_outputs": [...]}``."""
    record = json.loads(_utf8(raw, "a cycle record"))
    if not (
        isinstance(record, dict)
        and set(record) == {"entry", "llm_outputs"}
        and isinstance(record["entry"], dict)
        and isinstance(record["llm_outputs"], list)
    ):
        raise ValueError(f"a cycle record is not an entry and its model outputs: {_text(str(raw[:80]))}")
    return record["entry"], record["llm_outputs"]


def _shown(value: bytes | None) -> str:
    return "" if value is None else value.decode("utf-8", "replace")


def _with_plan_snapshots(entries: tuple[LogEntry, ...], plan: Plan | None) -> tuple[LogEntry, ...]:
    """Rebuild each cycle's ``plan_state`` (the plan at cycle start) from the final plan, as the ``sqlite`` store
    does: steps run strictly in order and a step changes only in its own cycle, so the plan at the start of a cycle
    is the final plan with every step not yet finished put back to pending."""
    if plan is None:
        return entries
    finished: set[str] = set()
    rebuilt = []
    for entry in entries:
        snapshot = None
        if entry.phase == "step":
            steps = [
                s
                if s.step_id in finished
                else s.model_copy(
                    update={"status": StepStatus.PENDING, "result": None, "failure": None, "errors": ()}
                )
                for s in plan.steps
            ]
            snapshot = plan.model_copy(update={"steps": tuple(steps)})
        rebuilt.append(entry.model_copy(update={"plan_state": snapshot}))
        if entry.step_id is not None and entry.step_status in ("complete", "failed"):
            finished.add(entry.step_id)
    return tuple(rebuilt)


@hookimpl
def aeon_register_state_stores(register: Register) -> None:
    register("redis", RedisStateStore)
