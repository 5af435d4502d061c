"""Phase A's TTL allocation: a task profile turned into a number of cycles, by one documented formula.

    base  = 4 + 3 * reasoning_depth                        (depth 1 → 7, depth 5 → 19)
    tools = {none: 0, minimal: 1, moderate: 3, extensive: 6}[expected_tool_usage]
    scope = {narrow: 0, moderate: 2, broad: 4}[output_breadth]
    care  = {low: 0, medium: 1, high: 3}[confidence_requirement]
    gaps  = round(4 * (1 - information_sufficiency))      (0 when the request says everything, 4 when nothing)
    ttl   = min(global_ttl_limit, max(1, base + tools + scope + care + gaps))

Deterministic (the same profile always gets the same TTL), at least 1, capped by the global limit, and monotone:
a deeper, more tool-heavy, broader, more demanding or less informed task never gets fewer cycles. A single-pass run
of a plan of n steps needs n + 1 cycles; the formula leaves room for a second pass on everything but the easiest
tasks. ``profile_version`` and ``raw_inference`` do not count.
"""

from __future__ import annotations

from typing import Final

from aeon_kernel import TaskProfile

TOOL_CYCLES: Final = {"none": 0, "minimal": 1, "moderate": 3, "extensive": 6}
BREADTH_CYCLES: Final = {"narrow": 0, "moderate": 2, "broad": 4}
CONFIDENCE_CYCLES: Final = {"low": 0, "medium": 1, "high": 3}


def allocate_ttl(task_profile: TaskProfile, global_ttl_limit: int | None = None) -> int:
    """The TTL for ``task_profile`` by the formula above; ``global_ttl_limit`` (≥ 1) caps it."""
    if global_ttl_limit is not None and global_ttl_limit < 1:
        raise ValueError(f"global_ttl_limit must be at least 1, got {global_ttl_limit}")
    ttl = (
        4
        + 3 * task_profile.reasoning_depth
        + TOOL_CYCLES[task_profile.expected_tool_usage]
        + BREADTH_CYCLES[task_profile.output_breadth]
        + CONFIDENCE_CYCLES[task_profile.confidence_requirement]
        + round(4 * (1 - task_profile.information_sufficiency))
    )
    ttl = max(1, ttl)
    return min(ttl, global_ttl_limit) if global_ttl_limit is not None else ttl
