"""The ``sqlite`` artifact store (spec 004 §10.1): every output of every run in one SQLite file (``[artifacts]``).

One table, appended to, indexed by run with node, schema and kind: ``aeon artifacts RUN_ID --node 2`` reads a
handful of rows however long the run was. Values are JSON text; nothing is pickled. A file that is not an Aeon
artifact store (or is damaged) is a ``RunStoreError`` naming it, never a traceback.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

from aeon_kernel import Artifact, ArtifactStore, Register, RunStoreError, hookimpl
from aeon_kernel.kit import use_wal

DEFAULT_PATH: Final = "aeon-artifacts.db"
_SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS artifacts (
    id INTEGER PRIMARY KEY,
    run_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    node TEXT,
    task TEXT,
    schema_name TEXT,
    cycle INTEGER NOT NULL,
    timestamp TEXT NOT NULL,
    value TEXT NOT NULL
);
"""
_INDEXES: Final = """
CREATE INDEX IF NOT EXISTS artifacts_by_node ON artifacts (run_id, node);
CREATE INDEX IF NOT EXISTS artifacts_by_schema ON artifacts (run_id, schema_name);
CREATE INDEX IF NOT EXISTS artifacts_by_kind_and_cycle ON artifacts (run_id, kind, cycle);
"""
_COLUMNS: Final = ("run_id", "kind", "node", "task", "schema_name", "cycle", "timestamp", "value")
_INSERT: Final = (
    "INSERT INTO artifacts (run_id, kind, node, task, schema_name, cycle, timestamp, value) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
)
#: a condition left None matches every row
_FIND: Final = (
    "SELECT run_id, kind, node, task, schema_name, cycle, timestamp, value FROM artifacts WHERE run_id = :run_id "
    "AND (:node IS NULL OR node = :node) AND (:schema_name IS NULL OR schema_name = :schema_name) "
    "AND (:kind IS NULL OR kind = :kind) ORDER BY id"
)


class SQLiteArtifactStore(ArtifactStore):
    def __init__(self, path: str | Path = DEFAULT_PATH, timeout: float = 30.0) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(
                self.path, timeout=timeout, check_same_thread=False, isolation_level=None
            )
            use_wal(self._db, timeout)
            self._db.executescript(_SCHEMA)
            columns = [row[1] for row in self._db.execute("PRAGMA table_info(artifacts)")]
            if tuple(columns[1:]) != _COLUMNS:
                raise RunStoreError(
                    f"{self.path} holds an 'artifacts' table that is not Aeon's (columns {columns}); choose "
                    "another path in [artifacts]"
                )
            self._db.executescript(_INDEXES)
        except (sqlite3.Error, OSError) as exc:
            raise RunStoreError(f"cannot use {self.path} as an artifact store: {exc}") from None

    def put(self, artifacts: Sequence[Artifact]) -> None:
        rows = [
            (a.run_id, a.kind, a.node, a.task, a.schema_name, a.cycle, a.timestamp, json.dumps(a.value))
            for a in artifacts
        ]
        with self._lock:
            try:
                self._db.execute("BEGIN")
                self._db.executemany(_INSERT, rows)
                self._db.execute("COMMIT")
            except sqlite3.Error as exc:
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
                raise RunStoreError(f"cannot write artifacts to {self.path}: {exc}") from None

    def find(
        self,
        run_id: str,
        *,
        node: str | None = None,
        schema_name: str | None = None,
        kind: str | None = None,
    ) -> list[Artifact]:
        with self._lock:
            try:
                found = {"run_id": run_id, "node": node, "schema_name": schema_name, "kind": kind}
                rows = self._db.execute(_FIND, found).fetchall()
            except sqlite3.Error as exc:
                raise RunStoreError(f"cannot read artifacts from {self.path}: {exc}") from None
        return [self._artifact(row) for row in rows]

    def _artifact(self, row: tuple[Any, ...]) -> Artifact:
        fields = dict(zip(_COLUMNS, row, strict=True))
        try:
            fields["value"] = json.loads(fields["value"])
            return Artifact(**fields)
        except (TypeError, ValueError) as exc:
            raise RunStoreError(f"{self.path} holds an artifact that cannot be read: {exc}") from None

    def close(self) -> None:
        with self._lock:
            self._db.close()


@hookimpl
def aeon_register_artifact_stores(register: Register) -> None:
    register("sqlite", SQLiteArtifactStore)
