"""The multi-pass scheduler (``multipass``, spec 003): phases A to D on the runtime, wrapping the linear scheduler.

Every cycle is one unit of work, in an order that does not depend on what the model answers:

    pass 0   A  profile          infer the TaskProfile (the default one on failure), allocate the TTL
             B  plan             the planner writes the plan (with the profile)
                validate         the semantic validator judges it          } deep tasks only
                refine           deltas for what it found, applied         } (when it found something)
    pass k   C  step …           the plan's steps, strictly in order, until none is left or one is invalid
                evaluate         the results are validated and the convergence engine assesses them
                refine           not converged: deltas, applied by the kernel — the request's parts (once,
                                 when it sequences several) or the planner's refinements
                refine           (a decomposed request) before each part runs: its subplan, in its place
             D  update_profile   the profile is updated when the pass showed a mismatch (deep tasks, and
                                 any task just decomposed: its new profile's TTL pays for the parts)

A *shallow* task (``reasoning_depth`` at most ``shallow_depth``, or a plan of at most ``shallow_plan_steps``
steps) gets no model call to judge it: the semantic validator's structural checks only, and it has converged when
every step completed and they found nothing HIGH or CRITICAL. A deep task gets the full validation (decision 0014).

When a pass does not converge because the plan lost part of the request (a blocking semantic issue, a failed or
blocked step) and the request has parts ("…, then …", or as the planner proposes), the next pass plans them one at
a time (``create_subplan``, given the previous part's result) and reviews each part's calls against the part
(:mod:`~aeon_plugins.multipass.decompose`), once per run, then phase D; else ``refine_plan`` proposes deltas.

Each step records its ``clarity_state`` as it ends: CLEAR (done as asked), PARTIALLY_CLEAR (a fallback, an answer
the kernel grounded) or BLOCKED (failed). A BLOCKED step ends ``invalid`` (003-models.md): it holds the run's
place, so the steps after it wait and the pass is evaluated at once; the refinement may MODIFY, REPLACE or REMOVE
it (the planner is told it is blocked); one that leaves it in place fails it: the run goes on with its best plan.

A run ends ``completed`` when a pass converges, ``failed`` when it cannot (no plan, nothing left to refine, or
``max_passes``), ``ttl_expired`` when the TTL runs out (with the latest completed pass and its scores). Its memo
(:class:`~aeon_plugins.multipass.memo.MultiPassMemo`: stage, pass, profile, ledger, passes) is kept in the run's
state, so it resumes like any other run; :meth:`MultiPassScheduler.preview` tells what the next cycle does.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Final

from aeon_kernel import (
    AdaptiveDepth,
    Conclusion,
    ConvergenceAssessment,
    OrchestrationState,
    Plan,
    Preview,
    RecursivePlanner,
    RefinementAction,
    RunContext,
    Scheduler,
    SemanticValidationReport,
    SemanticValidator,
    StepExecutionResult,
    StepStatus,
    TaskProfile,
    Verdict,
    Work,
)
from aeon_kernel.errors import AeonError, NestingDepthError, OrchestrationError
from aeon_kernel.kit import (
    SEVERITY_ORDER,
    Check,
    ClarityState,
    ExecutionHistory,
    ExecutionPass,
    error_record,
    utc_now,
)
from aeon_plugins.multipass.decompose import (
    part_context,
    part_steps,
    request_parts,
    reviewed,
    settle_flagged_plan,
    with_context,
)
from aeon_plugins.multipass.deltas import RefinementLedger, apply_refinements, depth_of
from aeon_plugins.multipass.memo import (
    STAGES,
    MultiPassMemo,
    OpenPass,
    Part,
    Stage,
    Subplan,
    part_record,
    upcoming,
)
from aeon_plugins.planning import LinearPlanScheduler

#: issue severities that hold a shallow task's convergence back (as the ``model`` convergence engine's do)
BLOCKING: Final = ("HIGH", "CRITICAL")


class Decomposition(list[RefinementAction]):
    """The refine stage's outcome when the request is decomposed: the ADD deltas of its part steps."""


