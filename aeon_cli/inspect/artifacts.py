"""A run's artifacts (``aeon artifacts``, spec 004 §10.1) for its page, one page at a time — read-only.

The CLI keeps its artifact store beside its SQLite state store (``runs.db`` -> ``runs-artifacts.db``;
:func:`aeon_cli.recording.with_default_store`). That ``sqlite`` file is read with its own SQL over a
read-only connection (``mode=ro``), a page at a time (a 10,000-cycle run has tens of thousands of artifacts); a
file that is not there yet is no artifacts, and is not created. Any other artifact store is read through the
``ArtifactStore`` contract (``find``). A store that cannot be read is an :class:`~.problems.Unreadable` error,
which the run page shows in place of the list.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final
from urllib.parse import quote

from aeon_cli.inspect.problems import Unreadable


@dataclass(frozen=True)
class Found:
    """One page of a run's artifacts, and how many the run has."""

    total: int
    #: each artifact as a dict: cycle, kind, node, task, schema_name, timestamp, value
    rows: list[dict[str, Any]]
    #: how many artifacts of each kind the run has (whatever the page is narrowed to), in the order first put
    kinds: list[tuple[str, int]] = field(default_factory=list)


@dataclass(frozen=True)
class Narrowed:
    """What a run's artifacts are narrowed to on its page (``?kind=``, ``?node=``, ``?schema=``); None: any."""

    kind: str | None = None
    node: str | None = None
    schema: str | None = None

    def conditions(self) -> list[tuple[str, str]]:
        """(column, value) for each condition set, the columns as the store names them."""
        given = (("kind", self.kind), ("node", self.node), ("schema_name", self.schema))
        return [(column, value) for column, value in given if value is not None]

    def matches(self, artifact: Any) -> bool:
        return all(getattr(artifact, column) == value for column, value in self.conditions())


EVERY: Final = Narrowed()


class ArtifactReader(ABC):
    """Where a run's artifacts are read from. ``where`` says what it is, for the page."""

    def __init__(self, where: str) -> None:
        self.where = where

    @abstractmethod
    def page(self, run_id: str, offset: int, limit: int, narrowed: Narrowed = EVERY) -> Found:
        """The artifacts ``offset`` to ``offset + limit`` of ``run_id`` (those ``narrowed`` matches), in the order
        they were put."""

    @abstractmethod
    def of_kind(self, run_id: str, kind: str, cycle: int | None = None) -> list[tuple[int, Any]]:
        """(cycle, value) of ``run_id``'s artifacts of one kind, in one cycle when given, in the order put; at
        most :data:`MOST` of them."""

    def model_calls(self, run_id: str, cycle: int) -> list[dict[str, Any]]:
        """The ``model_call`` artifacts of one cycle: each call's request (prompt included) and output."""
        return [value for _, value in self.of_kind(run_id, "model_call", cycle) if isinstance(value, dict)]

    def close(self) -> None:  # noqa: B027 - nothing to release by default
        """Release what the reader holds."""


_COLUMNS = ("kind", "node", "task", "schema_name", "cycle", "timestamp", "value")
_PAGE = (
    "SELECT kind, node, task, schema_name, cycle, timestamp, value FROM artifacts WHERE {} "
    "ORDER BY id LIMIT ? OFFSET ?"
)
_COUNT = "SELECT count(*) FROM artifacts WHERE {}"
_KINDS = "SELECT kind, count(*) FROM artifacts WHERE run_id = ? GROUP BY kind ORDER BY min(id)"
_OF_KIND = "SELECT cycle, value FROM artifacts WHERE run_id = ? AND kind = ? ORDER BY id LIMIT ?"
_OF_KIND_IN_CYCLE = (
    "SELECT cycle, value FROM artifacts WHERE run_id = ? AND kind = ? AND cycle = ? ORDER BY id LIMIT ?"
)
#: the most artifacts of one kind a page reads (a long multi-pass run has thousands of events)
MOST: Final = 1000


