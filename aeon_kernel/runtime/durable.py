"""What every durable :class:`~aeon_kernel.runtime.store.StateStore` does the same, whatever it keeps runs in.

The text a store writes (scrubbed of secrets, every lone surrogate kept as its escape, JSON that never fails
silently), the result it keeps when a run ends, the refusals of a claim, and a run rebuilt from what the store
read back. A store plugin uses these through the public API (``from aeon_kernel import check_claim, ...``), so
two stores give the same answers in the same words.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Container, Iterable
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel

from aeon_kernel.errors import RunStoreError
from aeon_kernel.memory_values import is_utf8
from aeon_kernel.models import Check, LogEntry, OrchestrationState, Plan, RunStatus, StepStatus
from aeon_kernel.secrets import scrub_secrets, scrub_secrets_json

# --- the text a store writes ---------------------------------------------------------------------------------


def storable_text(text: str) -> str:
    """``text`` as a store can keep it: no secret (:func:`aeon_kernel.scrub_secrets`), and a lone surrogate (from
    bytes that were not UTF-8) kept as its escape, so the text is UTF-8."""
    text = scrub_secrets(text)
    return text if is_utf8(text) else text.encode("utf-8", "backslashreplace").decode("utf-8")


def failure_text(exc: BaseException) -> str:
    """What went wrong, as text a store and a terminal can hold (even from an exception whose ``str()`` fails)."""
    try:
        return storable_text(str(exc))
    except Exception:
        return f"{type(exc).__name__} (its message cannot be shown)"


def storable_json(value: Any) -> str:
    """``value`` as JSON text, scrubbed of secrets; ASCII-escaped, so even a lone surrogate is kept exactly.

    Raises :class:`RunStoreError` for a value that is not JSON (too deep, too large a number, or an object whose
    ``str()`` fails)."""
    try:
        return scrub_secrets_json(json.dumps(value, default=str))
    except Exception as exc:
        raise RunStoreError(f"a value is not JSON: {type(exc).__name__}: {failure_text(exc)[:300]}") from None


def storable_model_json(model: BaseModel, exclude: set[str] | None = None) -> str:
    """A model's JSON, scrubbed of secrets; one holding a lone surrogate (which pydantic cannot write as UTF-8) is
    written escaped, as :func:`storable_json` writes it."""
    try:
        text = model.model_dump_json(exclude=exclude)
    except ValueError:
        return storable_json(model.model_dump(mode="json", exclude=exclude))
    return scrub_secrets_json(text)


def storable_result(state: OrchestrationState, result: dict[str, Any]) -> str:
    """The JSON text a store keeps as the result of a finished run: ``result`` without its ``final_state`` (the
    store holds the state already) — or, when that cannot be stored whole, a summary of it (the run id, its
    status, its message and why the rest was not stored), so a run is never left looking unfinished."""
    summary = {k: v for k, v in result.items() if k != "final_state"}
    try:
        return storable_json(summary)
    except RunStoreError as exc:
        return storable_json(
            {
                "run_id": state.run_id,
                "status": state.status,
                "message": storable_text(str(summary.get("message", ""))),
                "unstored": str(exc),
            }
        )


# --- claims ------------------------------------------------------------------------------------------------------


def check_claim(
    run_id: str,
    status: str,
    pid: int | None,
    host: str | None,
    token: str | None,
    *,
    here: str,
    live: Container[str],
    take_over: bool = False,
) -> None:
    """Raise :class:`RunStoreError` when the run may not be claimed; return when a new claim may take it.

    ``status`` is the run's stored status; ``pid``, ``host`` and ``token`` its recorded owner (``pid`` None: no
    claim holds it); ``here`` the name of this host; ``live`` the tokens of the claims this process's store
    holds right now. Refused: a finished run; an owner on another host, which cannot be checked from here,
    unless ``take_over`` (the user says it is gone); an owner in this process whose token is live (another thread
    or Engine); an owner that is a live process on this host. A claim whose process is gone is stale: it may be
    taken."""
    if status != "running":
        raise RunStoreError(f"run {run_id!r} already finished ({status}); nothing to resume")
    if pid is not None and host != here:  # an owner elsewhere: not checkable from here
        if not take_over:
            raise RunStoreError(
                f"run {run_id!r} is held by process {pid} on {host}, which cannot be checked from "
                f"{here}. If that process is gone (a recreated container, another machine that "
                f"stopped), take the run over: aeon resume {run_id} --take-over"
            )
    elif pid is not None:
        if pid == os.getpid():
            if token in live:
                raise RunStoreError(
                    f"run {run_id!r} is being run by another run of this process (another thread or "
                    "Engine); wait for it to end, or stop it"
                )
        elif _alive(pid):
            raise RunStoreError(f"run {run_id!r} is being run by process {pid}; wait for it or stop it")


Liveness = Literal["live", "stale", "unchecked", "released"]


def claim_liveness(pid: int | None, host: str | None) -> Liveness:
    """What a running run's recorded owner is now, seen from this process: ``released`` (no claim), ``unchecked``
    (a claim on another host), ``live`` (this process, or a process of this host that runs) or ``stale``."""
    if pid is None:
        return "released"
    if host != socket.gethostname():
        return "unchecked"
    return "live" if pid == os.getpid() or _alive(pid) else "stale"


def _alive(pid: int) -> bool:
    """Whether ``pid`` is a running (not zombie) process on this host."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"


