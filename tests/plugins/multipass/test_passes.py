"""The multi-pass scheduler (spec 003 phases A-D) on scripted components: its order, its decisions, its record."""

from __future__ import annotations

import importlib
from typing import Any

import pytest

from aeon_kernel import (
    AdaptiveDepth,
    ConvergenceAssessment,
    ConvergenceEngine,
    Engine,
    Plan,
    PlanStep,
    RecursivePlanner,
    RefinementAction,
    SemanticValidationReport,
    SemanticValidator,
    TaskProfile,
    ValidationIssue,
    hookimpl,
)
from aeon_kernel.config import AeonConfig
from aeon_kernel.testing import RecordingSink
from aeon_kernel.testing.pytest_plugin import BUILTIN_PLUGINS
from aeon_plugins.multipass import allocate_ttl
from tests.support.live import live_view_of


def profile(depth: int) -> TaskProfile:
    return TaskProfile(
        reasoning_depth=depth,
        information_sufficiency=0.8,
        expected_tool_usage="minimal",
        output_breadth="narrow",
        confidence_requirement="medium",
        raw_inference="scripted",
    )


def echo_step(step_id: str, message: str) -> PlanStep:
    return PlanStep(
        step_id=step_id, description=f"echo {message}", tool="echo", arguments={"message": message}
    )


class Script:
    """What the scripted components answer, in order, and what they were asked."""

    def __init__(
        self,
        depth: int,
        plan: Plan,
        reports: list[SemanticValidationReport] | None = None,
        assessments: list[ConvergenceAssessment] | None = None,
        refinements: list[list[RefinementAction]] | None = None,
        updates: list[TaskProfile | None] | None = None,
    ) -> None:
        self.profile, self.plan = profile(depth), plan
        self.reports, self.assessments = list(reports or []), list(assessments or [])
        self.refinements, self.updates = list(refinements or []), list(updates or [])
        self.calls: list[str] = []
        self.blocked: list[list[str]] = []  # the blocked steps refine_plan was told of, per call
        self.criteria: list[dict[str, Any]] = []  # what the convergence engine was asked with, per pass


class Components:
    """A plugin registering scripted spec-003 components under the name ``scripted``."""

    def __init__(self, script: Script) -> None:
        self.script = script

    @hookimpl
    def aeon_register_depth_heuristics(self, register: Any) -> None:
        script = self.script

        class Depth(AdaptiveDepth):
            def infer_task_profile(
                self, task_description: str, context: Any = None, *, record: Any = None
            ) -> Any:
                script.calls.append("profile")
                return script.profile

            def allocate_ttl(self, task_profile: TaskProfile, global_ttl_limit: int | None = None) -> int:
                return allocate_ttl(task_profile, global_ttl_limit)

            def update_task_profile(self, *args: Any, **kwargs: Any) -> TaskProfile | None:
                script.calls.append("update_profile")
                return script.updates.pop(0) if script.updates else None

        register("scripted", Depth)

    @hookimpl
    def aeon_register_semantic_validators(self, register: Any) -> None:
        script = self.script

        class Validator(SemanticValidator):
            def validate(
                self, artifact: Any, artifact_type: Any, tool_registry: Any = None, *, record: Any = None
            ) -> Any:
                script.calls.append(f"validate:{artifact_type}")
                if script.reports:
                    return script.reports.pop(0)
                return SemanticValidationReport.of("clean", artifact_type)

        register("scripted", Validator)

    @hookimpl
    def aeon_register_planners(self, register: Any) -> None:
        script = self.script

        class Planner(RecursivePlanner):
            def generate_plan(
                self, task_description: str, task_profile: Any, tool_registry: Any, *, record: Any = None
            ) -> Plan:
                script.calls.append(f"plan:depth={task_profile.reasoning_depth}")
                return script.plan

            def refine_plan(self, current_plan: Plan, *args: Any, **kwargs: Any) -> list[RefinementAction]:
                script.calls.append("refine")
                script.blocked.append(list(args[2]))  # (issues, reason codes, blocked steps, executed ids)
                return script.refinements.pop(0) if script.refinements else []

            def create_subplan(self, *args: Any, **kwargs: Any) -> Plan:
                raise NotImplementedError

        register("scripted", Planner)

    @hookimpl
    def aeon_register_convergence_engines(self, register: Any) -> None:
        script = self.script

        class Judge(ConvergenceEngine):
            def assess(
                self, plan_state: Any, execution_results: Any, report: Any = None, criteria: Any = None
            ) -> Any:
                script.calls.append("assess")
                script.criteria.append(dict(criteria or {}))
                return script.assessments.pop(0)

        register("scripted", Judge)


