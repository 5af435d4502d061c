"""Phase A's TTL allocation (spec 003): ``allocate_ttl`` is deterministic, at least 1, capped by the global limit,
and monotone in every dimension of the task profile its docstring names; plus exact values from its formula."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aeon_kernel.reasoning.models import TaskProfile
from aeon_plugins.multipass.ttl import allocate_ttl

TOOLS = ("none", "minimal", "moderate", "extensive")  # each in increasing demand
BREADTHS = ("narrow", "moderate", "broad")
CONFIDENCES = ("low", "medium", "high")

sufficiencies = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)
profiles = st.builds(
    TaskProfile,
    profile_version=st.integers(1, 1000),
    reasoning_depth=st.integers(1, 5),
    information_sufficiency=sufficiencies,
    expected_tool_usage=st.sampled_from(TOOLS),
    output_breadth=st.sampled_from(BREADTHS),
    confidence_requirement=st.sampled_from(CONFIDENCES),
    raw_inference=st.text(min_size=1, max_size=30).filter(str.strip),
)
limits = st.none() | st.integers(1, 60)


def with_(profile: TaskProfile, **changes: Any) -> TaskProfile:
    return TaskProfile.model_validate({**profile.model_dump(), **changes})


@given(profiles, limits, st.integers(1, 1000), st.text(min_size=1, max_size=30).filter(str.strip))
def test_the_same_profile_always_gets_the_same_ttl(
    profile: TaskProfile, limit: int | None, version: int, inference: str
) -> None:
    ttl = allocate_ttl(profile, limit)
    assert allocate_ttl(profile, limit) == ttl
    assert allocate_ttl(TaskProfile.model_validate(profile.model_dump()), limit) == ttl  # an equal copy
    # neither the version nor the model's wording counts
    assert allocate_ttl(with_(profile, profile_version=version, raw_inference=inference), limit) == ttl
    assert allocate_ttl(profile.updated(), limit) == ttl


@given(profiles, limits)
def test_at_least_one_and_capped_by_the_global_limit(profile: TaskProfile, limit: int | None) -> None:
    ttl = allocate_ttl(profile, limit)
    assert isinstance(ttl, int) and ttl >= 1
    if limit is not None:
        assert ttl <= limit
        assert ttl == min(limit, allocate_ttl(profile))  # the limit only caps, it never changes the formula


@given(profiles, st.integers(max_value=0))
def test_a_global_limit_below_one_is_refused(profile: TaskProfile, limit: int) -> None:
    with pytest.raises(ValueError, match="global_ttl_limit"):
        allocate_ttl(profile, limit)


@st.composite
def ordered(draw: st.DrawFn, values: st.SearchStrategy[Any]) -> tuple[Any, Any]:
    a, b = draw(values), draw(values)
    return (a, b) if a <= b else (b, a)


def rank(values: tuple[str, ...]) -> st.SearchStrategy[tuple[str, str]]:
    """Two of ``values``, the less demanding first."""
    return ordered(st.integers(0, len(values) - 1)).map(lambda ab: (values[ab[0]], values[ab[1]]))


@given(profiles, limits, ordered(st.integers(1, 5)))
def test_deeper_never_gets_fewer_cycles(
    profile: TaskProfile, limit: int | None, depths: tuple[int, int]
) -> None:
    low, high = (with_(profile, reasoning_depth=d) for d in depths)
    assert allocate_ttl(low, limit) <= allocate_ttl(high, limit)


@given(profiles, limits, rank(TOOLS))
def test_more_tools_never_get_fewer_cycles(
    profile: TaskProfile, limit: int | None, tools: tuple[str, str]
) -> None:
    low, high = (with_(profile, expected_tool_usage=t) for t in tools)
    assert allocate_ttl(low, limit) <= allocate_ttl(high, limit)


@given(profiles, limits, rank(BREADTHS))
def test_broader_never_gets_fewer_cycles(
    profile: TaskProfile, limit: int | None, breadths: tuple[str, str]
) -> None:
    low, high = (with_(profile, output_breadth=b) for b in breadths)
    assert allocate_ttl(low, limit) <= allocate_ttl(high, limit)


@given(profiles, limits, rank(CONFIDENCES))
def test_a_higher_confidence_requirement_never_gets_fewer_cycles(
    profile: TaskProfile, limit: int | None, confidences: tuple[str, str]
) -> None:
    low, high = (with_(profile, confidence_requirement=c) for c in confidences)
    assert allocate_ttl(low, limit) <= allocate_ttl(high, limit)


@given(profiles, limits, ordered(sufficiencies))
def test_less_information_never_gets_fewer_cycles(
    profile: TaskProfile, limit: int | None, sufficiency: tuple[float, float]
) -> None:
    less_informed, better_informed = (with_(profile, information_sufficiency=s) for s in sufficiency)
    assert allocate_ttl(less_informed, limit) >= allocate_ttl(better_informed, limit)


@given(profiles, profiles, limits)
def test_a_task_harder_in_every_dimension_never_gets_fewer_cycles(
    a: TaskProfile, b: TaskProfile, limit: int | None
) -> None:
    easy = with_(
        a,
        reasoning_depth=min(a.reasoning_depth, b.reasoning_depth),
        information_sufficiency=max(a.information_sufficiency, b.information_sufficiency),
        expected_tool_usage=TOOLS[
            min(TOOLS.index(a.expected_tool_usage), TOOLS.index(b.expected_tool_usage))
        ],
        output_breadth=BREADTHS[min(BREADTHS.index(a.output_breadth), BREADTHS.index(b.output_breadth))],
        confidence_requirement=CONFIDENCES[
            min(CONFIDENCES.index(a.confidence_requirement), CONFIDENCES.index(b.confidence_requirement))
        ],
    )
    assert allocate_ttl(easy, limit) <= allocate_ttl(a, limit)
    assert allocate_ttl(easy, limit) <= allocate_ttl(b, limit)


def profile(
    depth: int, sufficiency: float, tools: str, breadth: str, confidence: str, version: int = 1
) -> TaskProfile:
    return TaskProfile(
        profile_version=version,
        reasoning_depth=depth,
        information_sufficiency=sufficiency,
        expected_tool_usage=tools,
        output_breadth=breadth,
        confidence_requirement=confidence,
        raw_inference="test",
    )


@pytest.mark.parametrize(
    ("task", "expected"),
    [
        # base 4 + 3 * depth; tools 0/1/3/6; scope 0/2/4; care 0/1/3; gaps round(4 * (1 - sufficiency))
        (profile(1, 1.0, "none", "narrow", "low"), 7),  # the easiest task: the base alone
        (profile(5, 1.0, "none", "narrow", "low"), 19),
        (profile(5, 0.0, "extensive", "broad", "high"), 19 + 6 + 4 + 3 + 4),  # the hardest: 36
        (TaskProfile.default(), 4 + 9 + 3 + 2 + 1 + 2),  # the spec's default profile: 21
        (profile(2, 0.8, "minimal", "moderate", "medium"), 10 + 1 + 2 + 1 + 1),
        (profile(3, 0.6, "moderate", "narrow", "high"), 13 + 3 + 0 + 3 + 2),
        (profile(4, 0.0, "none", "broad", "low", version=7), 16 + 0 + 4 + 0 + 4),
    ],
)
def test_exact_values_from_the_formula(task: TaskProfile, expected: int) -> None:
    assert allocate_ttl(task) == expected
    assert allocate_ttl(task, 1000) == expected
    assert allocate_ttl(task, expected) == expected
    assert allocate_ttl(task, expected - 1) == expected - 1
    assert allocate_ttl(task, 1) == 1
