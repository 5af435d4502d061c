"""Refinement deltas (spec 003): the kernel applies a planner's ADD / MODIFY / REMOVE / REPLACE actions, the planner
never edits a plan itself.

The rules, each checked for every action before it is applied:

* complete and failed steps are never touched, nor is a running one (refinement happens between steps);
* step ids are stable: MODIFY keeps the id, new steps get ids never used in this run, and an id that was removed
  or replaced is retired for good;
* a plan fragment (the step or section an action targets) gets at most 3 refinements, the run at most 10; past a
  limit the fragment is marked for manual intervention (``RefinementLimitError``);
* subplans nest at most 5 deep (a step ``a.1.2`` is at depth 3; ``NestingDepthError``; the fragment is marked for
  manual intervention too);
* the plan stays valid: unique ids, finished steps first, nothing inserted before a finished step.

An action that breaks a rule is rejected with its reason and the next one is tried: the run goes on with the best
plan it has. The :class:`RefinementLedger` remembers attempts, retired ids and fragments marked for manual
intervention across passes; it is plain JSON, so a resumed run picks it up from its state.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

from aeon_kernel import Plan, PlanStep, RefinementAction, StepStatus
from aeon_kernel.errors import NestingDepthError, RefinementLimitError, ValidationError

PER_FRAGMENT: Final = 3
TOTAL: Final = 10
MAX_DEPTH: Final = 5


def depth_of(step_id: str) -> int:
    """How deep a step is nested: ``"3"`` is at depth 1, ``"3.2"`` at 2 (subplan ids extend their parent's)."""
    return step_id.count(".") + 1


@dataclass
class RefinementLedger:
    """What refinement has done so far in a run (kept in the run's scheduler state)."""

    attempts: dict[str, int] = field(default_factory=dict)
    total: int = 0
    retired: set[str] = field(default_factory=set)
    manual: set[str] = field(default_factory=set)
    per_fragment: int = PER_FRAGMENT
    limit: int = TOTAL
    max_depth: int = MAX_DEPTH

    def to_json(self) -> dict[str, Any]:
        return {
            "attempts": dict(self.attempts),
            "total": self.total,
            "retired": sorted(self.retired),
            "manual": sorted(self.manual),
            "per_fragment": self.per_fragment,
            "limit": self.limit,
            "max_depth": self.max_depth,
        }

    def refusal(self, fragment: str) -> str | None:
        """Why one more refinement of ``fragment`` would be refused (a limit), or None when it may be tried."""
        if fragment in self.manual:
            return f"{fragment} is marked for manual intervention"
        if self.total >= self.limit:
            return f"the run has used all {self.limit} refinements"
        if self.attempts.get(fragment, 0) >= self.per_fragment:
            return f"{fragment} has had {self.per_fragment} refinements; it is marked for manual intervention"
        return None

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RefinementLedger:
        return cls(
            attempts=dict(data.get("attempts", {})),
            total=int(data.get("total", 0)),
            retired=set(data.get("retired", ())),
            manual=set(data.get("manual", ())),
            per_fragment=int(data.get("per_fragment", PER_FRAGMENT)),
            limit=int(data.get("limit", TOTAL)),
            max_depth=int(data.get("max_depth", MAX_DEPTH)),
        )


@dataclass(frozen=True)
class Outcome:
    """What became of one action: applied, or rejected and why."""

    action: RefinementAction
    applied: bool
    reason: str | None = None
    error_type: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "action": self.action.model_dump(mode="json"),
            "applied": self.applied,
            "reason": self.reason,
            "error_type": self.error_type,
        }


def apply_refinements(
    steps: list[PlanStep], actions: list[RefinementAction], ledger: RefinementLedger
) -> tuple[list[PlanStep], list[Outcome]]:
    """``steps`` with every acceptable action applied, in order; and what became of each action.

    ``steps`` is not changed; ``ledger`` is updated with the attempts made and the ids retired.
    """
    current = list(steps)
    outcomes = []
    for action in actions:
        try:
            current = _apply(current, action, ledger)
        except (RefinementLimitError, NestingDepthError) as exc:
            ledger.manual.add(_fragment(action))  # past a limit: the fragment needs a person (spec 003)
            outcomes.append(Outcome(action, False, str(exc), type(exc).__name__))
        except ValidationError as exc:
            outcomes.append(Outcome(action, False, str(exc), type(exc).__name__))
        else:
            outcomes.append(Outcome(action, True))
    return current, outcomes


def _fragment(action: RefinementAction) -> str:
    """What an action refines: a step, or a section of the plan."""
    return action.target_step_id or f"section:{action.target_plan_section}"