def engine_for(
    script: Script, ttl: int = 40, state_db: Any = None, policies: tuple[Any, ...] = (), **reasoning: Any
) -> tuple[Engine, RecordingSink]:
    config = AeonConfig(ttl=ttl, policies=policies).with_choice("llm", "scripted", responses=[])
    for role in ("depth", "semantic_validator", "planner", "convergence"):
        config = config.with_choice(role, "scripted")
    config = config.multipass(**reasoning)
    for role in ("planner", "convergence"):
        config = config.with_choice(role, "scripted")
    if state_db is not None:
        config = config.with_choice("state", "sqlite", path=str(state_db))
    extra = ("aeon_plugins.sqlite_state", "aeon_plugins.policy_rules")
    builtins = [importlib.import_module(name) for name in (*BUILTIN_PLUGINS, *extra)]
    engine = Engine(config, plugins=[*builtins, Components(script)], autoload=False)
    sink = RecordingSink()
    engine.pm.register(sink, name="sink:recording")
    return engine, sink


def phases(sink: RecordingSink) -> list[str]:
    return [e.phase if e.phase != "step" else f"step:{e.step_id}" for e in sink.entries]


CONVERGED = ConvergenceAssessment(converged=True, completeness_score=1.0, coherence_score=0.95)
NOT_YET = ConvergenceAssessment(
    converged=False, reason_codes=("coherence_below_threshold",), completeness_score=1.0, coherence_score=0.5
)
#: What an engine answers for a shallow task: the plan finished, and no score was measured (nobody judged it).
STRUCTURAL = ConvergenceAssessment(
    converged=True, completeness_score=1.0, metadata={"judge": "skipped: a shallow task"}
)
TWO_STEPS = Plan(goal="say a then b", steps=(echo_step("1", "a"), echo_step("2", "b")))


def test_a_shallow_task_is_profiled_planned_run_and_checked_as_shallow() -> None:
    """No semantic validation (adaptive depth); the convergence engine is still asked, told the task is shallow."""
    script = Script(depth=1, plan=TWO_STEPS, assessments=[STRUCTURAL])
    engine, sink = engine_for(script)
    with engine:
        result = engine.run("say a then b")
    assert result["status"] == "completed", result["message"]
    assert phases(sink) == ["profile", "plan", "step:1", "step:2", "evaluate"]
    assert script.calls == ["profile", "plan:depth=1", "assess"]  # no semantic validation: adaptive depth
    assert script.criteria == [
        {
            "completeness_threshold": 0.95,
            "coherence_threshold": 0.90,
            "consistency_threshold": 0.90,
            "shallow": True,
        }
    ]
    assert result["convergence"]["coherence_score"] is None  # nobody measured it
    history = result["execution_history"]
    assert [(p["pass_number"], p["phase"], p["completed"]) for p in history["passes"]] == [
        (0, "B", True),
        (1, "C", True),
    ]
    assert history["converged"] and history["profile"]["reasoning_depth"] == 1
    # Phase A gave the run the TTL the profile allocates (the cap is the run's TTL, 40).
    assert history["configuration"]["allocated_ttl"] == allocate_ttl(script.profile, 40)
    assert sink.entries[0].ttl_remaining == allocate_ttl(script.profile, 40) - 1


