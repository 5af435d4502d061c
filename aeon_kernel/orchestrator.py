"""Spec 002's Orchestrator: the simple API over :class:`~aeon_kernel.runtime.run.Run`.

``execute(request)`` runs to the end and returns the result as a dict; ``iter(request)`` yields one log record
per cycle; ``resume(run_id)`` continues a stored run. Each call starts a new :class:`Run` (``start`` and
``start_resume`` return it, for callers that want ``next()``, ``state`` and the typed result); the orchestrator
keeps the components the runs share and remembers its latest run for ``get_state()`` and ``result``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from functools import partial
from typing import Any, Final

from aeon_kernel.approvals import Approval, answered, decided, waiting_on
from aeon_kernel.contracts import ConvergenceEngine, LLMAdapter, Memory, Planner, Supervisor, Validator
from aeon_kernel.errors import OrchestrationError, RunStoreError, ValidationError
from aeon_kernel.hookspecs import HOOKSPEC_VERSION
from aeon_kernel.kinds import default
from aeon_kernel.llm.client import ModelClient
from aeon_kernel.models import LogEntry, OrchestrationState, Plan, utc_now
from aeon_kernel.output_types import output_type as typed
from aeon_kernel.plugins import AeonPluginManager, Registries, build_plugin_manager, loaded_plugins
from aeon_kernel.runtime.context import Components
from aeon_kernel.runtime.run import Run, commit_record, extend_ttl
from aeon_kernel.runtime.scheduler import Scheduler
from aeon_kernel.runtime.store import StateStore, StoredRun
from aeon_kernel.tools import ToolRegistry
from aeon_kernel.version import __version__

DEFAULT_TTL: Final = 50
_RUN_ID: Final = re.compile(r"[0-9a-f]{12}4[0-9a-f]{3}[89ab][0-9a-f]{15}")


def _peek(store: StateStore, run_id: str) -> StoredRun | None:
    """The stored run read without a claim (to say why it cannot be claimed), or None when it cannot be read."""
    try:
        return store.load(run_id)
    except Exception:
        return None


def new_run_id() -> str:
    """A random (version 4) UUID as 32 hex digits, like ``uuid.uuid4().hex`` at a fifth of its cost."""
    raw = bytearray(os.urandom(16))
    raw[6] = (raw[6] & 0x0F) | 0x40  # version 4
    raw[8] = (raw[8] & 0x3F) | 0x80  # RFC 4122 variant
    return raw.hex()


def is_run_id(text: Any) -> bool:
    """Whether ``text`` is a run id as :func:`new_run_id` makes them, the only kind a caller may choose."""
    return isinstance(text, str) and _RUN_ID.fullmatch(text) is not None


class Orchestrator:
    """The main orchestration kernel (spec 002).

    :param llm_adapter: the model; wrapped with the kernel's retry policy unless it already is a ModelClient.
    :param memory: where step results are written and read back.
    :param tool_registry: the tools steps may call.
    :param supervisor: repairs malformed output; give it the same ModelClient (``Engine`` does) so its calls
        are retried and counted in the cycle's log line.
    :param validator: checks plans, outputs and tool calls.
    :param ttl: maximum number of cycles (FR-034).
    :param convergence: decides, when the plan is finished, whether the run reached its answer.
    :param plugin_manager: hooks for step execution and telemetry; a bare kernel-only manager when omitted.
    :param state_store: when given, every cycle is committed to it before it is logged, and interrupted runs
        can be continued with :meth:`resume` (FR-013).
    :param planner: writes the plan; the planner registered as ``model`` on ``llm_adapter`` when omitted.
    :param scheduler: builds each run's scheduler; the scheduler registered as ``linear`` when omitted.
    :param deadline: seconds each run may take (checked between cycles; see ``Run``).
    """

    def __init__(
        self,
        llm_adapter: LLMAdapter,
        memory: Memory,
        tool_registry: ToolRegistry,
        supervisor: Supervisor,
        validator: Validator,
        ttl: int = DEFAULT_TTL,
        *,
        convergence: ConvergenceEngine | None = None,
        plugin_manager: AeonPluginManager | None = None,
        max_tokens: int = 512,
        temperature: float = 0.0,
        manifest: dict[str, Any] | None = None,
        state_store: StateStore | None = None,
        planner: Planner | None = None,
        scheduler: Callable[[], Scheduler] | None = None,
        deadline: float | None = None,
    ) -> None:
        if ttl < 1:
            raise ValueError(f"ttl must be at least 1, got {ttl}")
        llm = llm_adapter if isinstance(llm_adapter, ModelClient) else ModelClient(llm_adapter)
        self.pm = plugin_manager if plugin_manager is not None else build_plugin_manager(autoload=False)
        if planner is None or scheduler is None:  # the defaults, found by their registered names
            registries = Registries(self.pm)
            if planner is None:
                offered = {"llm": llm, "validator": validator, "supervisor": supervisor}
                settings = {"max_tokens": max_tokens, "temperature": temperature}
                planner = registries["planners"].bound(default("planners"), {**offered, **settings})()
            if scheduler is None:
                scheduler = registries["schedulers"].bound(default("schedulers"))
        self.components = Components(
            llm=llm,
            memory=memory,
            tools=tool_registry,
            supervisor=supervisor,
            validator=validator,
            planner=planner,
            convergence=convergence,
            max_tokens=max_tokens,
            temperature=temperature,
        )
        self.ttl = ttl
        self.manifest = manifest
        self.state_store = state_store
        self.scheduler = scheduler
        #: seconds each run may take (``Run``'s ``deadline``); None: no limit
        self.deadline = deadline
        #: the latest run this orchestrator started
        self.run: Run | None = None
        self._iterating = False

    # --- runs ----------------------------------------------------------------------------------------------------

    def start(
        self,
        user_request: str,
        initial_plan: Plan | dict[str, Any] | None = None,
        *,
        run_id: str | None = None,
        output_type: Any = None,
    ) -> Run:
        """A new run of ``user_request`` (nothing happens until it is iterated, stepped or executed). ``run_id``: its
        id, chosen by the caller (a batch journals it before the run starts): one :func:`new_run_id` could make, that
        the state store does not hold — a stored run goes on only through :meth:`start_resume`. ``output_type``: a
        typed ``output`` besides the answer (its JSON Schema kept in the manifest; :mod:`aeon_kernel.output_types`)."""
        if not isinstance(user_request, str) or not user_request.strip():
            raise ValidationError("the request must be a non-empty string")
        if run_id is not None and not is_run_id(run_id):
            raise ValidationError(f"{run_id!r} is not a run id (the hex of a version 4 UUID)")
        if run_id is not None and self.state_store is not None and _peek(self.state_store, run_id):
            raise RunStoreError(f"run {run_id!r} is stored already: resume it, or choose another id")
        output_schema = None if output_type is None else typed(output_type).schema
        plan = self._initial_plan(initial_plan)
        current = (plan.running_step() or plan.next_pending()) if plan is not None else None
        # Every part is checked already (the request above, the plan by its model, the TTL in __init__).
        state = OrchestrationState.trusted(
            run_id=run_id or new_run_id(),
            request=user_request,
            plan=plan,
            current_step_id=current.step_id if current else None,
            tool_history=(),
            llm_outputs=(),
            supervisor_actions=(),
            checks=(),
            errors=(),
            ttl_remaining=self.ttl,
            cycle=0,
            status="running",
            scheduler_state={},
        )
        return self._new_run(state, output_schema=output_schema)

    def start_resume(
        self,
        run_id: str,
        *,
        take_over: bool = False,
        ttl: int | None = None,
        approval: Approval | None = None,
    ) -> Run:
        """The interrupted run ``run_id``, claimed from the state store and ready to continue.

        Completed steps are never executed again; a step that was running when the process died is executed
        again with the same idempotency key; the TTL continues from what was left. A finished, corrupt or
        unknown run, or one another live claim holds (another process, or another thread or Engine of this one),
        raises ``RunStoreError`` — never a silent fresh start. ``take_over`` also takes a run held by a process on
        another host, which cannot be checked (see ``StateStore.claim``).

        ``ttl``: that many more cycles, recorded in the run's history (``runtime.run.extend_ttl``): how a run whose
        TTL expired goes on (an interrupted one gets them on top). A completed or failed run cannot be continued.

        ``approval``: a person's answer to the call a ``waiting`` run waits on (decision 0021), recorded in its
        history before it goes on. A waiting run resumed without one goes on only when its request has expired (the
        call then fails); else ``RunStoreError`` says how to answer.
        """
        store = self.state_store
        if store is None:
            raise OrchestrationError('resuming needs a state store: set [state] use = "sqlite" in aeon.toml')
        if ttl is not None and (isinstance(ttl, bool) or not isinstance(ttl, int) or ttl < 1):
            raise ValueError(f"ttl must be a positive integer, not {ttl!r}")
        # Claimed first, then read: what is read is then what no other claim can change meanwhile (a run read
        # before another claim ran and released it would repeat that claim's steps).
        extended = False
        try:
            self._claim(run_id, take_over)
        except RunStoreError as refused:
            stored = _peek(store, run_id)
            status = stored.state.status if stored is not None else "running"
            if status == "waiting" and stored is not None:
                self._check_scheduler(run_id, stored)
                self._answer(store, stored, approval)
                self._claim(run_id, take_over)
            elif stored is None or status == "running" or (status != "ttl_expired" and ttl is None):
                raise
            elif ttl is None or status != "ttl_expired":
                how = "aeon flow resume" if stored.manifest.get("scheduler") == "flow" else "aeon resume"
                why = (
                    f"its TTL expired after {stored.state.cycle} cycles. Give it more and it goes on: {how} "
                    f"{run_id} --ttl N (in Python: resume(run_id, ttl=N))"
                    if ttl is None
                    else f"a {status} run cannot be continued; --ttl gives more cycles only to a run whose TTL "
                    "expired (run the request again)"
                )
                raise RunStoreError(f"{refused}: {why}") from None
            else:
                # No claim can hold a finished run: the extension, committed unclaimed, makes it running again (the
                # store refuses a second extension of the same cycles), and the claim follows.
                self._check_scheduler(run_id, stored)
                extend_ttl(store, stored, ttl)
                extended = True
                self._claim(run_id, take_over)
        try:
            stored = store.load(run_id)
            self._check_scheduler(run_id, stored)
            if approval is not None and not answered(stored.state):
                raise RunStoreError(
                    f"run {run_id!r} is not waiting for approval; resume it: aeon resume {run_id}"
                )
            if ttl is not None and not extended:
                stored = extend_ttl(store, stored, ttl)
        except BaseException:
            with suppress(Exception):  # the reason it cannot go on matters more than a failed release
                store.release(run_id)
            raise
        run = self._new_run(stored.state, resumed=stored)
        if ttl is not None:  # the resume's manifest line says so too
            run.manifest["ttl_extended"] = {"by": ttl, "at_cycle": stored.state.cycle - 1}
        return run

    def execute(
        self,
        user_request: str,
        initial_plan: Plan | dict[str, Any] | None = None,
        *,
        output_type: Any = None,
    ) -> dict[str, Any]:
        """Run the loop to the end and return ``plan``, ``status``, ``final_state`` (and ``answer``, ``errors``;
        ``output``, of that type, when ``output_type`` asked for one: see :meth:`start`).

        ``status`` is ``completed`` (every step complete and the convergence engine agrees), ``failed``, or
        ``ttl_expired`` (the state is kept: FR-036).
        """
        wanted = None if output_type is None else typed(output_type)  # its schema made once, for both uses
        run = self._begin(lambda: self.start(user_request, initial_plan, output_type=wanted))
        try:
            result = run.execute().to_dict()
        finally:
            self._end(run)
        if wanted is None:
            return result
        return {**result, "output": wanted.convert(result.get("output"), run.run_id)}

    def iter(
        self,
        user_request: str,
        initial_plan: Plan | dict[str, Any] | None = None,
        *,
        output_type: Any = None,
    ) -> Iterator[LogEntry]:
        """Run the loop one cycle at a time, yielding each cycle's log record as soon as it is written.

        The final result is in ``self.result`` once the iterator is exhausted.
        """
        with self._active(lambda: self.start(user_request, initial_plan, output_type=output_type)) as run:
            yield from run

    def resume(
        self,
        run_id: str,
        *,
        take_over: bool = False,
        ttl: int | None = None,
        approval: Approval | None = None,
    ) -> Iterator[LogEntry]:
        """Continue an interrupted run from its state store, one cycle at a time (like :meth:`iter`); ``ttl``: with
        that many more cycles; ``approval``: the answer a waiting run waits for (see :meth:`start_resume`)."""
        start = partial(self.start_resume, run_id, take_over=take_over, ttl=ttl, approval=approval)
        with self._active(start) as run:
            yield from run

    def get_state(self) -> OrchestrationState:
        """The current state of the latest run (immutable; safe to keep)."""
        if self.run is None:
            raise OrchestrationError("no run has started yet: call execute() or iter() first")
        return self.run.state

    @property
    def result(self) -> dict[str, Any] | None:
        """The latest run's result as a dict, once it has ended."""
        return self.run.result.to_dict() if self.run is not None and self.run.result is not None else None

    @property
    def llm(self) -> ModelClient:
        return self.components.llm

    @property
    def memory(self) -> Memory:
        return self.components.memory

    @property
    def tools(self) -> ToolRegistry:
        return self.components.tools

    @property
    def telemetry_errors(self) -> list[dict[str, Any]]:
        """Event hooks that raised during the latest run."""
        return self.run.telemetry_errors if self.run is not None else []

    # --- internals -----------------------------------------------------------------------------------------------

    @contextmanager
    def _active(self, start: Callable[[], Run]) -> Iterator[Run]:
        """The simple API's run: one at a time per orchestrator, remembered, and closed however it ends."""
        run = self._begin(start)
        try:
            yield run
        finally:
            self._end(run)

    def _begin(self, start: Callable[[], Run]) -> Run:
        if self._iterating:
            raise OrchestrationError(
                "this orchestrator's iter() is already running; finish it, or use start() for concurrent runs"
            )
        self._iterating = True
        try:
            run = self.run = start()
        except BaseException:
            self._iterating = False
            raise
        return run

    def _claim(self, run_id: str, take_over: bool) -> None:
        assert self.state_store is not None
        if take_over:
            self.state_store.claim(run_id, take_over=True)
        else:  # a third-party store written before take_over need not know the keyword
            self.state_store.claim(run_id)

    def _answer(self, store: StateStore, stored: StoredRun, approval: Approval | None) -> None:
        """Record a person's answer to the call the waiting run ``stored`` waits on (committed unclaimed, as a TTL
        extension is: the store refuses a second answer to the same request). Without ``approval``, only an expired
        request is answered (the call fails); else the refusal says how to answer."""
        state = stored.state
        request = waiting_on(state) or {}
        if approval is None:
            expires = request.get("expires_at")
            if expires is None or utc_now() <= expires:
                raise RunStoreError(
                    f"run {state.run_id!r} waits for approval: {request.get('message', 'a call needs approval')}. "
                    f"Answer it: aeon approve {state.run_id} (--deny REASON refuses it; in Python, "
                    "Engine.approve(run_id) or Engine.deny(run_id, reason))"
                )
            approval = Approval.deny("")  # recorded as expired
        commit_record(store, *decided(state, approval, self.components.tools), "answer it")

    def _check_scheduler(self, run_id: str, stored: StoredRun) -> None:
        started_by, mine = stored.manifest.get("scheduler"), (self.manifest or {}).get("scheduler")
        if started_by and mine and started_by != mine:
            how = (
                f"aeon flow resume {run_id}" if started_by == "flow" else f'[scheduler] use = "{started_by}"'
            )
            raise RunStoreError(
                f"run {run_id!r} was started by the {started_by!r} scheduler and cannot go on under {mine!r}: "
                f"resume it with {how}"
            )

    def _end(self, run: Run) -> None:
        self._iterating = False
        run.close()

    def _new_run(
        self,
        state: OrchestrationState,
        resumed: StoredRun | None = None,
        output_schema: dict[str, Any] | None = None,
    ) -> Run:
        manifest = self.manifest or self._default_manifest()
        # what the run's output must be: the caller's, or, resumed, what the run was started with
        output_schema = resumed.manifest.get("output_schema") if resumed is not None else output_schema
        return Run(
            state,
            self.scheduler(),
            self.components,
            self.pm,
            store=self.state_store,
            manifest={**manifest, "output_schema": output_schema} if output_schema else manifest,
            resumed=resumed,
            deadline=self.deadline,
        )

    def _default_manifest(self) -> dict[str, Any]:
        """What produced a run, when no Engine supplied the manifest (issue: run manifest)."""
        return {
            "aeon_version": __version__,
            "hookspec_version": HOOKSPEC_VERSION,
            "plugins": loaded_plugins(self.pm),
            "config_fingerprint": None,
            "model": self.components.llm.model_id,
        }

    def _initial_plan(self, initial_plan: Plan | dict[str, Any] | None) -> Plan | None:
        if initial_plan is None or isinstance(initial_plan, Plan):
            return initial_plan
        return self.components.validator.validated_plan(initial_plan)
