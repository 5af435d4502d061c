"""Where the inspector reads runs: the SQLite state store, any other state store, and JSONL logs — read-only.

The ``sqlite`` store (the one ``aeon run`` records into by default) is read with its own SQL over a read-only
connection (``mode=ro``: nothing the inspector does can write to it), so the list's figures are summed by SQLite
and a run is read without ``StateStore.load``'s per-cycle plan snapshots, which cost cycles x steps. Any other
store is read through the ``StateStore`` contract. A log is parsed whole and kept until the file changes.

A run whose data cannot be read is an :class:`Unreadable` error carrying the reason for the page.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import quote

from aeon_cli.inspect.problems import Unreadable
from aeon_cli.inspect.records import FinalPlan, LoggedPlans, RunData, RunInfo
from aeon_kernel.logs import PLAN_CHANGES

if TYPE_CHECKING:
    from aeon_cli.inspect.artifacts import ArtifactReader

#: runs a store source keeps read (a 10,000-cycle run is some tens of MB)
KEPT_RUNS: Final = 8


class RunSource(ABC):
    """A place runs are read from. ``key`` names it in URLs; ``where`` says what it is."""

    def __init__(self, key: str, where: str) -> None:
        self.key = key
        self.where = where

    @abstractmethod
    def runs(self) -> list[RunInfo]:
        """Every run, newest first."""

    @abstractmethod
    def run(self, run_id: str) -> RunData:
        """The run whole; raises :class:`Unreadable`."""

    def close(self) -> None:  # noqa: B027 - nothing to release by default
        """Release what the source holds."""


def _number(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0


def split_calls(
    outputs: Sequence[dict[str, Any]], entries: Sequence[dict[str, Any]]
) -> list[list[dict[str, Any]]]:
    """A run's model calls (in order) cut into its cycles' by each cycle's ``usage.llm_calls``."""
    calls, at = [], 0
    for entry in entries:
        count = int(_number((entry.get("usage") or {}).get("llm_calls")))
        calls.append(list(outputs[at : at + count]))
        at += count
    return calls


_LIST_SQL = """
SELECT r.run_id, r.request, r.status, r.cycle, r.started,
       CASE WHEN json_valid(r.manifest) THEN json_extract(r.manifest, '$.flow.name') END,
       c.calls, c.prompt, c.completion, c.errors, c.took
FROM runs r LEFT JOIN (
    SELECT run_id,
           total(json_extract(entry, '$.usage.llm_calls')) AS calls,
           total(json_extract(entry, '$.usage.prompt_tokens')) AS prompt,
           total(json_extract(entry, '$.usage.completion_tokens')) AS completion,
           total(json_array_length(entry, '$.errors')) AS errors,
           total(json_extract(entry, '$.duration_ms')) AS took
    FROM cycles WHERE json_valid(entry) GROUP BY run_id
) c USING (run_id)
ORDER BY r.started DESC, r.rowid DESC
"""