class MultiPassScheduler(Scheduler[MultiPassMemo, Any]):
    """Spec 003's loop. Options come from ``[reasoning]`` in ``aeon.toml`` (see the module docstring)."""

    memo_type = MultiPassMemo

    def __init__(
        self,
        *,
        completeness_threshold: float = 0.95,
        coherence_threshold: float = 0.90,
        consistency_threshold: float = 0.90,
        max_passes: int = 4,
        refinements_per_fragment: int = 3,
        max_refinements: int = 10,
        max_depth: int = 5,
        shallow_depth: int = 2,
        shallow_plan_steps: int = 1,
        ttl_cap: int | None = None,
        depth_heuristic: Callable[[], AdaptiveDepth] | None = None,
        semantic_validator: Callable[[], SemanticValidator] | None = None,
    ) -> None:
        self.criteria = {
            "completeness_threshold": completeness_threshold,
            "coherence_threshold": coherence_threshold,
            "consistency_threshold": consistency_threshold,
        }
        self.max_passes = max_passes
        self.limits = {
            "per_fragment": refinements_per_fragment,
            "limit": max_refinements,
            "max_depth": max_depth,
        }
        self.shallow_depth = shallow_depth
        self.shallow_plan_steps = shallow_plan_steps
        self.ttl_cap = ttl_cap
        self.linear = LinearPlanScheduler(blocked_is_invalid=True)
        #: the ``[depth]`` and ``[semantic_validator]`` components, built when a pass first needs them
        self._depth, self._validator = depth_heuristic, semantic_validator

    def depth(self) -> AdaptiveDepth:
        if self._depth is None:
            raise OrchestrationError(
                "this multipass scheduler was built without a depth heuristic (depth_heuristic=)"
            )
        return self._depth()

    def semantic_validator(self) -> SemanticValidator:
        if self._validator is None:
            raise OrchestrationError("this multipass scheduler was built without a semantic validator")
        return self._validator()

    # --- the scheduler's memory, kept in the run's state ----------------------------------------------------------

    def _memo(self, run: RunContext) -> MultiPassMemo:
        memo = self.memo(run)
        assert memo is not None, "start() keeps the memo"
        return memo

    def _stage(self, run: RunContext, stage: Stage) -> None:
        memo = self._memo(run)
        memo.stage = stage
        if memo.current is not None and stage in STAGES:
            memo.current.phase = STAGES[stage][1]
        run.state.changed()

    def _profile(self, run: RunContext) -> TaskProfile:
        return self._memo(run).profile or TaskProfile.default("not inferred yet")

    def _deep(self, run: RunContext) -> bool:
        """Whether the task gets the semantic validation and the judge: its profile says it is not shallow, and
        its plan (as written: steps added later do not count) has more than ``shallow_plan_steps`` steps.
        Decided when the plan is written: a profile deepened later buys cycles, not a judge."""
        memo = self._memo(run)
        if memo.deep is not None:
            return memo.deep
        if self._profile(run).reasoning_depth <= self.shallow_depth:
            return False
        written = memo.plan_steps
        if written is None:
            written = len(run.state.steps) if run.state.goal is not None else None
        return written is None or written > self.shallow_plan_steps

    def _event(self, run: RunContext, event: str, record: dict[str, Any]) -> None:
        if run.listens("aeon_pass_event"):
            run.emit(
                "aeon_pass_event",
                run_id=run.run_id,
                pass_number=self._memo(run).pass_number,
                event=event,
                record=record,
            )

    # --- the protocol ----------------------------------------------------------------------------------------------

    def start(self, run: RunContext, *, resumed: bool) -> None:
        if self.memo(run) is None:  # a new run (a resumed one has its memo in its state)
            ledger = RefinementLedger(
                per_fragment=self.limits["per_fragment"],
                limit=self.limits["limit"],
                max_depth=self.limits["max_depth"],
            )
            budget = run.state.ttl_remaining + run.state.cycle
            planned = run.state.goal is not None  # an initial plan was given: straight to pass 1
            memo = MultiPassMemo(
                stage="execute" if planned else "profile",
                pass_number=1 if planned else 0,
                ledger=ledger,
                ttl_cap=min(self.ttl_cap, budget) if self.ttl_cap else budget,
                started_at=time.time(),
            )
            run.state.keep(memo)
            self._open_pass(run)
        self.linear.start(run, resumed=resumed)

    def status(self, run: RunContext) -> Verdict | None:
        memo = self._memo(run)
        if memo.stage != "done":
            return None
        plan = run.state.plan()
        converged = (
            memo.converged
            and plan is not None
            and all(s.status is StepStatus.COMPLETE for s in self._attempt(memo.parts, plan).steps)
        )
        return Verdict("completed" if converged else "failed", memo.assessment)

    def next_work(self, run: RunContext) -> Work:
        memo = self._memo(run)
        stage = memo.stage
        if stage == "execute":
            current = run.state.current_step_id
            if current is not None and memo.part(current, "pending") is not None:
                refused = memo.ledger.refusal(current)
                if refused is None:
                    self._stage(run, "subplan")  # a part of a decomposed request: its subplan first
                    return Work(STAGES["subplan"][0])
                # a subplan the limits would refuse is not asked for: the part runs as it is
                self._mark_part(run, current, "unplanned", error=refused)
                self._event(run, "subplan", {"part": current, "applied": False, "refused": refused})
            if current is not None and run.state.step(current).status is not StepStatus.INVALID:
                return self.linear.next_work(run)
            self._stage(run, "evaluate")  # nothing (more) to run in this pass
            stage = "evaluate"
        return Work(STAGES[stage][0])

    def perform(self, work: Work, run: RunContext) -> Any:
        components, memo = run.components, self._memo(run)
        if work.phase == "step":  # a part's step is reviewed against its part
            return reviewed(memo.parts, run, work.step_id, self.linear.perform(work, run))
        stage = memo.stage
        if stage == "profile":
            depth = self.depth()
            profile = depth.infer_task_profile(run.state.request, record=run.record_action)
            return profile, depth.allocate_ttl(profile, self._memo(run).ttl_cap)
        if stage == "plan":
            return components.planner.generate_plan(
                run.state.request, self._profile(run), components.tools, record=run.record_action
            )
        if stage == "validate":
            validator = self.semantic_validator()
            plan = run.state.plan()
            assert plan is not None
            return validator.validate(
                plan.model_dump(mode="json"), "plan", components.tools, record=run.record_action
            )
        if stage in ("refine_plan", "refine"):
            return self._proposals(run)
        if stage == "subplan":
            return self._subplan(run)
        if stage == "evaluate":
            return self._evaluate(run)
        if stage == "update_profile":
            return self._updated_profile(run)
        raise AssertionError(f"no work for stage {stage!r}")

    def apply(self, work: Work, outcome: Any, run: RunContext) -> None:
        if work.phase == "step":
            self.linear.apply(work, outcome, run)
            if work.step_id is not None:
                self._clarity(run, work.step_id, outcome)
            return  # next_work moves on to evaluate when nothing is left
        stage = self._memo(run).stage
        if stage == "profile":
            profile, ttl = outcome
            self._use_profile(run, profile, ttl)
            self._stage(run, "plan")
        elif stage == "plan":
            self.linear.apply(Work("plan"), outcome, run)
            memo = self._memo(run)
            memo.plan_steps = len(run.state.steps)
            memo.deep = self._deep(run)
            run.state.changed()
            if memo.deep:
                self._stage(run, "validate")
            else:
                self._next_pass(run)
        elif stage == "validate":
            report: SemanticValidationReport = outcome
            self._keep_report(run, report)
            if SEVERITY_ORDER[report.overall_severity] >= SEVERITY_ORDER["MEDIUM"]:
                self._stage(run, "refine_plan")
            else:
                self._next_pass(run)
        elif stage == "refine_plan":
            self._refine(run, outcome)
            self._next_pass(run)
        elif stage == "subplan":
            self._use_subplan(run, *outcome)
        elif stage == "refine":
            changed = self._refine(run, outcome)
            if isinstance(outcome, Decomposition):
                self._decomposed(run, outcome)
            self._give_up_blocked(run)
            if not changed:
                self._finish(run)  # not converged, and nothing left to change
            elif self._deep(run) or isinstance(outcome, Decomposition):  # parts: the task was under-profiled
                self._stage(run, "update_profile")
            else:
                self._next_pass(run)
        elif stage == "evaluate":
            self._record_evaluation(run, *outcome)
        elif stage == "update_profile":
            if outcome is not None:
                ttl = self.depth().allocate_ttl(outcome, self._memo(run).ttl_cap)
                self._use_profile(run, outcome, ttl, update=True)
            self._next_pass(run)

    def abandon(self, work: Work | None, error: BaseException, run: RunContext) -> None:
        """What a failed phase leaves behind: spec 003 says which failures a run survives."""
        stage = self._memo(run).stage
        if work is not None and work.phase == "step":
            self.linear.abandon(work, error, run)
        elif stage == "profile":  # the default profile (003-models.md)
            self._use_profile(run, TaskProfile.default(f"{type(error).__name__}: {error}"), None)
            self._stage(run, "plan")
        elif stage in ("plan", "refine"):
            self._finish(run)  # no usable plan; or nothing more to try
        elif stage in ("validate", "refine_plan", "update_profile"):
            self._next_pass(run)  # advisory or best effort: go on with the plan and profile as they are
        elif stage == "subplan":  # no subplan: the part runs as it is, an llm step (best effort)
            part = run.state.current_step_id
            if isinstance(error, NestingDepthError) and part is not None:
                # past the nesting limit: the fragment needs a person (spec 003)
                self._memo(run).ledger.manual.add(part)
                run.state.changed()
            why = f"{type(error).__name__}: {error}"
            self._mark_part(run, part, "unplanned", error=why)
            self._event(run, "subplan", {"part": part, "applied": False, "error": why})
            self._stage(run, "execute")
        elif stage == "evaluate":
            failed = ConvergenceAssessment(converged=False, reason_codes=("evaluation_error",))
            self._record_evaluation(run, failed, None)

    def conclude(self, state: OrchestrationState, verdict: Verdict) -> Conclusion:
        linear = self.linear.conclude(state, verdict)
        memo = MultiPassMemo.stored(state)
        history = self._history(state, memo, verdict, linear.answer)
        best = next((p for p in reversed(history.passes) if p.completed and p.assessment), None)
        message = linear.message
        if verdict.status == "completed" and state.plan is not None:
            attempt = self._attempt(memo.parts if memo else [], state.plan)
            earlier = state.plan.steps[: len(state.plan.steps) - len(attempt.steps)]
            superseded = [s.step_id for s in earlier if s.status is not StepStatus.COMPLETE]
            if superseded:
                message = (
                    f"every step of the request's parts completed (steps {superseded} of the attempt before "
                    "them did not: the parts superseded it)"
                )
        if verdict.status == "ttl_expired" and best is not None and best.assessment is not None:
            message += (
                f" The latest completed pass ({best.pass_number}) scored completeness "
                f"{best.assessment.completeness_score:.2f} and coherence {_score(best.assessment.coherence_score)}."
            )
        elif (
            verdict.status == "failed"
            and best is not None
            and best.assessment
            and best.assessment.reason_codes
        ):
            reasons = ", ".join(best.assessment.reason_codes)
            message += f" Not converged after {history.total_passes} pass(es): {reasons}."
        return Conclusion(
            answer=linear.answer,
            message=message,
            details={"execution_history": history.model_dump(mode="json")},
            convergence=best.assessment if best else None,
        )

    def end(self, run: RunContext) -> None:
        self.linear.end(run)

    def preview(self, run: RunContext) -> Preview | None:
        """The next cycle's stage, or the step it executes (:func:`~aeon_plugins.multipass.memo.upcoming`)."""
        return upcoming(run, self.linear)

    # --- the phases --------------------------------------------------------------------------------------------------

    def _use_profile(
        self, run: RunContext, profile: TaskProfile, ttl: int | None, *, update: bool = False
    ) -> None:
        """Phase A (and D): keep the profile and give the run the TTL it allocates, never more than the cap."""
        memo = self._memo(run)
        cap = memo.ttl_cap
        memo.profile = profile
        run.state.changed()
        self._event(run, "profile_update" if update else "profile", profile.model_dump(mode="json"))
        if ttl is None:
            return
        left = max(1, min(ttl, cap) - run.state.cycle)  # the cycle doing this is counted when it ends
        run.state.ttl_remaining = left if update else min(run.state.ttl_remaining, left)
        memo.allocated_ttl = ttl
        run.state.changed()
        self._event(run, "ttl", {"allocated": ttl, "cap": cap, "remaining": run.state.ttl_remaining})

    def _keep_report(self, run: RunContext, report: SemanticValidationReport) -> None:
        memo = self._memo(run)
        if memo.current is not None:
            memo.current.report = report
        memo.report = report
        run.state.changed()
        self._event(run, "report", report.model_dump(mode="json"))

    def _proposals(self, run: RunContext) -> list[RefinementAction]:
        planner = run.components.planner
        plan = run.state.plan()
        if not isinstance(planner, RecursivePlanner) or plan is None:
            return []  # a planner that cannot refine: the plan stays as it is
        memo = self._memo(run)
        if memo.stage == "refine" and _dropped_part(memo) and not memo.decomposed:
            parts = request_parts(run.state.request, planner, run.record_action)
            if len(parts) > 1:  # what one pass could not do: the parts, one at a time
                return self._decomposition(run, plan, parts)
        issues = memo.report.issues if memo.report else ()
        reasons = list(memo.assessment.reason_codes) if memo.assessment else []
        blocked = [s.step_id for s in run.state.steps if s.status is StepStatus.INVALID]
        executed = {s.step_id for s in run.state.steps if s.status.is_terminal}
        return planner.refine_plan(
            plan,
            list(issues),
            reasons,
            blocked,
            executed,
            record=run.record_action,
            tool_registry=run.components.tools,
        )

    def _refine(self, run: RunContext, actions: list[RefinementAction]) -> bool:
        """Apply the planner's deltas — the kernel does, never the planner; whether the plan changed."""
        memo = self._memo(run)
        ledger = RefinementLedger.from_json(memo.ledger.to_json())  # the memo's, once the deltas are applied
        steps, outcomes = apply_refinements(run.state.steps, actions, ledger)
        applied = [o.action for o in outcomes if o.applied]
        if applied:
            run.state.restructure(steps)
        for outcome in outcomes:
            if not outcome.applied:
                run.fail_cycle({"type": outcome.error_type, "message": outcome.reason, "phase": "refine"})
        if memo.current is not None:
            memo.current.refinements = [*memo.current.refinements, *applied]
        memo.ledger = ledger
        run.state.changed()
        self._event(
            run, "refinement", {"outcomes": [o.to_json() for o in outcomes], "ledger": ledger.to_json()}
        )
        return bool(applied)

    def _evaluate(self, run: RunContext) -> tuple[ConvergenceAssessment, SemanticValidationReport | None]:
        """Phase C's judgement: the results validated (only structurally for a shallow task: no model call),
        then assessed for convergence."""
        whole = run.state.plan()
        assert whole is not None
        plan = self._attempt(self._memo(run).parts, whole)
        results = [{"step_id": s.step_id, "status": s.status.value, "result": s.result} for s in plan.steps]
        # What the run did: every tool call of every pass (a number the request states may have been used in
        # an earlier one), without results (they are in ``results``).
        calls = [
            {
                "step_id": c.step_id,
                "tool_name": c.tool_name,
                "arguments": c.arguments,
                **({"error": True} if c.error is not None else {}),
            }
            for c in run.state.tool_history
        ]
        artifact = {"request": run.state.request, "goal": plan.goal, "results": results, "tool_calls": calls}
        report: SemanticValidationReport | None = None
        deep = self._deep(run)
        try:
            validator = self.semantic_validator()
            if deep:
                report = validator.validate(
                    artifact, "execution_artifact", run.components.tools, record=run.record_action
                )
            else:
                found = validator.validate_structure(artifact, "execution_artifact", run.components.tools)
                report = found if found.issues else None
        except AeonError as exc:  # advisory: the assessment goes on without it
            run.fail_cycle(error_record(exc, phase="evaluate"))
        engine = run.components.convergence
        if engine is None:
            return _finished_plan(plan, report, "no convergence engine"), report
        # The plan's state, with the request it answers (for an engine that judges the answer against it). The
        # configured engine is asked on every pass; a shallow task's criteria say so (``shallow``), and the
        # ``model`` engine then judges structurally, without a model call.
        plan_state = {**plan.model_dump(mode="json"), "request": run.state.request}
        criteria = {**self.criteria, **({} if deep else {"shallow": True})}
        assessment = engine.assess(plan_state, results, report, criteria)
        # a shallow task's structural verdict holds whatever the engine says
        if not deep and assessment.converged:
            structural = _finished_plan(plan, report, "structural checks")
            if not structural.converged:
                assessment = structural
        # converged, but unmeasured: not verified
        if assessment.converged and assessment.metadata.get("judge") == "unavailable":
            why = f"the judge was unavailable: {assessment.metadata.get('judge_error', 'no reason given')}"
            run.record_check(Check(name="convergence", subject="run", verdict="inconclusive", detail=why))
        return assessment, report

    def _record_evaluation(
        self, run: RunContext, assessment: ConvergenceAssessment, report: SemanticValidationReport | None
    ) -> None:
        """The pass is complete once assessed (a phase boundary); then: done, or refine."""
        memo = self._memo(run)
        if report is not None:
            self._keep_report(run, report)
        if memo.current is not None:
            memo.current.assessment, memo.current.evaluated = assessment, True
        memo.assessment = assessment
        run.state.changed()
        self._event(run, "assessment", assessment.model_dump(mode="json"))
        if assessment.converged:
            memo.converged = True
            self._finish(run)
        elif memo.pass_number >= self.max_passes:
            self._finish(run)
        else:
            self._stage(run, "refine")

    def _updated_profile(self, run: RunContext) -> TaskProfile | None:
        memo = self._memo(run)
        depth = self.depth()
        assessment = memo.assessment
        assert assessment is not None, "update_profile follows evaluate"
        report = memo.report or SemanticValidationReport.of("none", "execution_artifact")
        clarity = [s.clarity_state for s in run.state.steps if s.clarity_state is not None]
        return depth.update_task_profile(
            self._profile(run), assessment, report, clarity, record=run.record_action
        )

    # --- decomposition (aeon_plugins/multipass/decompose.py) ------------------------------------------------------

    @staticmethod
    def _attempt(parts: list[Part], plan: Plan) -> Plan:
        """The steps a pass is judged on: all of them; after a decomposition, its parts' and what came after.

        The steps before the parts are the attempt that lost a part of the request. They stay in the plan as they
        ended (finished steps are never touched), but the parts redo the whole request, so a step of the earlier
        attempt that failed does not hold the run back for good.
        """
        if not parts:
            return plan
        first = parts[0]["step_id"]
        start = next(
            (k for k, s in enumerate(plan.steps) if s.step_id == first or s.step_id.startswith(f"{first}.")),
            0,
        )
        return plan if start == 0 else plan.model_copy(update={"steps": plan.steps[start:]})

    def _decomposition(self, run: RunContext, plan: Plan, parts: list[str]) -> Decomposition:
        """ADD deltas for one part step per part, after the plan's last step (the kernel proposes them; the
        ledger applies them like any other)."""
        retired = self._memo(run).ledger.retired
        steps = part_steps(parts, {*(s.step_id for s in plan.steps), *retired})
        after = [plan.steps[-1].step_id, *(s.step_id for s in steps[:-1])]
        return Decomposition(
            RefinementAction(
                action_type="ADD",
                target_step_id=target,
                new_step=step,
                reason=f"the request sequences {len(parts)} parts: part {k} is planned on its own",
            )
            for k, (target, step) in enumerate(zip(after, steps, strict=True), start=1)
        )

    def _decomposed(self, run: RunContext, actions: Decomposition) -> None:
        ids = set(run.state.index)
        parts = [part_record(a.new_step) for a in actions if a.new_step and a.new_step.step_id in ids]
        memo = self._memo(run)
        memo.decomposed, memo.parts = True, parts
        run.state.changed()
        settle_flagged_plan(run)  # the parts replace a flagged plan: its doubt is settled
        self._event(run, "decomposition", {"request": run.state.request, "parts": parts})

    def _mark_part(
        self, run: RunContext, step_id: str | None, subplan: Subplan, *, error: str | None = None
    ) -> Part | None:
        """The part ``step_id`` is (if it is one) gets its subplan's state, and why it has none (``error``)."""
        part = self._memo(run).part(step_id) if step_id is not None else None
        if part is not None:
            part["subplan"] = subplan
            if error is not None:
                part["error"] = error
            run.state.changed()
        return part

    def _subplan(self, run: RunContext) -> tuple[str, Plan, str | None]:
        """The current part's subplan, asked for with the previous part's result (perform: no state change)."""
        part_id = run.state.current_step_id
        assert part_id is not None
        parts = [p["step_id"] for p in self._memo(run).parts]
        index = parts.index(part_id)
        context = part_context(run.state.steps, parts[index - 1] if index else None)
        planner = run.components.planner
        assert isinstance(planner, RecursivePlanner)  # decomposition needs one (see _proposals)
        subplan = planner.create_subplan(
            part_id,
            with_context(run.state.step(part_id).description, context),
            depth_of(part_id),
            self.limits["max_depth"],
            record=run.record_action,
            tool_registry=run.components.tools,
        )
        return part_id, subplan, context

    def _use_subplan(self, run: RunContext, part_id: str, subplan: Plan, context: str | None) -> None:
        """The part step gives way to its subplan (a REPLACE delta, applied by the kernel), checked by the
        validator like any plan; when either refuses it, the part runs as it is.

        A part that is not the last hands its result on through its tool's result (:func:`part_context`), so
        its subplan's closing ``llm`` steps after its last tool step — a report of that result — are left out:
        they would cost a model call each and tell the next part nothing more.
        """
        record: dict[str, Any] = {
            "part": part_id,
            "context": context,
            "subplan": subplan.model_dump(mode="json"),
        }
        steps = list(subplan.steps)
        last_part = self._memo(run).parts[-1]["step_id"] == part_id
        tools = [k for k, s in enumerate(steps) if s.tool is not None]
        if not last_part and tools and tools[-1] < len(steps) - 1:
            steps = steps[: tools[-1] + 1]
            record["left_out"] = [s.step_id for s in subplan.steps[len(steps) :]]
        try:
            run.components.validator.validate_plan(subplan.model_dump())
        except AeonError as exc:
            run.fail_cycle(error_record(exc, phase="refine"))
            applied = False
        else:
            action = RefinementAction(
                action_type="REPLACE",
                target_step_id=part_id,
                new_step=steps[0],
                new_steps=tuple(steps),
                reason=f"the part's subplan: {subplan.goal[:120]}",
            )
            applied = self._refine(run, [action])
        part = self._mark_part(run, part_id, "planned" if applied else "unplanned")
        if part is not None:
            part["context"] = context
        self._event(run, "subplan", {**record, "applied": applied})
        self._stage(run, "execute")

    def _clarity(self, run: RunContext, step_id: str, outcome: Any) -> None:
        """The step's clarity, as its outcome shows it (the module docstring)."""
        if step_id not in run.state.index or not isinstance(outcome, StepExecutionResult):
            return
        step = run.state.step(step_id)
        clarity: ClarityState = (
            "BLOCKED"
            if step.status is not StepStatus.COMPLETE
            else "PARTIALLY_CLEAR"
            if outcome.error or outcome.execution_mode == "fallback"
            else "CLEAR"
        )
        run.state.replace_step(step.model_copy(update={"clarity_state": clarity}))

    # --- passes ------------------------------------------------------------------------------------------------------

    def _open_pass(self, run: RunContext) -> None:
        memo = self._memo(run)
        memo.current = OpenPass(
            pass_number=memo.pass_number,
            phase=STAGES[memo.stage][1],
            plan_snapshot=run.state.plan(),
            started=utc_now(),
            started_at=time.time(),
        )
        run.state.changed()
        opened = memo.current.model_dump(
            mode="json", include={"pass_number", "phase", "plan_snapshot", "started"}
        )
        self._event(run, "pass_start", opened)

    def _close_pass(self, run: RunContext) -> None:
        memo = self._memo(run)
        if memo.current is None:
            return
        record = self._pass_record(run, memo.current)
        memo.passes = [*memo.passes, record]
        memo.current = None
        run.state.changed()
        self._event(run, "pass_end", record.model_dump(mode="json"))

    def _next_pass(self, run: RunContext) -> None:
        self._close_pass(run)
        self._memo(run).pass_number += 1
        self._stage(run, "execute")
        self._open_pass(run)

    def _finish(self, run: RunContext) -> None:
        self._give_up_blocked(run)
        self._close_pass(run)
        self._stage(run, "done")

    def _give_up_blocked(self, run: RunContext) -> None:
        """The invalid step the refinement left in place (it holds the run's place) fails: the run goes on."""
        current = run.state.current_step_id
        if current is not None and run.state.step(current).status is StepStatus.INVALID:
            self.linear.give_up(run, current)

    def _pass_record(self, run: RunContext, current: OpenPass) -> ExecutionPass:
        """A pass as the history shows it. Pass 0 is complete once it has a plan; later ones once assessed."""
        plan = run.state.plan()
        return ExecutionPass(
            pass_number=current.pass_number,
            phase=current.phase,
            plan_snapshot=current.plan_snapshot,
            execution_results=tuple(
                {"step_id": s.step_id, "status": s.status.value, "result": s.result}
                for s in (plan.steps if plan else ())
            ),
            assessment=current.assessment,
            report=current.report,
            refinements=tuple(current.refinements),
            ttl_remaining=run.state.ttl_remaining,
            started=current.started,
            ended=utc_now(),
            duration_ms=round((time.time() - current.started_at) * 1000, 3),
            completed=current.evaluated or (current.pass_number == 0 and plan is not None),
        )

    def _history(
        self, state: OrchestrationState, memo: MultiPassMemo | None, verdict: Verdict, answer: Any
    ) -> ExecutionHistory:
        passes = memo.passes if memo else []
        return ExecutionHistory(
            execution_id=state.run_id,
            task_input=state.request,
            configuration={
                "criteria": self.criteria,
                "max_passes": self.max_passes,
                "limits": self.limits,
                "shallow_depth": self.shallow_depth,
                "shallow_plan_steps": self.shallow_plan_steps,
                "ttl_cap": memo.ttl_cap if memo else None,
                "allocated_ttl": memo.allocated_ttl if memo else None,
            },
            profile=memo.profile if memo else None,
            passes=tuple(passes),
            final_result={"status": verdict.status, "answer": answer},
            total_passes=len(passes),
            total_refinements=sum(len(p.refinements) for p in passes),
            converged=memo.converged if memo else False,
            status=verdict.status,
            total_ms=round((time.time() - (memo.started_at if memo else time.time())) * 1000, 3),
        )


