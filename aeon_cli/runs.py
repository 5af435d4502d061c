"""``aeon runs``: the stored runs, newest first, saying of a running one whether the process that holds it is alive;
``aeon runs prune``: delete old runs (issue 27; docs/durable-runs.md, "Retention").

A ``running`` run is shown ``live`` (its owner process runs on this host), ``stale`` (that process is gone: a
``kill -9``, a crash), ``interrupted`` (no process holds it: it was stopped and released) or, for an owner on
another host, unchecked — never ``running`` for ever. Prune deletes through the state store's ``delete_run``, never
a run a live process holds (nor one held on another host, which cannot be checked), and the runs' artifacts when
the artifact store is a SQLite file; then it compacts the SQLite files it deleted from.
"""

from __future__ import annotations

import contextlib
import math
import re
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final, NoReturn

import click

from aeon_cli.output import echo_json
from aeon_kernel.errors import AeonError
from aeon_kernel.secrets import scrub_secrets

EXIT_SETUP_ERROR: Final = 2
#: seconds in each unit of ``--older-than``
_UNITS: Final = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_DURATION: Final = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*")
#: run ids per DELETE statement (SQLite's bound on parameters is far above)
_CHUNK: Final = 500


def _fail_setup(exc: AeonError) -> NoReturn:
    click.echo(f"Error: {scrub_secrets(str(exc))}", err=True)
    sys.exit(EXIT_SETUP_ERROR)


@contextlib.contextmanager
def _recorded_runs(config: str | None) -> Iterator[Any]:
    """The engine over the store `aeon run` records into: [state] in aeon.toml, else the user data directory's."""
    from aeon_cli.recording import with_default_store
    from aeon_kernel.config import load_config
    from aeon_kernel.engine import Engine

    with Engine(with_default_store(load_config(config))) as engine:
        assert engine.state_store is not None  # with_default_store always names one
        yield engine


def shown_status(run: dict[str, Any]) -> str:
    """A run's status as ``aeon runs`` prints it: a running one says who holds it."""
    owner = run.get("owner") or {}
    status: str = run["status"]
    return {
        "live": f"running (live, pid {owner.get('pid')})",
        "stale": f"running (stale: owner pid {owner.get('pid')} on this host is gone)",
        "unchecked": f"running (owner pid {owner.get('pid')} on {owner.get('host')}, not checked from here)",
        "released": "running (interrupted: no process holds it)",
    }.get(run.get("liveness") or "", status)


@click.group("runs", invoke_without_command=True)
@click.option("--config", type=click.Path(dir_okay=False), help="aeon.toml to use.")
@click.option("--json", "as_json", is_flag=True, help="Print the runs as a JSON list.")
@click.pass_context
def runs(ctx: click.Context, config: str | None, as_json: bool) -> None:
    """List the stored runs, newest first: run_id, request, status, cycles, started.

    A running run says whether the process holding it is alive (live), gone (stale: resume it), or whether none
    holds it (interrupted). `aeon runs prune` deletes old runs.
    """
    if ctx.invoked_subcommand is not None:
        return
    try:
        with _recorded_runs(config) as engine:
            summaries = [summary.to_dict() for summary in engine.state_store.list_runs()]
            where = engine.config.state.options.get("path", engine.config.state.use)
    except AeonError as exc:
        _fail_setup(exc)
    if as_json:
        echo_json(summaries)
        return
    if not summaries:
        click.echo(f"no runs recorded yet in {where}", err=True)
    for run in summaries:
        request = scrub_secrets(run["request"])  # before the cut
        request = request if len(request) <= 50 else request[:49] + "…"
        click.echo(
            f"{run['run_id']}  {shown_status(run):<11}  {run['cycles']:>4} cycles  {run['started']}  {request}"
        )


def parse_duration(text: str) -> float:
    """Seconds in ``30d``, ``12h``, ``90m``, ``45s``, ``2w``; ValueError otherwise."""
    match = _DURATION.fullmatch(text)
    if match is None:
        raise ValueError(f"{text!r} is not a duration: a number and a unit, s, m, h, d or w (30d, 12h)")
    return float(match[1]) * _UNITS[match[2]]


