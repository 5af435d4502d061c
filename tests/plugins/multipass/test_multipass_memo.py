"""The multi-pass scheduler's memo (``MultiPassMemo``): stored in a real SQLite state store at every cycle
boundary and resumed from there to the same end; a memo stored by the previous version (a dict of its keys)
loads and resumes; and the scheduler's preview, which must agree with every cycle and change nothing."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from aeon_kernel import Engine, ValidationIssue
from aeon_plugins.multipass.memo import MultiPassMemo
from aeon_plugins.sqlite_state import SqliteStateStore
from tests.plugins.multipass import test_multipass_refinement as chains
from tests.plugins.multipass import test_passes as passes
from tests.support.previews import previewed, shown

OLD_LAYOUT = Path(__file__).parents[2] / "support" / "old_layout" / "multipass_between_parts.json"


def deep_script() -> passes.Script:
    """Spec 003's whole loop: validate, refine the plan, run, evaluate, refine, update the profile, run, evaluate."""
    issue = ValidationIssue(
        issue_id="i1", type="specificity", severity="MEDIUM", description="step 2 is vague"
    )
    add = passes.RefinementAction(
        action_type="ADD", target_step_id="2", new_step=passes.echo_step("3", "c"), reason="say c as well"
    )
    return passes.Script(
        depth=4,
        plan=passes.TWO_STEPS,
        reports=[passes.SemanticValidationReport.of("plan", "plan", [issue])],
        assessments=[passes.NOT_YET, passes.CONVERGED],
        refinements=[[], [add]],
        updates=[passes.profile(5)],
    )


def outline(result: dict[str, Any]) -> dict[str, Any]:
    """What a run ended with, times and generated ids aside."""
    history = result["execution_history"]
    return {
        "status": result["status"],
        "answer": result["answer"],
        "plan": [(s["step_id"], s["status"], s["result"]) for s in result["plan"]["steps"]],
        "passes": [
            (p["pass_number"], p["phase"], p["completed"], p["assessment"], len(p["refinements"]))
            for p in history["passes"]
        ],
        "profile": history["profile"],
        "configuration": history["configuration"],
        "converged": history["converged"],
    }


def stored_memo(db: Path, run_id: str) -> dict[str, Any]:
    store = SqliteStateStore(db)
    try:
        memo: dict[str, Any] = store.load(run_id).state.scheduler_state["multipass"]
        return memo
    finally:
        store.close()


# --- stored and resumed at every cycle boundary ------------------------------------------------------------------


def test_a_deep_run_resumed_at_any_cycle_from_its_stored_memo_ends_as_one_never_stopped(
    tmp_path: Path,
) -> None:
    whole, sink = passes.engine_for(deep_script())
    with whole:
        expected = outline(whole.run("say a, b and c"))
    every = passes.phases(sink)
    assert len(every) == 11
    for stop in range(1, len(every)):
        script, db = deep_script(), tmp_path / f"stop-{stop}.db"
        first, sink = passes.engine_for(script, state_db=db)
        with first:
            run = first.start("say a, b and c")
            for _ in range(stop):
                run.next()
            live = run.state.scheduler_state["multipass"]
            run.close()
        assert stored_memo(db, run.run_id) == live
        assert MultiPassMemo.model_validate(live).model_dump(mode="json") == live
        second, more = passes.engine_for(script, state_db=db)  # the same script: it answers what is left
        with second:
            result = second.resume(run.run_id)
        assert passes.phases(sink) + passes.phases(more) == every, f"resumed after cycle {stop}"
        assert outline(result) == expected, f"resumed after cycle {stop}"


def test_a_decomposed_run_resumed_at_any_cycle_ends_as_one_never_stopped(tmp_path: Path) -> None:
    whole, sink, _ = chains.engine(chains.CHAIN_SCRIPT)
    with whole:
        expected = outline(whole.run(chains.CHAIN))
    every = chains.phases(sink)
    for stop in range(1, len(every)):
        db = tmp_path / f"stop-{stop}.db"
        first, sink, _ = chains.engine(chains.CHAIN_SCRIPT, state_db=db)
        with first:
            run = first.start(chains.CHAIN)
            for _ in range(stop):
                run.next()
            run.close()
        asked = chains.model_calls(sink)
        second, more, _ = chains.engine(chains.CHAIN_SCRIPT[asked:], state_db=db)
        with second:
            result = second.resume(run.run_id)
        assert chains.phases(sink) + chains.phases(more) == every, f"resumed after cycle {stop}"
        assert outline(result) == expected, f"resumed after cycle {stop}"


# --- the previous version's layout -------------------------------------------------------------------------------


