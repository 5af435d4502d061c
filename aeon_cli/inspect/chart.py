"""``aeon stats``'s figures drawn on a run's page (spec 004 §10.4): per cycle, the time in model calls, in tool
calls and in the kernel, as a stacked bar — an inline SVG built here, no chart library, no script.

One bar per cycle of the timeline's page (the same 200 cycles), scaled to the page's longest cycle. The figures
are :func:`aeon_cli.stats.cycle_stats`'s; colours come from the stylesheet's classes (the
Content-Security-Policy allows no inline style).
"""

from __future__ import annotations

from typing import Any, Final

from aeon_cli.inspect.records import RunData
from aeon_cli.inspect.views import PAGE

#: the drawing's inner height and its margins, in pixels
HEIGHT: Final = 120
LEFT: Final = 64
TOP: Final = 10
BOTTOM: Final = 22
#: one bar's width and the gap after it, in pixels
BAR: Final = 6
GAP: Final = 2
#: the parts of a cycle's time, bottom to top, with the stylesheet class drawing each
PARTS: Final = (("model_ms", "model"), ("tool_ms", "tool"), ("kernel_ms", "kernel"))


def _ms(value: float) -> str:
    return f"{value / 1000:.2f} s" if value >= 1000 else f"{value:.1f} ms"


def time_chart(data: RunData, page: int) -> dict[str, Any] | None:
    """The bars of one timeline page: each cycle's model, tool and kernel time stacked, with the page's totals.
    None for a run without cycles."""
    figures = data.stats["cycles"][(page - 1) * PAGE : page * PAGE]
    if not figures:
        return None
    first = (page - 1) * PAGE
    longest = max(max(sum(cycle[key] for key, _ in PARTS) for cycle in figures), 0.0)
    scale = HEIGHT / longest if longest > 0 else 0.0
    bars = []
    for offset, cycle in enumerate(figures):
        x = LEFT + offset * (BAR + GAP)
        y = TOP + HEIGHT
        segments = []
        for key, kind in PARTS:
            height = cycle[key] * scale
            if height <= 0:
                continue
            y -= height
            segments.append({"kind": kind, "y": round(y, 2), "height": round(height, 2)})
        number = first + offset + 1
        bars.append(
            {
                "number": number,
                "x": x,
                "segments": segments,
                "title": f"cycle {number}: {_ms(cycle['duration_ms'])} — model {_ms(cycle['model_ms'])}, "
                f"tools {_ms(cycle['tool_ms'])}, kernel {_ms(cycle['kernel_ms'])}",
            }
        )
    totals = {kind: sum(cycle[key] for cycle in figures) for key, kind in PARTS}
    return {
        "width": LEFT + len(figures) * (BAR + GAP) + 8,
        "height": TOP + HEIGHT + BOTTOM,
        "left": LEFT,
        "top": TOP,
        "bottom": TOP + HEIGHT,
        "bar": BAR,
        "longest": _ms(longest),
        "first": first + 1,
        "last": first + len(figures),
        "bars": bars,
        "totals": {kind: _ms(value) for kind, value in totals.items()},
    }