def _duration(ctx: click.Context, param: click.Parameter, value: str | None) -> float | None:
    try:
        return None if value is None else parse_duration(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


def age(run: Any, now: datetime) -> float:
    """Seconds since the run last changed (``updated``, else ``started``); a run with no readable time is as old
    as can be."""
    for stamp in (run.updated, run.started):
        try:
            when = datetime.fromisoformat(stamp)
        except (TypeError, ValueError):
            continue
        return (now - (when if when.tzinfo else when.replace(tzinfo=UTC))).total_seconds()
    return math.inf


@runs.command("prune")
@click.option(
    "--older-than",
    "older_than",
    metavar="DURATION",
    callback=_duration,
    help="Delete the runs that have not changed for this long: 30d, 12h, 90m, 2w.",
)
@click.option("--keep", type=click.IntRange(min=0), help="Keep the newest N runs whatever their age.")
@click.option("--dry-run", is_flag=True, help="Only say what would be deleted.")
@click.option("--config", type=click.Path(dir_okay=False), help="aeon.toml to use.")
@click.option("--json", "as_json", is_flag=True, help="Print what was deleted and kept as JSON.")
def prune(
    older_than: float | None, keep: int | None, dry_run: bool, config: str | None, as_json: bool
) -> None:
    """Delete old runs from the state store (and their artifacts from a SQLite artifact store).

    With --older-than, the runs unchanged for that long; with --keep N, all but the newest N; with both, the runs
    that are that old and not among the newest N. A run that a live process holds is never deleted, nor one
    held on another host (it cannot be checked from here). Exit status: 0, or 2 when the store cannot be read.
    """
    if older_than is None and keep is None:
        raise click.UsageError("say which runs to delete: --older-than DURATION, --keep N, or both")
    try:
        with _recorded_runs(config) as engine:
            report = _prune(engine, older_than, keep, dry_run)
    except AeonError as exc:
        _fail_setup(exc)
    if not dry_run and report["deleted"]:
        report["compacted"] = [_compact(Path(path)) for path in report.pop("files")]
    else:
        report.pop("files")
    if as_json:
        echo_json(report)
        return
    verb = "would delete" if dry_run else "deleted"
    for run in report["deleted"]:
        request = scrub_secrets(run["request"])[:50]
        click.echo(f"{verb} {run['run_id']}  {shown_status(run):<11}  {run['updated']}  {request}")
    for run in report["kept"]:
        click.echo(f"kept {run['run_id']}: {run['why']}")
    artifacts = f", {report['artifacts']} artifact(s)" if report["artifacts"] else ""
    click.echo(
        f"{verb} {len(report['deleted'])} run(s){artifacts}; kept {len(report['kept'])} that match but are held",
        err=True,
    )
    for line in report.get("compacted", []):
        click.echo(line, err=True)


def _prune(engine: Any, older_than: float | None, keep: int | None, dry_run: bool) -> dict[str, Any]:
    """Delete (or with ``dry_run`` only choose) the runs to prune; what was deleted and what was kept."""
    from aeon_kernel.errors import RunStoreError

    store = engine.state_store
    now = datetime.now(UTC)
    chosen = [
        summary
        for index, summary in enumerate(store.list_runs())
        if (keep is None or index >= keep) and (older_than is None or age(summary, now) > older_than)
    ]
    deleted: list[dict[str, Any]] = []
    kept: list[dict[str, Any]] = []
    for summary in chosen:
        shown = summary.to_dict()
        if summary.liveness() in ("live", "unchecked"):
            kept.append({**shown, "why": f"{shown_status(shown)}: a run its owner may still be driving"})
            continue
        if not dry_run:
            try:
                if not store.delete_run(summary.run_id):
                    continue  # gone meanwhile
            except RunStoreError as exc:
                kept.append({**shown, "why": scrub_secrets(str(exc))})
                continue
        deleted.append(shown)
    files = []
    state = engine.config.state
    if state.use == "sqlite" and state.options.get("path"):
        files.append(str(state.options["path"]))
    artifacts, where = 0, _artifact_file(engine.config)
    if where is not None:
        artifacts = _delete_artifacts(where, [run["run_id"] for run in deleted], dry_run)
        files.append(str(where))
    return {"dry_run": dry_run, "deleted": deleted, "kept": kept, "artifacts": artifacts, "files": files}


def retain(engine: Any) -> None:
    """``[retention]`` before a recorded run: the runs past ``keep`` or ``older_than`` are deleted (as ``aeon runs
    prune`` would, without compacting the files: new runs reuse their space). A problem is said on stderr and never
    stops the run."""
    table = engine.config.retention
    if not table or engine.state_store is None:
        return
    try:
        older = None if table.get("older_than") is None else parse_duration(table["older_than"])
        report = _prune(engine, older, table.get("keep"), dry_run=False)
    except (ValueError, AeonError) as exc:
        click.echo(f"[retention] not applied: {scrub_secrets(str(exc))}", err=True)
        return
    if report["deleted"]:
        click.echo(f"[retention] deleted {len(report['deleted'])} old run(s)", err=True)


def _artifact_file(config: Any) -> Path | None:
    """The SQLite file of the artifact store (the default one beside runs.db, or a configured ``sqlite`` one)."""
    choice = config.artifacts
    if choice is None or choice.use != "sqlite":
        return None
    path = Path(str(choice.options.get("path", "aeon-artifacts.db")))
    return path if path.is_file() else None


def _delete_artifacts(path: Path, run_ids: list[str], dry_run: bool) -> int:
    """The artifacts of ``run_ids`` in the SQLite artifact store ``path``: deleted (or counted); how many."""
    import sqlite3

    from aeon_kernel.errors import RunStoreError

    total = 0
    try:
        with contextlib.closing(sqlite3.connect(path, timeout=30, isolation_level=None)) as db:
            for start in range(0, len(run_ids), _CHUNK):
                chunk = run_ids[start : start + _CHUNK]
                marks = ",".join("?" * len(chunk))
                verb = "SELECT COUNT(*) FROM" if dry_run else "DELETE FROM"
                cursor = db.execute(f"{verb} artifacts WHERE run_id IN ({marks})", chunk)
                total += cursor.fetchone()[0] if dry_run else cursor.rowcount
    except sqlite3.Error as exc:
        raise RunStoreError(f"cannot delete the runs' artifacts from {path}: {exc}") from None
    return total


def _compact(path: Path) -> str:
    """VACUUM a SQLite file runs were deleted from, so that it shrinks (otherwise its free pages are reused)."""
    import sqlite3

    before = path.stat().st_size if path.is_file() else 0
    try:
        with contextlib.closing(sqlite3.connect(path, timeout=5, isolation_level=None)) as db:
            db.execute("VACUUM")
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    except sqlite3.Error as exc:
        return f"{path}: not compacted ({exc}); new runs reuse its free space"
    return f"{path}: {before:,} -> {path.stat().st_size:,} bytes"
