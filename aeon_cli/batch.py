"""``aeon batch REQUESTS.jsonl --out RESULTS.jsonl``: many requests (or flow inputs) at once, resumable
(spec 004 §10.8/§10.12; docs/guide.md, "Many tasks at once").

Every line of the input is checked before anything runs; a bad one stops the batch with its line number (exit
2). Results go to ``--out`` as each task ends, one JSON line each, flushed as written — so running the same
command again skips every id already there and runs the rest. Ctrl-C stops taking tasks and lets the running
ones finish (a second Ctrl-C cancels them at their next cycle boundary); no finished result is lost or
half-written, and the exit status is 130.

Once-only (:mod:`aeon_cli.batch_journal`): ``OUT.lock`` keeps a second batch off the same ``--out`` (exit 2), and
``OUT.journal`` records the run id the batch chose for each task before the task is submitted (to a local thread
or a Ray worker), so that the batch run again resumes an interrupted task's run from the state store (as ``aeon
resume`` does) rather than starting it anew.

Exit status: 0 every task completed; 1 some did not (failed, TTL expired, error); 2 the batch could not start;
130 interrupted.
"""

from __future__ import annotations

import contextlib
import json
import queue
import signal
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, NoReturn

import click

from aeon_kernel.errors import AeonError
from aeon_kernel.runtime.executor import DEFAULT_CONCURRENCY
from aeon_kernel.secrets import scrub_secrets, scrub_secrets_json

if TYPE_CHECKING:
    from aeon_cli.batch_journal import Journal, Line
    from aeon_kernel.config import AeonConfig
    from aeon_kernel.runtime.executor import Executor
    from aeon_kernel.runtime.store import StateStore
    from aeon_kernel.runtime.tasks import TaskHandle

#: the [executor] options every executor takes (aeon_kernel.runtime.executor.ExecutorSettings)
_SIZES: Final = frozenset({"concurrency", "max_queued", "on_full"})
EXIT_SOME_FAILED: Final = 1
EXIT_SETUP_ERROR: Final = 2
EXIT_INTERRUPTED: Final = 130
#: problems listed before "... and N more"
_SHOWN: Final = 20
_POLL: Final = 0.1


def _fail(message: str | AeonError) -> NoReturn:
    click.echo(f"Error: {scrub_secrets(str(message))}", err=True)
    sys.exit(EXIT_SETUP_ERROR)