def _apply(steps: list[PlanStep], action: RefinementAction, ledger: RefinementLedger) -> list[PlanStep]:
    fragment = _fragment(action)
    if (refused := ledger.refusal(fragment)) is not None:
        raise RefinementLimitError(refused, fragment)
    result = _changed(steps, action, ledger)
    _check_plan(result)
    ledger.attempts[fragment] = ledger.attempts.get(fragment, 0) + 1
    ledger.total += 1
    ids_after = {s.step_id for s in result}
    ledger.retired |= {s.step_id for s in steps} - ids_after
    return _numbered(result)


def _changed(steps: list[PlanStep], action: RefinementAction, ledger: RefinementLedger) -> list[PlanStep]:
    ids = {s.step_id: i for i, s in enumerate(steps)}
    first_open = next((i for i, s in enumerate(steps) if not s.status.is_terminal), len(steps))
    if action.action_type == "ADD":
        position = _insertion_point(steps, ids, action, first_open)
        return [*steps[:position], *_fresh(action.replacement(), ids, ledger), *steps[position:]]
    if action.target_step_id is None:  # the model's validator guarantees it; narrowed for the type checker
        raise ValidationError(f"{action.action_type} needs target_step_id")
    index = _open_target(steps, ids, action.target_step_id)
    if action.action_type == "REMOVE":
        return [*steps[:index], *steps[index + 1 :]]
    if action.action_type == "MODIFY":
        (new,) = action.replacement()[:1]
        if new.step_id != action.target_step_id:
            raise ValidationError(
                f"MODIFY keeps the step's id: {action.target_step_id!r}, not {new.step_id!r} (ids are stable)"
            )
        return [*steps[:index], _pending(new), *steps[index + 1 :]]
    # REPLACE: the target gives way to new steps (a subplan), under new ids
    return [*steps[:index], *_fresh(action.replacement(), ids, ledger), *steps[index + 1 :]]


def _insertion_point(
    steps: list[PlanStep], ids: dict[str, int], action: RefinementAction, first_open: int
) -> int:
    # The earliest a new step may go: after every finished step, and after a step that holds the run's place.
    earliest = (
        first_open + 1 if first_open < len(steps) and steps[first_open].status.holds_place else first_open
    )
    if action.target_plan_section == "end":
        return len(steps)
    if action.target_plan_section in ("start", "goal"):
        return earliest
    assert action.target_step_id is not None
    if action.target_step_id not in ids:
        raise ValidationError(f"ADD after {action.target_step_id!r}: no such step")
    position = ids[action.target_step_id] + 1
    if position < earliest:
        raise ValidationError(
            f"ADD after {action.target_step_id!r} would put a new step before one that has started or finished"
        )
    return position


def _open_target(steps: list[PlanStep], ids: dict[str, int], step_id: str) -> int:
    if step_id not in ids:
        raise ValidationError(f"no step {step_id!r} in the plan")
    status = steps[ids[step_id]].status
    if status not in (StepStatus.PENDING, StepStatus.INVALID):
        raise ValidationError(
            f"step {step_id!r} is {status.value}: only pending or invalid steps are refined"
        )
    return ids[step_id]


def _fresh(new_steps: tuple[PlanStep, ...], ids: dict[str, int], ledger: RefinementLedger) -> list[PlanStep]:
    if not new_steps:
        raise ValidationError("the action brings no step")
    seen: set[str] = set()
    for step in new_steps:
        if step.step_id in ids or step.step_id in ledger.retired or step.step_id in seen:
            raise ValidationError(
                f"step id {step.step_id!r} is taken or was used before: ids are never reused"
            )
        seen.add(step.step_id)
        depth = depth_of(step.step_id)
        if depth > ledger.max_depth:
            raise NestingDepthError(
                f"step {step.step_id!r} would nest {depth} deep (at most {ledger.max_depth})",
                depth=depth,
                max_depth=ledger.max_depth,
            )
    return [_pending(step) for step in new_steps]


def _pending(step: PlanStep) -> PlanStep:
    """A step as refinement brings it in: not started, whatever the planner wrote."""
    return step.model_copy(
        update={
            "status": StepStatus.PENDING,
            "result": None,
            "failure": None,
            "errors": (),
            "clarity_state": None,
        }
    )


def _check_plan(steps: list[PlanStep]) -> None:
    if not steps:
        raise ValidationError("the refinement would leave the plan without steps")
    try:
        Plan(goal="refined", steps=tuple(steps))
    except ValueError as exc:  # pydantic's ValidationError is a ValueError
        raise ValidationError(f"the refined plan is not valid: {exc}") from None


def _numbered(steps: list[PlanStep]) -> list[PlanStep]:
    """Keep ``step_index``/``total_steps`` true for the steps still to run after steps came or went (only in plans
    that use them). Finished steps keep the numbers they ran with: they are never touched."""
    if all(s.step_index is None for s in steps):
        return steps
    total = len(steps)
    return [
        s
        if s.status.is_terminal or (s.step_index, s.total_steps) == (i, total)
        else s.model_copy(update={"step_index": i, "total_steps": total})
        for i, s in enumerate(steps, start=1)
    ]