class SqliteRuns(RunSource):
    """The ``sqlite`` state store's file, read-only. A run is read again only when its row says it changed."""

    def __init__(self, key: str, path: str | Path) -> None:
        super().__init__(key, str(path))
        self.path = Path(path)
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None
        self._cache: dict[str, tuple[Any, RunData]] = {}
        self._kept = threading.Lock()

    def _connection(self) -> sqlite3.Connection | None:
        if self._db is None:
            if not self.path.is_file():
                return None
            uri = f"file:{quote(str(self.path.resolve()))}?mode=ro"
            try:
                db = sqlite3.connect(uri, uri=True, check_same_thread=False)
                db.text_factory = lambda raw: raw.decode("utf-8", "replace")
                db.execute("SELECT 1 FROM runs LIMIT 1")
            except sqlite3.Error as exc:
                raise Unreadable(f"cannot read the state store {self.where}: {exc}") from None
            self._db = db
        return self._db

    def _query(self, sql: str, parameters: Iterable[Any] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            db = self._connection()
            if db is None:
                return []
            try:
                return db.execute(sql, tuple(parameters)).fetchall()
            except sqlite3.Error as exc:
                raise Unreadable(f"cannot read the state store {self.where}: {exc}") from None

    def runs(self) -> list[RunInfo]:
        return [
            RunInfo(
                key=self.key,
                run_id=str(run_id),
                request=str(request),
                status=str(status),
                started=str(started),
                cycles=int(_number(cycle)),
                llm_calls=int(_number(calls)),
                prompt_tokens=int(_number(prompt)),
                completion_tokens=int(_number(completion)),
                errors=int(_number(errors)),
                duration_ms=round(_number(took), 3),
                flow=flow if isinstance(flow, str) else None,
            )
            for run_id, request, status, cycle, started, flow, calls, prompt, completion, errors, took in (
                self._query(_LIST_SQL)
            )
        ]

    def run(self, run_id: str) -> RunData:
        row = self._query(
            "SELECT request, goal, status, cycle, started, updated, manifest, result FROM runs WHERE run_id = ?",
            [run_id],
        )
        if not row:
            raise Unreadable(f"no run {run_id!r} in {self.where}")
        request, goal, status, cycle, started, updated, manifest, result = row[0]
        version = (status, cycle, updated, result is None)
        with self._kept:
            cached = self._cache.pop(run_id, None)
            if cached is not None and cached[0] == version:
                self._cache[run_id] = cached  # the most recently used last
                return cached[1]
        steps = self._query("SELECT step FROM steps WHERE run_id = ? ORDER BY idx", [run_id])
        cycles = self._query(
            "SELECT entry, llm_outputs FROM cycles WHERE run_id = ? ORDER BY step_number", [run_id]
        )
        try:
            entries = [json.loads(entry) for entry, _ in cycles]
            calls = [json.loads(outputs) for _, outputs in cycles]
            plan = {"goal": goal, "steps": [json.loads(step) for (step,) in steps]} if steps else None
            manifest_value = json.loads(manifest) if manifest else {}
            ending = json.loads(result) if result else None
        except ValueError as exc:
            raise Unreadable(f"run {run_id!r} in {self.where} is damaged: {exc}") from None
        usage = [entry.get("usage") or {} for entry in entries]
        flow = (manifest_value.get("flow") or {}).get("name") if isinstance(manifest_value, dict) else None
        info = RunInfo(
            key=self.key,
            run_id=run_id,
            request=str(request),
            status=str(status),
            started=str(started),
            cycles=int(_number(cycle)),
            llm_calls=sum(len(c) for c in calls),
            prompt_tokens=sum(int(_number(u.get("prompt_tokens"))) for u in usage),
            completion_tokens=sum(int(_number(u.get("completion_tokens"))) for u in usage),
            errors=sum(len(entry.get("errors") or ()) for entry in entries),
            duration_ms=round(sum(_number(entry.get("duration_ms")) for entry in entries), 3),
            flow=flow if isinstance(flow, str) else None,
            goal=goal if isinstance(goal, str) else None,
        )
        data = RunData(
            info=info,
            manifest=manifest_value if isinstance(manifest_value, dict) else {},
            entries=entries,
            calls=calls,
            every_call=True,
            plans=FinalPlan(plan, entries),
            result=ending if isinstance(ending, dict) else None,
            where=self.where,
        )
        with self._kept:
            self._cache[run_id] = (version, data)
            while len(self._cache) > KEPT_RUNS:
                self._cache.pop(next(iter(self._cache)))
        return data

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None


class StoreRuns(RunSource):
    """Any other ``StateStore``, through its contract (``list_runs``, ``load``)."""

    def __init__(self, key: str, engine: Any, where: str) -> None:
        super().__init__(key, where)
        self.engine = engine
        self.store = engine.state_store

    def runs(self) -> list[RunInfo]:
        from aeon_kernel.errors import AeonError

        try:
            summaries = self.store.list_runs()
        except AeonError as exc:
            raise Unreadable(str(exc)) from None
        return [
            RunInfo(
                key=self.key,
                run_id=s.run_id,
                request=s.request,
                status=s.status,
                started=s.started,
                cycles=s.cycles,
            )
            for s in summaries
        ]

    def run(self, run_id: str) -> RunData:
        from aeon_kernel.errors import AeonError

        try:
            stored = self.store.load(run_id)
        except AeonError as exc:
            raise Unreadable(str(exc)) from None
        state = stored.state
        entries = [entry.model_dump(mode="json", exclude={"plan_state"}) for entry in stored.entries]
        flow = (stored.manifest.get("flow") or {}).get("name")
        info = RunInfo(
            key=self.key,
            run_id=run_id,
            request=state.request,
            status=state.status,
            started=str(stored.manifest.get("started", "")),
            cycles=state.cycle,
            llm_calls=len(state.llm_outputs),
            errors=len(state.errors),
            duration_ms=round(sum(_number(entry.get("duration_ms")) for entry in entries), 3),
            flow=flow if isinstance(flow, str) else None,
        )
        plan = state.plan.model_dump(mode="json") if state.plan is not None else None
        return RunData(
            info=info,
            manifest=dict(stored.manifest),
            entries=entries,
            calls=split_calls(list(state.llm_outputs), entries),
            every_call=True,
            plans=FinalPlan(plan, entries),
            where=self.where,
        )

    def close(self) -> None:
        self.engine.close()


class JsonlRuns(RunSource):
    """A JSONL log (``--log``, ``[telemetry.jsonl]``, the data directory's ``runs.jsonl``): its manifest lines
    and cycle lines, grouped by run. A log keeps neither the request nor the end of a run, and of each cycle's
    model calls only the first; the status shown is read from the last cycle."""

    def __init__(self, key: str, path: str | Path) -> None:
        super().__init__(key, str(path))
        self.path = Path(path)
        self._lock = threading.Lock()
        self._version: tuple[int, int] | None = None
        self._runs: dict[str, RunData] = {}
        #: lines that are not JSON (a torn last line)
        self.skipped = 0

    def _load(self) -> dict[str, RunData]:
        with self._lock:
            try:
                status = self.path.stat()
                version = (status.st_mtime_ns, status.st_size)
                if version != self._version:
                    self._runs = self._parse(self.path.read_text(encoding="utf-8", errors="replace"))
                    self._version = version
            except OSError as exc:
                raise Unreadable(f"cannot read {self.where}: {exc.strerror or exc}") from None
            return self._runs

    def _parse(self, text: str) -> dict[str, RunData]:
        manifests: dict[str, dict[str, Any]] = {}
        lines: dict[str, list[dict[str, Any]]] = {}
        events: dict[str, list[dict[str, Any]]] = {}
        self.skipped = 0
        for line in text.splitlines():
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except ValueError:
                self.skipped += 1
                continue
            if not isinstance(record, dict):
                continue
            manifest = record.get("manifest")
            if isinstance(manifest, dict) and isinstance(manifest.get("run_id"), str):
                manifests.setdefault(manifest["run_id"], manifest)
                lines.setdefault(manifest["run_id"], [])
            elif isinstance(record.get("run_id"), str) and isinstance(record.get("step_number"), int):
                lines.setdefault(record["run_id"], []).append(record)
            elif isinstance(record.get("run_id"), str) and isinstance(record.get("pass_number"), int):
                # a multi-pass event: it belongs to the cycle after the last one logged (it ends after it)
                cycles = lines.setdefault(record["run_id"], [])
                after = cycles[-1]["step_number"] if cycles else 0
                events.setdefault(record["run_id"], []).append({**record, "cycle": after + 1})
        return {
            run_id: self._run(run_id, manifests.get(run_id, {}), found, events.get(run_id, []))
            for run_id, found in lines.items()
        }

    def _run(
        self,
        run_id: str,
        manifest: dict[str, Any],
        lines: list[dict[str, Any]],
        events: list[dict[str, Any]],
    ) -> RunData:
        entries: list[dict[str, Any]] = []
        plans = LoggedPlans(entries)
        for index, line in enumerate(lines):
            if PLAN_CHANGES in line:
                plans.changes[index] = list(line[PLAN_CHANGES])
            elif "plan_state" in line:
                plan = line["plan_state"]
                plans.whole[index] = plan if isinstance(plan, dict) else None
            entries.append({k: v for k, v in line.items() if k not in ("plan_state", PLAN_CHANGES)})
        calls = [[entry["llm_output"]] if entry.get("llm_output") else [] for entry in entries]
        goal = next((p.get("goal") for p in plans.whole.values() if p), None)
        flow = (manifest.get("flow") or {}).get("name")
        info = RunInfo(
            key=self.key,
            run_id=run_id,
            request=_flow_input(entries),
            status=_status(entries, plans),
            status_inferred=True,
            started=str(manifest.get("started") or (entries[0].get("timestamp") if entries else "")),
            cycles=len(entries),
            llm_calls=sum(int(_number((e.get("usage") or {}).get("llm_calls"))) for e in entries),
            prompt_tokens=sum(int(_number((e.get("usage") or {}).get("prompt_tokens"))) for e in entries),
            completion_tokens=sum(
                int(_number((e.get("usage") or {}).get("completion_tokens"))) for e in entries
            ),
            errors=sum(len(e.get("errors") or ()) for e in entries),
            duration_ms=round(sum(_number(e.get("duration_ms")) for e in entries), 3),
            flow=flow if isinstance(flow, str) else None,
            goal=goal if isinstance(goal, str) else None,
        )
        return RunData(
            info, manifest, entries, calls, every_call=False, plans=plans, where=self.where, passes=events
        )

    def runs(self) -> list[RunInfo]:
        found = [data.info for data in self._load().values()]
        return sorted(found, key=lambda info: info.started, reverse=True)

    def run(self, run_id: str) -> RunData:
        found = self._load().get(run_id)
        if found is None:
            raise Unreadable(f"no run {run_id!r} in {self.where}")
        return found


def _flow_input(entries: Sequence[dict[str, Any]]) -> str | None:
    """A flow run's request is its input: the first stage's, as JSON."""
    for entry in entries:
        for stage in entry.get("stages") or ():
            return json.dumps(stage.get("input"), ensure_ascii=False, sort_keys=True)
    return None


def _status(entries: Sequence[dict[str, Any]], plans: LoggedPlans) -> str:
    """How a logged run ended, as far as its last cycle tells: a flow by its root task's last stage; a plan run
    by its plan (every step complete, a step failed); waiting when its last cycle asked for approval; out of cycles
    when its TTL reached 0; else unknown."""
    if not entries:
        return "unknown"
    last = entries[-1]
    if any(error.get("type") == "ApprovalRequested" for error in last.get("errors") or ()):
        return "waiting"  # its last cycle asked a person (decision 0021)
    stages = [stage for entry in entries for stage in entry.get("stages") or ()]
    if stages:
        root = [stage for stage in stages if stage.get("task") == "t1"]
        ended = root[-1] if root else stages[-1]
        if ended.get("role") == "exit" or not ended.get("route"):
            return "completed" if ended.get("task_status") in ("success", "partial") else "failed"
    else:
        plan = plans.after(len(entries) - 1)
        statuses = [step.get("status") for step in (plan or {}).get("steps", [])]
        if statuses and all(status == "complete" for status in statuses):
            return "completed"
        if "failed" in statuses or (not statuses and last.get("errors")):
            return "failed"
    if last.get("ttl_remaining") == 0:
        return "ttl_expired"
    return "unknown"


class Catalog:
    """Every source, in the order given: the state store first, then each log; and the artifact store, where
    there is one (a run's artifacts are found by its id, whichever source it is read from)."""

    def __init__(self, sources: Sequence[RunSource], artifacts: ArtifactReader | None = None) -> None:
        self.sources = {source.key: source for source in sources}
        self.artifacts = artifacts

    def runs(self) -> tuple[list[RunInfo], list[str]]:
        """Every run, newest first, and what could not be read."""
        found: list[RunInfo] = []
        problems: list[str] = []
        for source in self.sources.values():
            try:
                found += source.runs()
            except Unreadable as exc:
                problems.append(str(exc))
        found.sort(key=lambda info: info.started, reverse=True)
        return found, problems

    def run(self, key: str, run_id: str) -> RunData:
        source = self.sources.get(key)
        if source is None:
            raise Unreadable(f"no source {key!r}")
        data = source.run(run_id)
        if data.artifacts is None:
            data.artifacts = self.artifacts  # where its prompts are kept
        return data

    def close(self) -> None:
        for source in self.sources.values():
            source.close()
        if self.artifacts is not None:
            self.artifacts.close()


def open_catalog(config: str | None, logs: Sequence[str]) -> Catalog:
    """The store ``aeon run`` records into (``[state]`` of ``config``, else the user data directory's), then each
    log, and the artifact store beside it (``[artifacts]``, else the SQLite state store's ``-artifacts.db``).
    Raises ``AeonError`` when the configuration cannot be read or its store cannot be built."""
    from aeon_cli.inspect.artifacts import SqliteArtifacts, StoredArtifacts
    from aeon_cli.recording import with_default_store
    from aeon_kernel.config import load_config

    chosen = with_default_store(load_config(config))
    assert chosen.state is not None  # with_default_store always names one
    sources: list[RunSource] = []
    artifacts: ArtifactReader | None = None
    path = chosen.state.options.get("path")
    kept = chosen.artifacts.options.get("path") if chosen.artifacts is not None else None
    if chosen.artifacts is not None and chosen.artifacts.use == "sqlite" and isinstance(kept, str):
        artifacts = SqliteArtifacts(kept)
    if chosen.state.use == "sqlite" and isinstance(path, str):
        sources.append(SqliteRuns("store", path))
    else:
        from aeon_kernel.engine import Engine

        engine = Engine(chosen)
        sources.append(StoreRuns("store", engine, f"the {chosen.state.use} state store"))
        if artifacts is None and chosen.artifacts is not None and engine.artifact_store is not None:
            artifacts = StoredArtifacts(engine.artifact_store, f"the {chosen.artifacts.use} artifact store")
    sources += [JsonlRuns(f"log{number}", path) for number, path in enumerate(logs, 1)]
    return Catalog(sources, artifacts)