def test_a_memo_the_previous_version_stored_loads_as_it_was() -> None:
    old = json.loads(OLD_LAYOUT.read_text())["multipass"]
    memo = MultiPassMemo.model_validate(old)
    assert memo.stage == "execute" and memo.pass_number == 2 and memo.decomposed
    assert [(p["step_id"], p["subplan"]) for p in memo.parts] == [("part1", "planned"), ("part2", "pending")]
    assert memo.ledger.retired == {"part1"} and memo.ledger.attempts == {"2": 1, "part1": 2}
    dumped = memo.model_dump(mode="json")
    # every value it had, as it was; the pass in progress also names the fields it had not set yet
    assert set(dumped) == set(old) and {k: v for k, v in dumped.items() if k != "current"} == {
        k: v for k, v in old.items() if k != "current"
    }
    assert {key: dumped["current"][key] for key in old["current"]} == old["current"]
    assert {k: v for k, v in dumped["current"].items() if k not in old["current"]} == {
        "report": None,
        "assessment": None,
        "evaluated": False,
    }
    between = {**old, "current": {}}  # between two passes, a version kept {} for the pass in progress
    for key in ("deep", "plan_steps", "parts", "decomposed", "report", "assessment", "allocated_ttl"):
        between.pop(key)  # and wrote these only once they applied
    memo = MultiPassMemo.model_validate(between)
    assert memo.current is None and memo.deep is None and memo.parts == [] and not memo.decomposed


def test_a_run_the_previous_version_stored_between_its_parts_resumes(tmp_path: Path) -> None:
    """The run of ``test_a_decomposed_run_resumes_between_its_parts``, its memo replaced by the one the previous
    version stored at the same point (tests/support/old_layout): it resumes and ends the same way."""
    db = tmp_path / "runs.db"
    first, sink, _ = chains.engine(chains.CHAIN_SCRIPT[:4], state_db=db)
    with first:
        run = first.start(chains.CHAIN)
        for _ in range(9):  # profile .. part 1's step
            run.next()
        run.close()
    assert chains.phases(sink)[-1] == "step:part1.1"
    with sqlite3.connect(db) as connection:
        connection.execute(
            "UPDATE runs SET scheduler_state = ? WHERE run_id = ?", (OLD_LAYOUT.read_text(), run.run_id)
        )
    second, sink, _ = chains.engine(chains.CHAIN_SCRIPT[4:], state_db=db)
    with second:
        result = second.resume(run.run_id)
    assert result["status"] == "completed", result["message"]
    assert chains.phases(sink) == ["refine", "step:part2.1", "step:part2.2", "evaluate"]
    assert result["answer"] == "15 / 3 is 5."
    passes_run = result["execution_history"]["passes"]
    assert [p["pass_number"] for p in passes_run] == [0, 1, 2] and passes_run[-1]["completed"]


# --- the preview -------------------------------------------------------------------------------------------------


def adapter_calls(built: Engine) -> Any:
    return lambda: len(chains.prompts(built))


def test_the_preview_agrees_with_every_cycle_of_a_decomposed_run_and_changes_nothing() -> None:
    built, sink, _ = chains.engine(chains.CHAIN_SCRIPT)
    with built:
        cycles = previewed(built.start(chains.CHAIN), adapter_calls(built))
    assert shown(cycles) == [
        ("stage", "pass 1: profile"),  # pass 0's stages, titled as the page always did
        ("stage", "pass 1: plan"),
        ("step", "pass 1: step 1"),
        ("step", "pass 1: step 2"),
        ("stage", "pass 1: evaluate"),
        ("stage", "pass 1: refine"),
        ("stage", "pass 1: update profile"),
        ("stage", "pass 2: subplan"),  # part 1's subplan, asked before the part runs
        ("step", "pass 2: step part1.1"),
        ("stage", "pass 2: subplan"),
        ("step", "pass 2: step part2.1"),
        ("step", "pass 2: step part2.2"),
        ("stage", "pass 2: evaluate"),
    ]
    assert [entry.phase for _, entry in cycles] == [p.split(":")[0] for p in chains.phases(sink)]
    _, (_, _), step, *_ = cycles
    assert step[0].details["step"]["does"] == "calculator" and step[0].details["prompt"] is None


def test_the_preview_agrees_with_every_cycle_of_a_deep_run() -> None:
    built, _ = passes.engine_for(deep_script())
    with built:
        cycles = previewed(built.start("say a, b and c"))
    assert [(p.phase, p.step_id) for p, _ in cycles] == [
        ("profile", None),
        ("plan", None),
        ("validate", None),
        ("refine", None),
        ("step", "1"),
        ("step", "2"),
        ("evaluate", None),
        ("refine", None),
        ("update_profile", None),
        ("step", "3"),
        ("evaluate", None),
    ]


def test_a_resumed_run_previews_its_next_cycle_from_the_stored_memo(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    first, _, _ = chains.engine(chains.CHAIN_SCRIPT[:4], state_db=db)
    with first:
        run = first.start(chains.CHAIN)
        for _ in range(9):
            run.next()
        run.close()
    second, _, _ = chains.engine(chains.CHAIN_SCRIPT[4:], state_db=db)
    with second:
        resumed = second.orchestrator().start_resume(run.run_id)
        preview = resumed.preview()  # before the resumed run's first cycle: the memo is read from the store
        assert preview is not None and (preview.kind, preview.title) == ("stage", "pass 2: subplan")
        assert shown(previewed(resumed, adapter_calls(second)))[0] == ("stage", "pass 2: subplan")
