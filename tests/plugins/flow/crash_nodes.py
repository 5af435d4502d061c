"""Node code with side effects for the flow crash tests, and the child process that runs a flow and dies.

``crash.effect`` is the kind of node a user writes: it appends its stage's ``context.idempotency_key`` to a
ledger, unless the key is already there, so its side effect happens once even when a resumed run executes the
stage again. It also appends the key to a list of raw executions (every execution, repeats included), and when
``AEON_TEST_FLOW_BLOCK`` names its stage (``t1.2/right``) it writes ``entered-<task>-<node>`` and waits for
``release`` — the parent kills the process meanwhile. All files live in ``$AEON_TEST_FLOW_DIR``.

As a script (the crash tests' child process)::

    python tests/plugins/flow/crash_nodes.py FLOW_DIR run INPUT_JSON [KILL_AFTER]
    python tests/plugins/flow/crash_nodes.py FLOW_DIR resume RUN_ID

``run`` iterates the flow and, after the KILL_AFTER-th committed stage, kills itself with SIGKILL; a run that is
not killed prints its Task result as JSON.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

if __name__ == "__main__":  # a script: make ``tests`` and the kernel importable from the checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from aeon_kernel import hookimpl

DIR_ENV = "AEON_TEST_FLOW_DIR"
BLOCK_ENV = "AEON_TEST_FLOW_BLOCK"
_lock = threading.Lock()


def _files() -> Path:
    return Path(os.environ[DIR_ENV])


def _append(path: Path, line: str) -> None:
    with path.open("a", encoding="utf-8") as file:
        file.write(line + "\n")
        file.flush()
        os.fsync(file.fileno())


def lines(name: str, directory: Path | None = None) -> list[str]:
    path = (directory or _files()) / name
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else []


def effect(label: str, values: dict[str, Any] | None = None, count: str | None = None) -> Any:
    """A node with a side effect keyed by its idempotency key; output: the input plus ``values`` and a trail (and
    the input's ``count`` key plus one: what a loop's decision reads)."""

    def run(value: Any, context: Any) -> Any:
        key = context.idempotency_key
        with _lock:
            _append(_files() / "executions.txt", key)
            if key not in lines("ledger.txt"):
                _append(_files() / "ledger.txt", key)
        if os.environ.get(BLOCK_ENV) == context.stage_id:
            marker = _files() / f"entered-{context.stage_id.replace('/', '-')}"
            partial = marker.parent / f"{marker.name}.partial"
            partial.write_text(key, encoding="utf-8")
            partial.replace(marker)  # the parent sees the marker only once it holds the key
            deadline = time.monotonic() + 60
            while not (_files() / "release").exists():
                if time.monotonic() > deadline:
                    raise TimeoutError("nobody killed or released this node")
                time.sleep(0.005)
        trail = value.get("trail", []) if isinstance(value, dict) else []
        base = value if isinstance(value, dict) else {"value": value}
        counted = {count: int(base.get(count, 0)) + 1} if count else {}
        return {**base, **(values or {}), **counted, "trail": [*trail, label]}

    return run


@hookimpl
def aeon_register_nodes(register: Any) -> None:
    register("crash.effect", effect)


def builtins() -> list[Any]:
    """The built-in plugins a flow run needs, registered explicitly (no entry-point autoloading)."""
    from aeon_plugins import (
        in_memory,
        jsonl,
        plan_finished,
        schema_validator,
        scripted,
        sqlite_memory,
        sqlite_state,
        supervisor,
    )

    return [
        in_memory,
        jsonl,
        plan_finished,
        schema_validator,
        scripted,
        sqlite_memory,
        sqlite_state,
        supervisor,
    ]


def main() -> None:
    from aeon_kernel import Engine

    directory, mode, arg = sys.argv[1], sys.argv[2], sys.argv[3]
    kill_after = int(sys.argv[4]) if len(sys.argv) > 4 else 0
    plugins = [*builtins(), sys.modules[__name__]]
    with Engine.from_config_dir(directory, plugins=plugins, autoload=False) as flow:
        stages = flow.iter_resume(arg) if mode == "resume" else flow.iter(json.loads(arg))
        count = 0
        for count, _ in enumerate(stages, start=1):
            if count == kill_after:
                os.kill(os.getpid(), signal.SIGKILL)
        assert flow.result is not None
        print(json.dumps(flow.result.to_dict(), default=str), flush=True)
        if count < kill_after:
            sys.exit(f"the run ended after {count} stages, before the kill after stage {kill_after}")


if __name__ == "__main__":
    main()