def test_a_deep_task_validates_refines_reassesses_and_updates_its_profile() -> None:
    issue = ValidationIssue(
        issue_id="i1", type="specificity", severity="MEDIUM", description="step 2 is vague"
    )
    add = RefinementAction(
        action_type="ADD", target_step_id="2", new_step=echo_step("3", "c"), reason="say c as well"
    )
    script = Script(
        depth=4,
        plan=TWO_STEPS,
        reports=[SemanticValidationReport.of("plan", "plan", [issue])],
        assessments=[NOT_YET, CONVERGED],
        refinements=[[], [add]],
        updates=[profile(5)],
    )
    engine, sink = engine_for(script)
    with engine:
        result = engine.run("say a, b and c")
    assert result["status"] == "completed", result["message"]
    assert phases(sink) == [
        "profile",
        "plan",
        "validate",  # B: the plan's issue ...
        "refine",  # ... asks for deltas (none came)
        "step:1",
        "step:2",
        "evaluate",  # C: not converged
        "refine",  # C: step 3 added
        "update_profile",  # D: deeper
        "step:3",
        "evaluate",  # converged
    ]
    assert [s["step_id"] for s in result["plan"]["steps"]] == ["1", "2", "3"]
    history = result["execution_history"]
    assert [p["pass_number"] for p in history["passes"]] == [0, 1, 2]
    assert history["passes"][1]["refinements"][0]["new_step"]["step_id"] == "3"
    assert history["passes"][1]["assessment"]["reason_codes"] == ["coherence_below_threshold"]
    assert history["profile"]["reasoning_depth"] == 5 and history["total_refinements"] == 1
    assert len(script.criteria) == 2 and not any("shallow" in c for c in script.criteria)  # a deep task
    events = [payload for name, payload in sink.events if name == "aeon_run_end"]
    assert events and events[0]["execution_history"] == history


def test_the_phase_order_does_not_depend_on_what_the_components_answer() -> None:
    """Two deep runs whose validation reports and assessments differ in content take the same phases."""
    orders = []
    for text, severity in (("vague", "MEDIUM"), ("irrelevant", "HIGH")):
        issue = ValidationIssue(issue_id="x", type="relevance", severity=severity, description=text)
        script = Script(
            depth=3,
            plan=TWO_STEPS,
            reports=[SemanticValidationReport.of("p", "plan", [issue])],
            assessments=[
                CONVERGED.model_copy(update={"coherence_score": 0.91 if severity == "MEDIUM" else 0.99})
            ],
        )
        engine, sink = engine_for(script)
        with engine:
            assert engine.run("say a then b")["status"] == "completed"
        orders.append(phases(sink))
    assert orders[0] == orders[1]


def test_nothing_left_to_refine_ends_the_run_failed_with_the_reasons() -> None:
    script = Script(depth=3, plan=TWO_STEPS, assessments=[NOT_YET], refinements=[[]])
    engine, sink = engine_for(script)
    with engine:
        result = engine.run("say a then b")
    assert result["status"] == "failed"
    assert "coherence_below_threshold" in result["message"]
    assert result["convergence"]["reason_codes"] == ["coherence_below_threshold"]
    assert phases(sink)[-2:] == ["evaluate", "refine"]


def test_max_passes_bounds_the_loop() -> None:
    adds = [
        [
            RefinementAction(
                action_type="ADD", target_plan_section="end", new_step=echo_step(f"x{i}", "x"), reason="more"
            )
        ]
        for i in range(5)
    ]
    script = Script(depth=3, plan=TWO_STEPS, assessments=[NOT_YET] * 5, refinements=adds)
    engine, sink = engine_for(script, max_passes=2)
    with engine:
        result = engine.run("say a then b")
    assert result["status"] == "failed"
    assert [p["pass_number"] for p in result["execution_history"]["passes"]] == [0, 1, 2]
    assert phases(sink).count("evaluate") == 2