@click.command("batch")
@click.argument("requests_file", metavar="REQUESTS", type=click.Path(dir_okay=False, exists=True))
@click.option(
    "--out", required=True, type=click.Path(dir_okay=False), help="Append a JSON line per task here."
)
@click.option(
    "--concurrency",
    type=click.IntRange(1, 256),
    help="Tasks running at once (default: [executor] concurrency, else 4).",
)
@click.option(
    "--executor",
    "executor_name",
    type=click.Choice(["local", "ray"]),
    help="Run the tasks in threads here (local) or in Ray workers (ray: pip install 'aeon-core[ray]'). "
    "Default: [executor] use, else local.",
)
@click.option(
    "--address",
    help='The Ray cluster (implies --executor ray): "auto" (started with `ray start --head` on this machine), '
    "ray://HOST:10001, or none: a local cluster for this batch. Default: [executor] address.",
)
@click.option(
    "--flow",
    "flow_dir",
    type=click.Path(file_okay=False, exists=True),
    help='Run the flow in this directory on each line\'s "input" instead of planning a "request".',
)
@click.option("--config", type=click.Path(dir_okay=False), help="aeon.toml to use.")
@click.option(
    "--ttl", type=click.IntRange(min=1), help="Maximum cycles per task (default: the configuration's)."
)
@click.option(
    "--deadline",
    type=click.FloatRange(min=0, min_open=True),
    help="Seconds each task may take; checked between cycles.",
)
@click.option(
    "--log", "log_path", type=click.Path(dir_okay=False), help="Append one JSON line per cycle here."
)
@click.option(
    "--no-log", is_flag=True, help="Do not record the runs in the user data directory (state store, log)."
)
def batch(
    requests_file: str,
    out: str,
    concurrency: int | None,
    executor_name: str | None,
    address: str | None,
    flow_dir: str | None,
    config: str | None,
    ttl: int | None,
    deadline: float | None,
    log_path: str | None,
    no_log: bool,
) -> None:
    """Run every line of REQUESTS (JSONL), CONCURRENCY at once, appending each result to --out as it ends.

    A line is {"id": ..., "request": "..."}, or with --flow {"id": ..., "input": ...}; without --flow a line may
    also be a bare JSON string, whose id is its line number. Ids already in --out are skipped: run the same
    command again to finish an interrupted batch. Exit status: 0 all completed, 1 some did not, 2 could not
    start, 130 interrupted (Ctrl-C).
    """
    if not Path(out).resolve().parent.is_dir():
        _fail(f"--out {out}: its directory does not exist; create it first")
    from aeon_cli.batch_journal import Journal, companion

    flow, results_file = flow_dir is not None, Path(out)
    with _holding(results_file):
        try:
            earlier = read_results(results_file)
            journal = Journal(companion(results_file, "journal"))
        except ValueError as exc:
            _fail(str(exc))
        pending, skipped, problems = check_requests(Path(requests_file), flow=flow, done=earlier)
        if problems:
            more = f"\n  ... and {len(problems) - _SHOWN} more" if len(problems) > _SHOWN else ""
            _fail(
                f"{requests_file} has {len(problems)} bad line(s):\n  "
                + "\n  ".join(problems[:_SHOWN])
                + more
            )
        chosen, log = _config(flow_dir, config, log_path, no_log)
        source, executor, store = _executor(chosen, log, flow_dir, concurrency, executor_name, address)
        where = _where(chosen, log, no_log)
        again = len(set(journal.runs) - set(earlier)) if store is not None else 0
        if again:
            click.echo(
                f"batch: {again} task(s) submitted before go on from their runs ({journal.path})", err=True
            )
        try:
            runner = _Runner(executor, flow, results_file, ttl, deadline, journal if store else None, store)
            todo = (
                (canonical, key, value)
                for canonical, key, value in requests(Path(requests_file), flow)
                if canonical not in earlier
            )
            runner.run(todo, pending, skipped)
        finally:
            journal.close()
            if source is not None:
                source.close()
    if where:
        click.echo(where, err=True)
    if runner.interrupts:
        click.echo(
            f"interrupted: run the same command again to go on ({out} keeps every result that ended)",
            err=True,
        )
        sys.exit(EXIT_INTERRUPTED)
    if any(status != "completed" for status in (*earlier.values(), *runner.statuses)):
        sys.exit(EXIT_SOME_FAILED)


@contextlib.contextmanager
def _holding(out: Path) -> Iterator[None]:
    """``OUT.lock`` held while the batch runs; another batch holding it stops this one (exit 2)."""
    from aeon_cli.batch_journal import Busy, lock

    try:
        held = lock(out)
    except Busy as exc:
        _fail(str(exc))
    try:
        yield
    finally:
        held.close()


# --- the input and the output ------------------------------------------------------------------------------------


def _parse(line: str, number: int, flow: bool) -> tuple[Any, Any]:
    """``(id, request or input)`` of one line; ValueError says what is wrong with it."""
    try:
        data = json.loads(line)
    except ValueError as exc:
        raise ValueError(f"not JSON ({exc})") from None
    except RecursionError:
        raise ValueError("JSON nested too deeply to read") from None
    field = "input" if flow else "request"
    if isinstance(data, str) and not flow:
        data = {"id": number, "request": data}
    if not isinstance(data, dict):
        shape = '{"id": ..., "input": ...}' if flow else '{"id": ..., "request": "..."} or a JSON string'
        raise ValueError(f"expected {shape}, got {type(data).__name__}")
    unknown = sorted(set(data) - {"id", field})
    if unknown:
        raise ValueError(f"unknown key(s) {unknown}; a line has only id and {field}")
    key = data.get("id")
    if isinstance(key, bool) or not isinstance(key, str | int) or key == "":
        raise ValueError(f"id must be a non-empty string or an integer, got {key!r}")
    if field not in data:
        raise ValueError(f"no {field!r}")
    value = data[field]
    if not flow and (not isinstance(value, str) or not value.strip()):
        raise ValueError("request must be a non-empty string")
    return key, value


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    with path.open(encoding="utf-8", errors="surrogateescape") as lines:
        for number, line in enumerate(lines, 1):
            if line.strip():
                yield number, line


