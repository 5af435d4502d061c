"""Reading runs back from the ``redis`` state store, distrusting what the server holds.

A run is read in one ``MULTI``/``EXEC`` (a consistent snapshot) and turned back into a ``StoredRun``; a key of
the wrong type, a field that is missing, not UTF-8, not a number or not JSON is a ``RunStoreError`` naming the
key and what to do — never a traceback, and never "no run" for a run that is there but damaged.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Final, cast

from aeon_kernel import LogEntry, Plan, PlanStep, RunStoreError
from aeon_kernel.kit import (
    RunOwner,
    RunSummary,
    StoredRun,
    failure_text,
    is_utf8,
    plan_snapshots,
    storable_text,
    stored_state,
)

from .connection import _Connection
from .encoding import _decoded
from .scripts import _Refused

#: What a run hash's ``format`` field holds: a hash without it is not Aeon's.
FORMAT: Final = "1"
#: Runs whose summaries one pipeline fetches (``list_runs``): bounds the size of one reply.
_BATCH: Final = 1000


class _Reading(_Connection):
    """A store's reads (``load``, ``list_runs``), and the errors that say what is wrong with what it found."""

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
            entries = plan_snapshots(
                tuple(LogEntry.model_validate({**entry, "plan_state": None}) for entry, _ in records), plan
            )
            result = _field(fields, "result", optional=True)
            ended = json.loads(result) if result is not None else None
            state = stored_state(
                run_id,
                request,
                plan,
                entries,
                (output for _, stored in records for output in stored),
                current_step_id=current,
                ttl_remaining=ttl,
                cycle=cycle,
                status=status,
                scheduler_state=scheduler_state,
                result=ended,
            )
            read_manifest = json.loads(manifest)
            if not isinstance(read_manifest, dict):
                raise ValueError(f"its manifest is a {type(read_manifest).__name__}, not an object")
            return StoredRun(state=state, manifest=read_manifest, entries=entries, result=ended)
        except Exception as exc:  # whatever the keys hold, they do not make a run: corrupt
            raise RunStoreError(
                f"run {run_id!r} in {self._display} is corrupt ({', '.join(self._keys(run_id))}): "
                f"{failure_text(exc)[:500]}; it cannot be resumed (start it again, and delete those keys)"
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
                        self._namespaced("run:", member),
                        [
                            "request",
                            "status",
                            "cycle",
                            "started",
                            "updated",
                            "owner_pid",
                            "owner_host",
                            "session",
                        ],
                    )
                return pipe.execute(raise_on_error=False)

            rows = self._call("cannot list the runs", fetch, retry=True)
            for member, row in zip(batch, rows, strict=True):
                run_id = member.decode("utf-8", "replace")
                if isinstance(row, Exception):  # a key of another type
                    summaries.append(RunSummary(run_id, "", "corrupt", -1, "", ""))
                    continue
                request, status, cycle, started, updated, pid, host, session = row
                if all(v is None for v in row) and self._pruned(member):
                    continue
                owner = RunOwner(int(pid), _shown(host)) if pid is not None and pid.isdigit() else None
                summaries.append(
                    RunSummary(
                        run_id,
                        _shown(request),
                        _shown(status) if status is not None else "corrupt",
                        int(cycle) if cycle is not None and cycle.isdigit() else -1,
                        _shown(started),
                        _shown(updated),
                        owner or RunOwner(None, None),
                        _shown(session) if session is not None else None,
                    )
                )
        return summaries

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
        raise ValueError(
            f"a cycle record is not an entry and its model outputs: {storable_text(str(raw[:80]))}"
        )
    return record["entry"], record["llm_outputs"]


def _shown(value: bytes | None) -> str:
    return "" if value is None else value.decode("utf-8", "replace")