class SqliteArtifacts(ArtifactReader):
    """The ``sqlite`` artifact store's file, over a read-only connection."""

    def __init__(self, path: str | Path) -> None:
        super().__init__(str(path))
        self.path = Path(path)
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None

    def _connection(self) -> sqlite3.Connection | None:
        if self._db is None:
            if not self.path.is_file():
                return None
            uri = f"file:{quote(str(self.path.resolve()))}?mode=ro"
            try:
                db = sqlite3.connect(uri, uri=True, check_same_thread=False)
                db.text_factory = lambda raw: raw.decode("utf-8", "replace")
                db.execute(
                    "SELECT run_id, kind, node, task, schema_name, cycle, timestamp, value FROM artifacts LIMIT 1"
                )
            except sqlite3.Error as exc:
                raise self._unreadable(exc) from None
            self._db = db
        return self._db

    def _unreadable(self, exc: sqlite3.Error) -> Unreadable:
        return Unreadable(f"cannot read the artifact store {self.where}: {exc}")

    def _fetch(self, *queries: tuple[str, Sequence[Any]]) -> list[list[Any]] | None:
        """Each query's rows, read together under the lock; None while the store's file does not exist."""
        with self._lock:
            db = self._connection()
            if db is None:
                return None
            try:
                return [db.execute(sql, parameters).fetchall() for sql, parameters in queries]
            except sqlite3.Error as exc:
                raise self._unreadable(exc) from None

    def page(self, run_id: str, offset: int, limit: int, narrowed: Narrowed = EVERY) -> Found:
        conditions = narrowed.conditions()
        where = " AND ".join(["run_id = ?", *(f"{column} = ?" for column, _ in conditions)])  # columns: ours
        values = (run_id, *(value for _, value in conditions))
        fetched = self._fetch(
            (_KINDS, (run_id,)),
            (_COUNT.format(where), values),
            (_PAGE.format(where), (*values, limit, offset)),
        )
        if fetched is None:
            return Found(0, [])
        counted, ((total,),), rows = fetched
        kinds = [(str(name), int(count)) for name, count in counted]
        found = [{**dict(zip(_COLUMNS, row, strict=True)), "value": _decoded(row[-1])} for row in rows]
        return Found(int(total), found, kinds)

    def of_kind(self, run_id: str, kind: str, cycle: int | None = None) -> list[tuple[int, Any]]:
        if cycle is None:
            fetched = self._fetch((_OF_KIND, (run_id, kind, MOST)))
        else:
            fetched = self._fetch((_OF_KIND_IN_CYCLE, (run_id, kind, cycle, MOST)))
        return [] if fetched is None else [(int(at), _decoded(value)) for at, value in fetched[0]]

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None


class StoredArtifacts(ArtifactReader):
    """Any ``ArtifactStore``, through its contract: ``find`` reads the run's artifacts whole, a page is cut."""

    def __init__(self, store: Any, where: str) -> None:
        super().__init__(where)
        self.store = store

    def _find(self, run_id: str, **filters: Any) -> list[Any]:
        from aeon_kernel.errors import AeonError

        try:
            return list(self.store.find(run_id, **filters))
        except AeonError as exc:
            raise Unreadable(str(exc)) from None

    def page(self, run_id: str, offset: int, limit: int, narrowed: Narrowed = EVERY) -> Found:
        every = self._find(run_id)
        kinds = Counter(artifact.kind for artifact in every)
        found = [artifact for artifact in every if narrowed.matches(artifact)]
        rows = [
            {name: getattr(artifact, name) for name in _COLUMNS}
            for artifact in found[offset : offset + limit]
        ]
        return Found(len(found), rows, list(kinds.items()))

    def of_kind(self, run_id: str, kind: str, cycle: int | None = None) -> list[tuple[int, Any]]:
        found = self._find(run_id, kind=kind)
        return [(a.cycle, a.value) for a in found if cycle is None or a.cycle == cycle][:MOST]


def _decoded(value: Any) -> Any:
    """A stored value as the JSON it holds; the text itself where it is not JSON."""
    try:
        return json.loads(value)
    except (TypeError, ValueError):
        return value