def check_requests(path: Path, *, flow: bool, done: dict[str, str]) -> tuple[int, int, list[str]]:
    """How many lines of ``path`` are still to run and how many are ``done`` already, and every problem with its
    lines (``line N: ...``)."""
    seen: dict[str, int] = {}
    problems: list[str] = []
    for number, line in _lines(path):
        try:
            key, _ = _parse(line, number, flow)
        except ValueError as exc:
            problems.append(f"line {number}: {exc}")
            continue
        canonical = json.dumps(key)
        if canonical in seen:
            problems.append(f"line {number}: id {key!r} is already used on line {seen[canonical]}")
        seen[canonical] = number
    skipped = sum(1 for canonical in seen if canonical in done)
    return len(seen) - skipped, skipped, problems


def requests(path: Path, flow: bool) -> Iterator[tuple[str, Any, Any]]:
    """``(canonical id, id, request or input)`` of every line, read lazily (the file was checked before)."""
    for number, line in _lines(path):
        key, value = _parse(line, number, flow)
        yield json.dumps(key), key, value


def read_results(path: Path) -> dict[str, str]:
    """The status of every id already in ``path`` (by canonical id). A last line cut short (the process was
    killed while writing it) is removed, so that its task runs again; any other line that is not a result is a
    ValueError naming it."""
    if not path.exists():
        return {}
    from aeon_cli.batch_journal import drop_torn_line

    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        click.echo(f"{path}: dropping an unfinished last line (its task runs again)", err=True)
        data = drop_torn_line(path)
    done: dict[str, str] = {}
    for number, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), 1):
        if not line.strip():
            continue
        try:
            result = json.loads(line)
            done[json.dumps(result["id"])] = str(result.get("status"))
        except (ValueError, KeyError, TypeError, RecursionError):
            raise ValueError(
                f"line {number} of {path} is not a batch result; fix or remove it, or choose another --out"
            ) from None
    return done


# --- the engine --------------------------------------------------------------------------------------------------


def _config(
    flow_dir: str | None, config: str | None, log_path: str | None, no_log: bool
) -> tuple[AeonConfig, str | Path | None]:
    """The configuration the tasks run with (recording into the default store unless ``no_log``), and the JSONL
    log their cycles go to."""
    from aeon_cli import recording
    from aeon_kernel.config import load_config

    if config is None and flow_dir is not None and (Path(flow_dir) / "aeon.toml").is_file():
        config = str(Path(flow_dir) / "aeon.toml")
    try:
        chosen = load_config(config)
        log: str | Path | None = log_path
        if not no_log:
            chosen = recording.with_default_store(chosen)
            log = log_path or recording.default_log(chosen)
    except AeonError as exc:
        _fail(exc)
    return chosen, log


def _executor(
    chosen: AeonConfig,
    log: str | Path | None,
    flow_dir: str | None,
    concurrency: int | None,
    name: str | None,
    address: str | None,
) -> tuple[Any, Executor, StateStore | None]:
    """What runs the tasks, as ``--executor`` (else ``[executor]``) says, with ``[executor]``'s options: local
    threads on an Engine (or a FlowEngine) built here, or Ray workers, each building its own. The Engine to close,
    the executor, and the state store whose journalled runs the tasks — :class:`~aeon_cli.batch_journal.Line` items
    then — resume (None: no store, or another executor than local and ray, which gets the lines as they are); a
    problem building any stops the batch (exit 2)."""
    if address is not None and name == "local":
        _fail("--address is the Ray cluster's: use it with --executor ray")
    table = chosen.choice("executor")
    use = name or ("ray" if address is not None else table.use)
    # another executor than the table's gets the sizes every executor takes, not the table's own options
    options = table.options if use == table.use else {k: v for k, v in table.options.items() if k in _SIZES}
    chosen = chosen.with_choice("executor", use, **options)
    concurrency = concurrency or table.options.get("concurrency") or DEFAULT_CONCURRENCY
    sizes = {"concurrency": concurrency, "max_queued": table.options.get("max_queued") or concurrency}
    if use == "ray":
        return _ray(chosen, log, flow_dir, sizes, address)
    source = _source(chosen, log, flow_dir)
    engine = source.engine if flow_dir is not None else source
    try:
        store = engine.state_store if use == "local" else None  # another plugin's executor: as it is
        if store is None:
            return source, engine.make_executor(source, **sizes), None
        from aeon_cli.batch_journal import LineTasks
        from aeon_kernel.runtime.tasks import tasks_for

        return source, engine.make_executor(LineTasks(tasks_for(source)), **sizes), store
    except AeonError as exc:
        source.close()
        _fail(exc)