def test_ttl_expiry_returns_the_latest_completed_pass_with_its_scores() -> None:
    adds = [
        [
            RefinementAction(
                action_type="ADD", target_plan_section="end", new_step=echo_step(f"x{i}", "x"), reason="more"
            )
        ]
        for i in range(9)
    ]
    scored = NOT_YET.model_copy(update={"completeness_score": 0.8, "coherence_score": 0.6})
    script = Script(depth=3, plan=TWO_STEPS, assessments=[scored] * 9, refinements=adds)
    engine, _ = engine_for(script, ttl=9)
    with engine:
        result = engine.run("say a then b")
    assert result["status"] == "ttl_expired"
    assert "latest completed pass (1) scored completeness 0.80 and coherence 0.60" in result["message"]
    assert result["convergence"]["completeness_score"] == 0.8
    passes = result["execution_history"]["passes"]
    assert passes[1]["completed"] and passes[1]["assessment"]["coherence_score"] == 0.6


def test_rejected_refinements_are_logged_and_the_run_goes_on() -> None:
    """A delta that would change an executed step is refused by the kernel; the plan stays as it was."""
    touch_done = RefinementAction(
        action_type="MODIFY", target_step_id="1", new_step=echo_step("1", "again"), reason="redo"
    )
    script = Script(depth=3, plan=TWO_STEPS, assessments=[NOT_YET], refinements=[[touch_done]])
    engine, sink = engine_for(script)
    with engine:
        result = engine.run("say a then b")
    assert result["status"] == "failed"  # nothing applicable: nothing left to change
    refine_entry = [e for e in sink.entries if e.phase == "refine"][-1]
    assert "only pending or invalid steps are refined" in refine_entry.errors[0]["message"]
    assert result["plan"]["steps"][0]["result"] == {"message": "a"}


@pytest.mark.parametrize("depth", [1, 4])
def test_hook_aeon_pass_event(depth: int) -> None:
    """Every pass, profile, TTL allocation, report and assessment reaches the hook, in order."""
    events: list[tuple[int, str]] = []

    class Listener:
        @hookimpl
        def aeon_pass_event(self, run_id: str, pass_number: int, event: str, record: dict[str, Any]) -> None:
            events.append((pass_number, event))

    script = Script(depth=depth, plan=TWO_STEPS, assessments=[CONVERGED])
    engine, _ = engine_for(script)
    engine.pm.register(Listener())
    with engine:
        engine.run("say a then b")
    names = [e for _, e in events]
    assert names[:3] == ["pass_start", "profile", "ttl"]
    assert "assessment" in names and names.count("pass_start") == names.count("pass_end") == 2
    assert ("report" in names) == (depth > 2)


def test_hook_aeon_register_depth_heuristics() -> None:
    """The heuristic ``[depth]`` names profiles the task; a factory naming ``llm`` gets the run's model."""
    built: dict[str, Any] = {}
    script = Script(depth=1, plan=TWO_STEPS, assessments=[STRUCTURAL])

    class WithModel(Components):
        @hookimpl
        def aeon_register_depth_heuristics(self, register: Any) -> None:
            inner: list[Any] = []
            Components.aeon_register_depth_heuristics(self, lambda name, factory: inner.append(factory))

            def factory(llm: Any, shallow: int = 0) -> Any:
                built.update(llm=llm, shallow=shallow)
                return inner[0]()

            register("scripted", factory)

    config = (
        AeonConfig().with_choice("llm", "scripted", responses=[]).with_choice("depth", "scripted", shallow=1)
    )
    config = (
        config.multipass()
        .with_choice("planner", "scripted")
        .with_choice("semantic_validator", "scripted")
        .with_choice("convergence", "scripted")
    )
    builtins = [importlib.import_module(name) for name in BUILTIN_PLUGINS]
    with Engine(config, plugins=[*builtins, WithModel(script)], autoload=False) as engine:
        result = engine.run("say a then b")
        assert built == {"llm": engine.llm, "shallow": 1}
    assert result["status"] == "completed", result["message"]
    assert script.calls[0] == "profile"
    assert result["execution_history"]["profile"]["raw_inference"] == "scripted"


def test_hook_aeon_register_semantic_validators() -> None:
    """The validator ``[semantic_validator]`` names judges the plan and then the results of a deep task."""
    script = Script(depth=3, plan=TWO_STEPS, assessments=[CONVERGED])
    engine, _ = engine_for(script)
    with engine:
        assert engine.run("say a then b")["status"] == "completed"
    assert [c for c in script.calls if c.startswith("validate")] == [
        "validate:plan",
        "validate:execution_artifact",
    ]


