"""SC-003 on the corpus: every malformed plan ends as its case says, deterministically and through the supervisor."""

from __future__ import annotations

from collections import Counter

import pytest

from aeon_kernel import AeonError, Plan, SupervisorError, ValidationError
from aeon_kernel.kit import ModelClient
from aeon_plugins.planning import PlanParse, parse_plan
from aeon_plugins.schema_validator import SchemaValidator
from aeon_plugins.scripted import ScriptedLLM
from aeon_plugins.supervisor import DefaultSupervisor
from tests.repair.corpus import (
    Case,
    added_tools,
    changed_arguments,
    comparable,
    corpus_tools,
    deterministic_outcome,
    load_corpus,
)

CASES = load_corpus()
TOOLS = corpus_tools()


def test_the_corpus_covers_every_family_with_real_model_outputs() -> None:
    families = Counter(case.family for case in CASES)
    hand_written = sum(n for family, n in families.items() if not family.startswith("real"))
    real = sum(n for family, n in families.items() if family.startswith("real"))
    assert hand_written >= 120 and real >= 30, families
    assert len({case.id for case in CASES}) == len(CASES)
    for case in CASES:
        assert case.expect in ("repaired", "hostile", "model"), case.id
        assert (case.expected_plan is not None) == (case.expect == "repaired"), case.id


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.id)
def test_the_deterministic_repair_ends_each_case_as_expected(case: Case) -> None:
    outcome = deterministic_outcome(case, TOOLS)
    if case.expect == "repaired":
        assert isinstance(outcome, PlanParse), f"{case.notes}: {outcome}"
        assert comparable(outcome.plan) == case.expected_plan
        assert outcome.actions, "every case is malformed: a valid plan as written measures nothing"
    else:  # hostile, or needing the model: refused with a structured error, never a plan or another exception
        assert isinstance(outcome, (SupervisorError, ValidationError)), outcome


def test_no_repair_adds_a_tool_or_changes_an_argument() -> None:
    """FR-032 across the corpus: every tool and every argument key and value of a repaired plan is written, whole,
    in the text it came from."""
    for case in CASES:
        outcome = deterministic_outcome(case, TOOLS)
        if isinstance(outcome, PlanParse):
            assert not added_tools(case.text, outcome.plan), case.id
            assert not changed_arguments(case.text, outcome.plan), case.id


def test_the_default_supervisor_repairs_the_same_before_it_asks_its_model() -> None:
    """The planner's path (supervisor given) agrees with the deterministic mode: repairable cases never reach the
    model; the rest go to the model (here one that cannot answer) or are refused, always with an AeonError."""
    validator = SchemaValidator()
    for case in CASES:
        model = ScriptedLLM([])
        supervisor = DefaultSupervisor(ModelClient(model), validator, TOOLS)
        try:
            outcome: Plan | AeonError = parse_plan(case.text, TOOLS, supervisor, validator).plan
        except AeonError as exc:
            outcome = exc
        if case.expect == "repaired":
            assert isinstance(outcome, Plan), (case.id, outcome)
            assert comparable(outcome) == case.expected_plan, case.id
            assert model.prompts == [], case.id
        else:
            assert isinstance(outcome, AeonError), case.id