def _source(chosen: AeonConfig, log: str | Path | None, flow_dir: str | None) -> Any:
    """The Engine (or FlowEngine: close it) the local executor runs the tasks on, every component built."""
    from aeon_kernel.engine import Engine

    try:
        source: Any
        engine: Any
        if flow_dir is not None:
            source = Engine.from_config_dir(flow_dir, chosen)
            engine = source.engine
        else:
            engine = source = Engine(chosen)
    except AeonError as exc:
        _fail(exc)
    try:
        if flow_dir is None:
            engine.check_choices()
        if log:
            engine.add_sink("jsonl", path=str(log))
        if flow_dir is None:
            engine.build_selected()  # a component that cannot be built stops the batch before any task
        from aeon_cli.runs import retain

        retain(engine)  # [retention]: old runs go before the batch records its own
    except AeonError as exc:
        source.close()
        _fail(exc)
    return source


def _ray(
    chosen: AeonConfig,
    log: str | Path | None,
    flow_dir: str | None,
    sizes: dict[str, int],
    address: str | None,
) -> tuple[Any, Executor, StateStore | None]:
    """Ray workers, started now: each builds the Engine (the model) once. Here the configuration's component
    names are only checked, and the state store opened (it says which journalled runs go on): the model is loaded
    in the workers alone. With a store, each worker runs the batch's Lines (``LineTasks``, by reference)."""
    from aeon_cli.batch_journal import LineTasks
    from aeon_kernel.engine import Engine

    engine = None
    try:
        engine = Engine(chosen)  # the workers' template: its plugins are found, nothing is built
        if flow_dir is None:
            engine.check_choices()
        store = engine.state_store
        sinks = [("jsonl", {"path": str(log)})] if log else []
        executor = engine.make_executor(
            engine,
            **sizes,
            address=address,
            flow=flow_dir,
            sinks=sinks,
            tasks=LineTasks if store is not None else None,
        )
        start = getattr(executor, "start", None)
        if callable(start):
            start()  # every worker builds its Engine before the first task is read
    except AeonError as exc:
        if engine is not None:
            engine.close()
        _fail(exc)
    return engine, executor, store


def _where(chosen: AeonConfig, log: str | Path | None, no_log: bool) -> str | None:
    """Where the runs are recorded (for the last line)."""
    if no_log or chosen.state is None:
        return None
    store = chosen.state.options.get("path", chosen.state.use)
    return f"runs recorded: state in {store}" + (f", log in {log}" if log else "") + " (aeon runs)"


# --- running -----------------------------------------------------------------------------------------------------


