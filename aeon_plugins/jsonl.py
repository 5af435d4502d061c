"""The ``jsonl`` telemetry sink: a manifest line per run, then one JSON line per cycle (FR-037…039, SC-007).

A line carries the plan at cycle start whole (``plan_state``) when it is the run's first with a plan or the plan's
shape changed; otherwise only the steps that changed since the run's previous line (``plan_changes``), so the log
grows with the cycles, not with cycles x plan size. ``aeon_kernel.logs.read_log`` puts ``plan_state`` back on
every line (decision 0012).

Each line is written with a single ``write`` and flushed at once, so a crash can cut at most the line being
written, and a reader never sees two cycles interleaved.

A path that cannot be a log (a directory, a file that cannot be written, a parent that is a file) is a
``ConfigError`` when the sink is built, not a warning per cycle while the log is lost (issue 13). Nothing is
created before the first line. Text that UTF-8 cannot hold (a lone surrogate in a model's output) is written as
a ``\\uXXXX`` escape, which is what JSON makes of it anyway.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import IO, Any

from aeon_kernel import ConfigError, LogEntry, OrchestrationState, Plan, Register, TelemetrySink, hookimpl
from aeon_kernel.kit import PLAN_CHANGES, changed_steps, scrub_secrets_json

DEFAULT_PATH = "aeon-log.jsonl"
#: Characters some readers (Python's str.splitlines among them) treat as line breaks; JSON allows them raw
#: inside strings, so they are escaped to keep one record per line for every reader.
_LINE_BREAKS = {0x85: "\\u0085", 0x2028: "\\u2028", 0x2029: "\\u2029"}


class JsonlSink(TelemetrySink):
    def __init__(self, path: str | Path = DEFAULT_PATH) -> None:
        self.path = Path(path)
        problem = _unwritable(self.path)
        if problem:
            raise ConfigError(
                f"the JSONL log {str(path)!r} cannot be written: {problem}. Give the path of a file in a "
                f"writable directory ([telemetry.jsonl] path in aeon.toml, or --log)."
            )
        self._file: IO[str] | None = None
        self._lock = threading.Lock()
        #: the plan each run's latest line showed (whole or by its changes), by run id
        self._plans: dict[str, Plan] = {}

    @hookimpl
    def aeon_run_start(
        self, run_id: str, request: str, state: OrchestrationState, manifest: dict[str, Any]
    ) -> None:
        """The first line of every run: what produced it (kernel, plugins, config hash, model)."""
        self._write(
            json.dumps({"manifest": manifest}, ensure_ascii=False, default=str).translate(_LINE_BREAKS)
        )

    @hookimpl
    def aeon_run_resumed(self, run_id: str, state: OrchestrationState, entries: tuple[LogEntry, ...]) -> None:
        """Repair the log of an interrupted run: drop a torn last line, append the committed cycles it lacks.

        The state store commits a cycle before its line is written, so after a crash the store may hold cycles
        the log does not (or holds half of); afterwards every committed cycle is in the log exactly once.
        """
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None
            logged = self._repair_and_scan(run_id)
        self._plans.pop(run_id, None)  # the next line of the run carries its plan whole
        for entry in entries:
            if entry.step_number not in logged:
                self._write(self._line(entry))

    def _repair_and_scan(self, run_id: str) -> set[int]:
        if not self.path.exists():
            return set()
        data = self.path.read_bytes()
        if data and not data.endswith(b"\n"):
            data = data[: data.rfind(b"\n") + 1]
            with self.path.open("r+b") as file:
                file.truncate(len(data))
        logged = set()
        for line in data.splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict) and record.get("run_id") == run_id and "step_number" in record:
                logged.add(record["step_number"])
        return logged

    @hookimpl
    def aeon_cycle_end(self, entry: LogEntry, state: OrchestrationState) -> None:
        self._write(self._line(entry))

    @hookimpl
    def aeon_run_end(self, run_id: str, result: dict[str, Any]) -> None:
        self._plans.pop(run_id, None)

    def _line(self, entry: LogEntry) -> str:
        """The entry's line: its plan whole, or only the steps that changed since the run's previous line."""
        plan, previous = entry.plan_state, self._plans.get(entry.run_id)
        if plan is None:
            return _entry_line(entry)
        self._plans[entry.run_id] = plan
        changed = changed_steps(plan, previous) if previous is not None else None
        if changed is None:
            return _entry_line(entry)
        record = entry.model_dump(mode="json", exclude={"plan_state"})
        record[PLAN_CHANGES] = [step.model_dump(mode="json") for step in changed]
        return _dumps(record)

    @hookimpl
    def aeon_pass_event(self, run_id: str, pass_number: int, event: str, record: dict[str, Any]) -> None:
        """A multi-pass run's passes, profiles, reports, assessments and refinements, one line each (spec 003)."""
        line = {"run_id": run_id, "pass_number": pass_number, "event": event, "record": record}
        self._write(json.dumps(line, ensure_ascii=False, default=str).translate(_LINE_BREAKS))

    def _write(self, record: str) -> None:
        scrubbed = scrub_secrets_json(record)  # no secret, in any form, in the log
        if scrubbed is not record:  # re-serialized: escape its line breaks again
            scrubbed = scrubbed.translate(_LINE_BREAKS)
        line = scrubbed + "\n"
        with self._lock:
            if self._file is None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._file = self.path.open("a", encoding="utf-8", errors="backslashreplace")
            self._file.write(line)
            self._file.flush()

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None


def _entry_line(entry: LogEntry) -> str:
    try:
        line = entry.model_dump_json()
    except ValueError:  # pydantic refuses text UTF-8 cannot hold (a lone surrogate): see _write
        line = json.dumps(entry.model_dump(mode="json"), ensure_ascii=False, default=str)
    return line.translate(_LINE_BREAKS)


def _dumps(record: dict[str, Any]) -> str:
    return json.dumps(record, ensure_ascii=False, default=str, separators=(",", ":")).translate(_LINE_BREAKS)


def _unwritable(path: Path) -> str | None:
    """Why no log can be appended at ``path`` (checked without creating anything), or None."""
    if path.is_dir():
        return "it is a directory"
    if path.exists():
        return None if not path.is_file() or os.access(path, os.W_OK) else "the file is not writable"
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        return f"{str(parent)!r} is not a directory"
    if not os.access(parent, os.W_OK | os.X_OK):
        return f"the directory {str(parent)!r} is not writable"
    return None


@hookimpl
def aeon_register_telemetry_sinks(register: Register) -> None:
    register("jsonl", JsonlSink)
