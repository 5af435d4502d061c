"""The project ``aeon init`` wrote, as run manifests record it: its template and whether its lock still holds
(docs/deploy.md)."""

from __future__ import annotations

import hashlib
import tomllib
from pathlib import Path
from typing import Any, Final

from aeon_kernel.config import AeonConfig

#: what ``aeon init`` writes beside ``aeon.toml``: the project's template and the sha256 of its lock file
PROJECT_FILE: Final = "aeon-project.toml"


def deployment_project(config: AeonConfig) -> dict[str, Any] | None:
    """The ``aeon-project.toml`` beside the configuration file, else in the working directory; None without one."""
    folders = [config.source.parent] if config.source is not None else []
    for folder in [*folders, Path()]:
        if (folder / PROJECT_FILE).is_file():
            return _project(folder)
    return None


def _project(folder: Path) -> dict[str, Any]:
    """``{template, lock_sha256, lock_matches}`` of the project in ``folder``: lock_matches says whether the lock
    file (``lock``, default requirements.txt) still has the sha256 recorded when the project was made. A file
    that cannot be read is recorded as such rather than failing the run."""
    path = folder / PROJECT_FILE
    try:
        table = tomllib.loads(path.read_text(encoding="utf-8")).get("project")
        project = table if isinstance(table, dict) else {}
        lock = project.get("lock")
        lock_file = folder / (lock if isinstance(lock, str) and lock else "requirements.txt")
        current = hashlib.sha256(lock_file.read_bytes()).hexdigest() if lock_file.is_file() else None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        return {"error": f"cannot read {path}: {exc}"}
    template, recorded = project.get("template"), project.get("lock_sha256")
    return {
        "template": template if isinstance(template, str) else None,
        "lock_sha256": recorded if isinstance(recorded, str) else None,
        "lock_matches": current is not None and current == recorded,
    }