class _Runner:
    """Submits tasks as the executor has room, writes each result as it ends, and reacts to Ctrl-C.

    Everything here happens in the main thread — the workers only run tasks — so a result line is written by one
    thread, whole, and Ctrl-C (a signal handler that only counts) never interrupts a write.
    """

    def __init__(
        self,
        executor: Executor,
        flow: bool,
        out: Path,
        ttl: int | None,
        deadline: float | None,
        journal: Journal | None = None,
        store: StateStore | None = None,
    ) -> None:
        self.executor = executor
        self.flow = flow
        self.out, self.ttl, self.deadline = out, ttl, deadline
        #: with a state store, tasks are Lines: each journalled before it is submitted, the journal's runs resumed
        self.journal, self.store = journal, store
        self._stored_ids: set[str] | None = None
        self.interrupts = 0
        self.statuses: Counter[str] = Counter()
        self._in_flight: dict[TaskHandle, Any] = {}
        self._ended: queue.SimpleQueue[TaskHandle] = queue.SimpleQueue()
        self._reacted = 0

    def run(self, todo: Iterator[tuple[str, Any, Any]], total: int, skipped: int) -> None:
        previous = _on_sigint(self._interrupted)
        started = time.monotonic()
        with self.out.open("a", encoding="utf-8") as out, _Progress(total, skipped, self.out) as progress:
            self._progress, self._file = progress, out
            try:
                for canonical, key, payload in todo:
                    item = payload if self.journal is None else self._line(canonical, key, payload)
                    if item is not None and not self._submit(key, item):
                        break
                while self._in_flight:
                    self._react()
                    self._drain(timeout=_POLL)
            finally:
                self.executor.shutdown(wait=True, cancel=True)  # after a bug here: no task is left behind
                self._drain(timeout=0)
                progress.finish(self.statuses, time.monotonic() - started, bool(self.interrupts))
                _on_sigint(previous)

    def _submit(self, key: Any, payload: Any) -> bool:
        """Submit one task once there is room, writing what ends meanwhile; False once Ctrl-C was pressed."""
        from aeon_kernel.runtime.executor import BackpressureError

        while not self.interrupts:
            self._drain(timeout=0)
            try:
                handle = self.executor.submit(
                    payload, ttl=self.ttl, deadline=self.deadline, block=True, timeout=_POLL
                )
            except BackpressureError:
                continue
            self._in_flight[handle] = key
            handle.add_done_callback(self._ended.put)
            return True
        return False

    def _line(self, canonical: str, key: Any, value: Any) -> Line | None:
        """The task of a line, to submit: a resume of the run the journal names while the store has it running,
        else a new run with the journalled id (or a new id, journalled now); None when that run had ended (its
        result, as the store kept it, is written now)."""
        from aeon_cli.batch_journal import Line, stored_outcome
        from aeon_kernel.errors import RunStoreError
        from aeon_kernel.orchestrator import is_run_id, new_run_id

        assert self.journal is not None and self.store is not None
        run_id = self.journal.runs.get(canonical)
        if run_id is not None:
            try:
                stored = self.store.load(run_id)
            except RunStoreError:
                if self._stored_ids is None:
                    self._stored_ids = {summary.run_id for summary in self.store.list_runs()}
                if run_id in self._stored_ids:
                    return Line(value, run_id, resume=True)  # stored but unreadable: resuming says why
                if is_run_id(run_id):  # never stored (stopped before its first cycle): nothing ran
                    return Line(value, run_id)
            else:
                if stored.state.status == "running":
                    return Line(value, run_id, resume=True)
                status, outcome = stored_outcome(run_id, stored, self.flow)
                self.statuses[status] += 1
                self._line_out(key, status, outcome, 0.0)
                return None
        run_id = new_run_id()
        self.journal.record(key, run_id)  # before the task is submitted: no worker can start it first
        return Line(value, run_id)

    def _drain(self, timeout: float) -> None:
        """Write every result that has ended; wait up to ``timeout`` for the first."""
        wait = timeout > 0
        while True:
            try:
                handle = self._ended.get(timeout=timeout) if wait else self._ended.get_nowait()
            except queue.Empty:
                break
            wait = False
            self._write(self._in_flight.pop(handle), handle)
        stats = self.executor.stats()
        self._progress.update(self.statuses, stats["running"])

    def _write(self, key: Any, handle: TaskHandle) -> None:
        self.statuses[handle.status] += 1
        if handle.status == "cancelled":
            return  # not a result: the next run of the batch runs it again
        self._line_out(key, handle.status, handle.outcome(), handle.seconds)

    def _line_out(self, key: Any, status: str, result: dict[str, Any], seconds: float) -> None:
        line: dict[str, Any] = {
            "id": key,
            "run_id": result.get("run_id"),
            "status": status,
            "answer": result.get("output") if self.flow else result.get("answer"),
            "message": result.get("message"),
            "seconds": round(seconds, 3),
        }
        verification = result.get("verification")
        if isinstance(verification, dict):  # how the answer was checked (decision 0018)
            line["verification"] = verification.get("verdict")
        if self.flow and status in ("completed", "failed", "ttl_expired"):
            line["task_status"] = result.get("status")  # success, failure or partial
        text = json.dumps(line, ensure_ascii=False, default=str)
        if not text.isascii():
            try:
                text.encode("utf-8")
            except UnicodeEncodeError:  # a lone surrogate: kept as its JSON escape
                text = json.dumps(line, default=str)
        self._file.write(
            scrub_secrets_json(text) + "\n"
        )  # one write, then flushed: a line is whole or absent
        self._file.flush()

    def _interrupted(self, signum: int, frame: Any) -> None:
        self.interrupts += 1  # only counted here: the main loop reacts (writing from a handler is not safe)

    def _react(self) -> None:
        if self.interrupts == self._reacted:
            return
        self._reacted = self.interrupts
        if self.interrupts == 1:
            for handle in list(self._in_flight):
                if handle.status == "queued":
                    handle.cancel()
            self._progress.note(
                f"stopping: no new tasks; waiting for {len(self._in_flight)} running (Ctrl-C again cancels them)"
            )
        else:
            for handle in list(self._in_flight):
                handle.cancel()
            self._progress.note("cancelling the running tasks at their next cycle boundary")