def test_a_multipass_run_resumes_where_it_stopped(tmp_path: Any) -> None:
    """The stage, pass, profile and ledger are in the stored state: a resumed run goes on, it does not restart."""
    add = RefinementAction(
        action_type="ADD", target_step_id="2", new_step=echo_step("3", "c"), reason="and c"
    )
    script = Script(depth=3, plan=TWO_STEPS, assessments=[NOT_YET, CONVERGED], refinements=[[add]])

    def engine() -> tuple[Engine, RecordingSink]:
        return engine_for(script, state_db=tmp_path / "runs.db")

    first, sink = engine()
    with first:
        run = first.start("say a, b and c")
        for _ in range(6):  # profile, plan, validate, step 1, step 2, evaluate (not converged)
            run.next()
        run.close()
    assert phases(sink) == ["profile", "plan", "validate", "step:1", "step:2", "evaluate"]
    second, sink = engine()
    with second:
        result = second.resume(run.run_id)
    assert result["status"] == "completed", result["message"]
    assert phases(sink) == ["refine", "update_profile", "step:3", "evaluate"]  # no second profile or plan
    assert script.calls.count("profile") == 1 and script.calls.count("plan:depth=3") == 1
    history = result["execution_history"]
    assert [p["pass_number"] for p in history["passes"]] == [0, 1, 2]
    assert history["total_refinements"] == 1 and history["converged"]
    assert [s["step_id"] for s in result["plan"]["steps"]] == ["1", "2", "3"]


def test_the_jsonl_log_has_a_line_for_every_cycle_and_every_pass_event(tmp_path: Any) -> None:
    import json

    script = Script(depth=3, plan=TWO_STEPS, assessments=[CONVERGED])
    engine, _ = engine_for(script)
    log = tmp_path / "run.jsonl"
    engine.add_sink("jsonl", path=str(log))
    with engine:
        result = engine.run("say a then b")
    manifest, *lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert manifest["manifest"]["run_id"] == result["run_id"]
    cycles = [line["phase"] for line in lines if "step_number" in line]
    events = [(line["pass_number"], line["event"]) for line in lines if "event" in line]
    assert cycles == ["profile", "plan", "validate", "step", "step", "evaluate"]
    assert events == [
        (0, "pass_start"),
        (0, "profile"),
        (0, "ttl"),
        (0, "report"),
        (0, "pass_end"),
        (1, "pass_start"),
        (1, "report"),
        (1, "assessment"),
        (1, "pass_end"),
    ]
    # Events come as they happen, inside their cycle; the cycle's own line is written when it ends.
    assert lines[-1]["phase"] == "evaluate" and lines[-2] == {**lines[-2], "event": "pass_end"}


def three_passes() -> Script:
    """A vague plan (pass 0), not converged and refined with a third step (pass 1), converged (pass 2)."""
    issue = ValidationIssue(
        issue_id="i1", type="specificity", severity="MEDIUM", description="step 2 is vague"
    )
    add = RefinementAction(
        action_type="ADD", target_step_id="2", new_step=echo_step("3", "c"), reason="and c"
    )
    return Script(
        depth=3,
        plan=TWO_STEPS,
        reports=[SemanticValidationReport.of("p", "plan", [issue])],
        assessments=[NOT_YET, CONVERGED],
        refinements=[[], [add]],
    )


def test_the_live_view_shows_each_pass() -> None:
    """What `aeon run --multipass` prints: the profile and TTL, the issues, the scores and the deltas."""
    result, shown = live_view_of(engine_for(three_passes())[0], "say a, b and c", width=150)
    assert result["status"] == "completed"
    for text in (
        "pass 0 profile: depth 3",
        "TTL",
        "pass 0 plan: MEDIUM specificity: step 2 is vague",
        "pass 1 not converged: completeness 1.00, coherence 0.50 (coherence_below_threshold)",
        "pass 1 refinement: ADD 2",
        "pass 2 converged: completeness 1.00, coherence 0.95",
    ):
        assert text in shown, text