# --- a run read back -----------------------------------------------------------------------------------------


def plan_snapshots(entries: tuple[LogEntry, ...], plan: Plan | None) -> tuple[LogEntry, ...]:
    """Rebuild each cycle's ``plan_state`` (the plan at cycle start) from the final plan, for a store that does not
    keep a snapshot per cycle (one would make every cycle record as large as the plan).

    Steps run strictly in order and a step changes only in its own cycle, so the plan at the start of a cycle is
    the final plan with every step not yet finished put back to pending. (A step repaired in its cycle shows its
    repaired definition in earlier snapshots; nothing else differs.)
    """
    if plan is None:
        return entries
    finished: set[str] = set()
    rebuilt = []
    for entry in entries:
        snapshot = None
        if entry.phase == "step":
            steps = [
                s
                if s.step_id in finished
                else s.model_copy(
                    update={"status": StepStatus.PENDING, "result": None, "failure": None, "errors": ()}
                )
                for s in plan.steps
            ]
            snapshot = plan.model_copy(update={"steps": tuple(steps)})
        rebuilt.append(entry.model_copy(update={"plan_state": snapshot}))
        if entry.step_id is not None and entry.step_status in ("complete", "failed"):
            finished.add(entry.step_id)
    return tuple(rebuilt)


def stored_state(
    run_id: str,
    request: str,
    plan: Plan | None,
    entries: tuple[LogEntry, ...],
    llm_outputs: Iterable[dict[str, Any]],
    *,
    current_step_id: str | None,
    ttl_remaining: int,
    cycle: int,
    status: RunStatus,
    scheduler_state: str | None,
    result: dict[str, Any] | None = None,
) -> OrchestrationState:
    """A run's state rebuilt from what a store read back: its fields, its final ``plan``, its cycle records
    (``entries``, whose tool calls, supervisor actions, checks and errors make the histories), the model outputs of
    every cycle in order, and its scheduler state as the JSON text stored (None or empty: none). A finished run's
    stored ``result`` gives its checks whole (its verification holds those recorded as the run ended, after its
    last cycle record).

    Raises (a ``ValueError``, as pydantic's validation errors and bad JSON are) when what was read does not make
    a run — among them a number of records that is not ``cycle``: the store then says the run is corrupt."""
    state = OrchestrationState(
        run_id=run_id,
        request=request,
        plan=plan,
        current_step_id=current_step_id,
        tool_history=tuple(c for e in entries for c in e.tool_calls),
        llm_outputs=tuple(llm_outputs),
        supervisor_actions=tuple(a for e in entries for a in e.supervisor_actions),
        checks=_checks(entries, result),
        errors=tuple(err for e in entries for err in e.errors),
        ttl_remaining=ttl_remaining,
        cycle=cycle,
        status=status,
        scheduler_state=json.loads(scheduler_state) if scheduler_state else {},
    )
    if len(entries) != cycle:
        raise ValueError(f"{len(entries)} cycle records for {cycle} cycles")
    return state


def _checks(entries: tuple[LogEntry, ...], result: dict[str, Any] | None) -> tuple[Check, ...]:
    verification = result.get("verification") if isinstance(result, dict) else None
    if isinstance(verification, dict) and isinstance(verification.get("checks"), list):
        return tuple(Check.model_validate(check) for check in verification["checks"])
    return tuple(c for e in entries for c in e.checks)