def _on_sigint(handler: Any) -> Any:
    """Install ``handler`` for SIGINT; the previous handler, to put back. Only the main thread may: elsewhere (an
    embedder running the CLI in a thread) nothing changes and Ctrl-C keeps its meaning."""
    try:
        return signal.signal(signal.SIGINT, handler if handler is not None else signal.default_int_handler)
    except ValueError:
        return None


class _Progress:
    """On a terminal, a progress bar on stderr: done of total, failed, running, rate, ETA. Elsewhere a line as the
    batch starts and one as it ends."""

    def __init__(self, total: int, skipped: int, out: Path) -> None:
        from rich.console import Console

        self.console = Console(stderr=True, highlight=False)
        self.total, self.skipped, self.out = total, skipped, out
        self._bar: Any = None
        self._task: Any = None
        self._started = time.monotonic()

    def __enter__(self) -> _Progress:
        already = f", {self.skipped} already in {self.out}" if self.skipped else ""
        self.console.print(f"batch: {self.total} task(s) to run{already}", markup=False, soft_wrap=True)
        if self.console.is_terminal:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                SpinnerColumn,
                TextColumn,
                TimeRemainingColumn,
            )

            self._bar = Progress(
                SpinnerColumn(),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("[red]{task.fields[failed]} failed[/] · {task.fields[running]} running"),
                TextColumn("{task.fields[rate]}"),
                TextColumn("ETA"),
                TimeRemainingColumn(),
                console=self.console,
                transient=True,
            )
            self._bar.start()
            self._task = self._bar.add_task("batch", total=self.total, failed=0, running=0, rate="")
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None

    def update(self, statuses: Counter[str], running: int) -> None:
        if self._bar is None:
            return
        done = sum(statuses.values())
        elapsed = max(time.monotonic() - self._started, 1e-9)
        self._bar.update(
            self._task,
            completed=done,
            failed=sum(n for status, n in statuses.items() if status not in ("completed", "cancelled")),
            running=running,
            rate=f"{done / elapsed:.1f}/s",
        )

    def note(self, text: str) -> None:
        self.console.print(text, markup=False, soft_wrap=True)

    def finish(self, statuses: Counter[str], seconds: float, interrupted: bool) -> None:
        self.__exit__()
        done = sum(n for status, n in statuses.items() if status != "cancelled")
        parts = ", ".join(f"{n} {status}" for status, n in sorted(statuses.items()) if n) or "nothing ran"
        rate = f" ({done / seconds:.1f}/s)" if done and seconds > 0 else ""
        verb = "stopped" if interrupted else "done"
        self.console.print(
            f"batch {verb}: {parts} in {seconds:.1f} s{rate}; results in {self.out}",
            markup=False,
            soft_wrap=True,
        )