def test_a_streamed_multipass_run_yields_each_pass_event_and_each_new_plan() -> None:
    """``engine.stream`` (issue 28): the pass events a sink hears, in order, and a PlanAccepted per plan change."""
    from aeon_kernel.events import PassEvent, PlanAccepted, RunFinished

    engine, _ = engine_for(three_passes())
    with engine:
        events = list(engine.stream("say a, b and c"))
    assert isinstance(events[-1], RunFinished) and events[-1].result["status"] == "completed"
    passes = [(e.pass_number, e.event) for e in events if isinstance(e, PassEvent)]
    assert passes[:3] == [(0, "pass_start"), (0, "profile"), (0, "ttl")] and passes[-1] == (2, "pass_end")
    assert passes.index((1, "assessment")) < passes.index((1, "refinement")) < passes.index((2, "pass_start"))
    plans = [tuple(s.step_id for s in e.plan.steps) for e in events if isinstance(e, PlanAccepted)]
    assert plans[0] == ("1", "2") and plans[-1][-1] == "3"  # the refinement's new step came as a new plan


def test_a_one_step_plan_is_shallow_whatever_the_profile_says() -> None:
    """A deep profile with a one-step plan: no semantic validation, and the convergence engine is told the task is
    shallow (shallow_plan_steps = 1)."""
    script = Script(depth=4, plan=Plan(goal="say a", steps=(echo_step("1", "a"),)), assessments=[STRUCTURAL])
    engine, sink = engine_for(script)
    with engine:
        result = engine.run("say a")
    assert result["status"] == "completed", result["message"]
    assert phases(sink) == ["profile", "plan", "step:1", "evaluate"]
    assert script.calls == ["profile", "plan:depth=4", "assess"]
    assert [c.get("shallow") for c in script.criteria] == [True]


def test_a_multipass_step_that_needs_approval_waits_and_goes_on_once_approved(tmp_path: Any) -> None:
    """The waiting cycle keeps the pass and stage; the approved step runs, and the passes go on from there."""
    from aeon_kernel.config import Choice

    script = Script(depth=3, plan=TWO_STEPS, assessments=[CONVERGED])
    ask = Choice("rules", {"ask": [{"name": "b", "tool": "echo", "arguments": {"message": "^b$"}}]})
    engine, sink = engine_for(script, state_db=tmp_path / "runs.db", policies=(ask,))
    with engine:
        waiting = engine.run("say a then b")
        assert waiting["status"] == "waiting" and waiting["approval"]["arguments"] == {"message": "b"}
        done = engine.approve(waiting["run_id"])
    assert done["status"] == "completed", done["message"]
    assert [c["arguments"]["message"] for c in done["final_state"]["tool_history"]] == ["a", "b"]
    # cycle 5 asked; cycle 6, the answer, was committed before the run went on (events are for cycles run)
    assert phases(sink) == ["profile", "plan", "validate", "step:1", "step:2", "step:2", "evaluate"]
    assert [e.step_number for e in sink.entries] == [1, 2, 3, 4, 5, 7, 8]
    assert [e["type"] for e in done["errors"]] == ["ApprovalRequested", "ApprovalDecided"]
    assert script.calls.count("profile") == 1 and script.calls.count("plan:depth=3") == 1


# --- blocked steps (003-models.md: running -> invalid) ----------------------------------------------------------


def calc_step(step_id: str, expression: str) -> PlanStep:
    return PlanStep(
        step_id=step_id,
        description=f"compute {expression}",
        tool="calculator",
        arguments={"expression": expression},
    )


#: its first step divides by zero
BLOCKED_FIRST = Plan(goal="compute, then say done", steps=(calc_step("1", "1 / 0"), echo_step("2", "done")))


