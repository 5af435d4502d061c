"""FR-037 by default: every run the CLI makes is recorded, so ``aeon runs``, ``aeon resume`` (and any tool that
reads runs) work on the run a user just made, without a flag set in advance.

Where a configuration names no ``[state]`` store, the CLI uses a SQLite store in the user's data directory
(``platformdirs``: ``~/.local/share/aeon`` on Linux; ``$AEON_DATA_DIR`` overrides it), and keeps the run's
artifacts (``aeon artifacts``) beside the SQLite state store where it names no ``[artifacts]``; where it names no
JSONL sink and ``--log`` is not given, the run's lines are appended to ``runs.jsonl`` there. ``--no-log`` opts out. The
embedding API stays explicit: ``Engine`` records only what its configuration says.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Final

from aeon_kernel.config import AeonConfig, Choice
from aeon_kernel.errors import ConfigError

STATE_FILE: Final = "runs.db"
LOG_FILE: Final = "runs.jsonl"


def data_dir() -> Path:
    """Where the CLI keeps what it records: ``$AEON_DATA_DIR``, else the platform's user data directory."""
    chosen = os.environ.get("AEON_DATA_DIR")
    if chosen:
        return Path(chosen)
    from platformdirs import user_data_path

    return user_data_path("aeon", appauthor=False)


def _ready() -> Path:
    directory = data_dir()
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(
            f"cannot record the run in {directory}: {exc.strerror or exc}. Set AEON_DATA_DIR to a writable "
            "directory, configure [state] in aeon.toml, or pass --no-log."
        ) from None
    return directory


def with_default_store(config: AeonConfig) -> AeonConfig:
    """``config``, with the data directory's state store where it names none, and an artifact store beside its
    SQLite state store (``runs.db`` -> ``runs-artifacts.db``) where it names none."""
    if config.state is None:
        config = dataclasses.replace(config, state=Choice("sqlite", {"path": str(_ready() / STATE_FILE)}))
    state_path = config.state.options.get("path") if config.state and config.state.use == "sqlite" else None
    if config.artifacts is None and isinstance(state_path, str):
        beside = Path(state_path).with_name(f"{Path(state_path).stem}-artifacts.db")
        config = dataclasses.replace(config, artifacts=Choice("sqlite", {"path": str(beside)}))
    return config


def default_log(config: AeonConfig) -> Path | None:
    """The JSONL file to append the run to when ``[telemetry]`` writes none (``--log`` comes first)."""
    if any(sink.use == "jsonl" for sink in config.telemetry):
        return None
    return _ready() / LOG_FILE


def note(config: AeonConfig, run_id: str, log: Path | None) -> str:
    """The end-of-run line saying where the run was recorded (state store, log) and how to see it again."""
    where = []
    if config.state is not None:
        path = config.state.options.get("path") if config.state.use == "sqlite" else None
        where.append(f"state in {path}" if path else f"state in the {config.state.use} store")
    if log is not None:
        where.append(f"log in {log}")
    return f"run {run_id} recorded: {', '.join(where)} (aeon runs; --no-log to skip)"