def _dropped_part(memo: MultiPassMemo) -> bool:
    """Whether the pass shows the plan lost part of the request — a blocking semantic issue (the results left
    out what the request gave) or a failed or blocked step — rather than a poor answer (``refine_plan``'s)."""
    reasons = memo.assessment.reason_codes if memo.assessment else ()
    return any(
        r == "semantic_issues" or str(r).startswith(("step_failed:", "step_invalid:")) for r in reasons
    )


def _finished_plan(plan: Plan, report: SemanticValidationReport | None, judge: str) -> ConvergenceAssessment:
    """The deterministic verdict (no model call): every step complete, and no HIGH or CRITICAL issue in the
    ``report``."""
    unfinished = [
        f"step_{s.status.value}:{s.step_id}" for s in plan.steps if s.status is not StepStatus.COMPLETE
    ]
    blocking = [i for i in (report.issues if report else ()) if i.severity in BLOCKING]
    score = 1.0 - len(unfinished) / len(plan.steps)
    return ConvergenceAssessment(
        converged=not unfinished and not blocking,
        reason_codes=(*unfinished, *(("semantic_issues",) if blocking else ())),
        completeness_score=score,
        detected_issues=tuple(
            f"{i.severity} {i.type} at {i.location or '-'}: {i.description}" for i in blocking
        ),
        metadata={"judge": judge},
    )


def _score(value: float | None) -> str:
    return "not judged" if value is None else f"{value:.2f}"