def test_a_blocked_step_holds_its_place_until_a_refinement_replaces_it(tmp_path: Any) -> None:
    """A step that fails ends invalid (BLOCKED): the step after it waits, the pass is judged at once, the planner
    is told which step is blocked, and its MODIFY runs the step again under its id. The blocked state is stored: a
    run stopped there resumes with it."""
    fix = RefinementAction(
        action_type="MODIFY", target_step_id="1", new_step=calc_step("1", "4 / 2"), reason="not by zero"
    )
    script = Script(depth=1, plan=BLOCKED_FIRST, assessments=[NOT_YET, CONVERGED], refinements=[[fix]])
    first, sink = engine_for(script, state_db=tmp_path / "runs.db")
    with first:
        run = first.start("divide 4 by 2, then say done")
        for _ in range(3):  # profile, plan, step 1
            run.next()
        run.close()
    (step,) = [s for s in run.state.plan.steps if s.step_id == "1"]  # type: ignore[union-attr]
    assert (step.status, step.clarity_state) == ("invalid", "BLOCKED")
    assert "division by zero" in (step.failure or "").lower()
    second, sink = engine_for(script, state_db=tmp_path / "runs.db")
    with second:
        result = second.resume(run.run_id)
    assert result["status"] == "completed", result["message"]
    assert phases(sink) == ["evaluate", "refine", "step:1", "step:2", "evaluate"]  # step 2 waited
    assert script.blocked == [["1"]]
    assert sink.of("aeon_step_status_changed") == [
        ("1", "pending", "running"),
        ("1", "running", "complete"),
        ("2", "pending", "running"),
        ("2", "running", "complete"),
    ]
    first = result["plan"]["steps"][0]
    assert (first["status"], first["result"]) == ("complete", {"expression": "4 / 2", "value": 2})


def test_a_blocked_step_no_refinement_replaces_fails_and_the_run_goes_on() -> None:
    """A refinement that leaves the blocked step in place (it adds one after the plan) fails it, with why, so the
    steps after it run: "execution continues with the best available plan" (003-models.md). A stream reports the
    step finished twice: blocked, then failed."""
    from aeon_kernel.events import StepFinished

    add = RefinementAction(
        action_type="ADD", target_plan_section="end", new_step=echo_step("3", "more"), reason="and more"
    )
    script = Script(depth=1, plan=BLOCKED_FIRST, assessments=[NOT_YET, NOT_YET], refinements=[[add], []])
    engine, sink = engine_for(script)
    with engine:
        events = list(engine.stream("divide 1 by 0, then say done"))
    result = events[-1].result  # type: ignore[attr-defined]
    assert result["status"] == "failed"
    finished = [(e.step.step_id, e.step.status.value) for e in events if isinstance(e, StepFinished)]
    assert finished[:2] == [("1", "invalid"), ("1", "failed")]  # blocked, then given up on
    assert phases(sink) == [
        "profile",
        "plan",
        "step:1",
        "evaluate",
        "refine",
        "step:2",
        "step:3",
        "evaluate",
        "refine",
    ]
    assert sink.of("aeon_step_status_changed")[:3] == [
        ("1", "pending", "running"),
        ("1", "running", "invalid"),
        ("1", "invalid", "failed"),
    ]
    first = result["plan"]["steps"][0]
    assert first["status"] == "failed" and first["failure"].endswith("(no refinement replaced it)")
    assert [s["status"] for s in result["plan"]["steps"][1:]] == ["complete", "complete"]
    assert script.blocked == [["1"], []]


def test_a_run_that_stops_at_a_blocked_step_shows_it_blocked_and_why() -> None:
    """The TTL runs out right after the step is blocked: the run ends with it invalid, and the live view marks it
    and says why it is blocked, as for a failed step."""
    script = Script(depth=1, plan=BLOCKED_FIRST)
    result, shown = live_view_of(engine_for(script, ttl=3)[0], "divide 1 by 0, then say done", width=150)
    assert result["status"] == "ttl_expired"
    assert [s["status"] for s in result["plan"]["steps"]] == ["invalid", "pending"]
    (line,) = [line for line in shown.splitlines() if "compute 1 / 0" in line]
    assert line.strip("│ ").startswith("!") and "division by zero" in line.lower()
