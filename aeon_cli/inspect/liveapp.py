"""Step-through's pages and its one control endpoint, on top of the read-only inspector (``aeon run --inspect``).

``/live`` shows the run the command drives: what it is doing, the next unit of work with the context it will get,
the plan or the flow's graph, the cycles so far (the recorded-run views) and, at the end, the result;
``/live?fragment=1`` is the same without the page around it (the page script swaps it in when the run moves) and
``/api/live`` says which moment is current. Every other path is the inspector's, over the live run.

``POST /live/control`` is the only request in the whole inspector that changes anything, and it exists only in
this mode. The server has already refused a foreign ``Host`` and any request without the session's cookie (another
process or account of this machine: :mod:`aeon_cli.inspect.gate`). It is refused (403) too unless it carries the
page's form token, compared in constant time, and, when the browser says where it comes from (``Origin``,
``Sec-Fetch-Site``), comes from this server's own pages: another site can neither read the token nor pass those
checks (CSRF; the cookie, ``SameSite=Strict``, is not sent from another site either).
The live pages send ``Referrer-Policy: same-origin`` so that the browser names this origin on the form's POST
(with ``no-referrer`` it would send ``Origin: null``).
"""

from __future__ import annotations

import hmac
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Final, cast
from urllib.parse import parse_qs

from aeon_cli.inspect import views
from aeon_cli.inspect.app import HTML, SECURITY_HEADERS, Inspector, Response, log
from aeon_cli.inspect.artifacts import StoredArtifacts
from aeon_cli.inspect.control import ACTIONS, ENDED, Action, Control, Published, Refused
from aeon_cli.inspect.flowgraph import NODE_HEIGHT, NODE_WIDTH, flow_graph
from aeon_cli.inspect.live import LiveRuns, Moment
from aeon_cli.inspect.records import RunData
from aeon_cli.inspect.sources import Catalog
from aeon_kernel.secrets import scrub_secrets

if TYPE_CHECKING:
    from aeon_kernel.runtime.artifacts import ArtifactStore

CONTROL: Final = "/live/control"
LIVE_HEADERS: Final = {**SECURITY_HEADERS, "Referrer-Policy": "same-origin"}
#: the largest control request body (a token, an action and a number)
MAX_BODY: Final = 1024
#: how long an action's answer waits for the run to show its effect
SETTLE: Final = 1.0
FORM: Final = "application/x-www-form-urlencoded"


def _plain(status: int, text: str) -> Response:
    return Response(status, "text/plain; charset=utf-8", (text + "\n").encode(), LIVE_HEADERS)


class LiveInspector(Inspector):
    """The inspector over one run that this process drives, with its control endpoint."""

    def __init__(self, control: Control, artifacts: ArtifactStore | None = None) -> None:
        reader = StoredArtifacts(artifacts, "of this run") if artifacts is not None else None
        super().__init__(Catalog([LiveRuns(control)], reader))
        self.control = control

    # --- GET ---------------------------------------------------------------------------------------------------

    def _route(self, path: str, query: Mapping[str, list[str]]) -> Response:
        if path == "/":
            return Response(303, HTML, b"", {**LIVE_HEADERS, "Location": "/live"})
        if path == "/live":
            return self._live(fragment=bool(query.get("fragment")))
        if path == "/api/live":
            published = self.control.look()
            return self._json(
                {
                    "version": published.version,
                    "mode": published.mode,
                    "cycles": len(published.moment.entries) if published.moment else 0,
                }
            )
        return super()._route(path, query)

    def _live(self, *, fragment: bool) -> Response:
        published = self.control.look()
        response = self._render(
            "_live.html" if fragment else "live.html", **self._context(published, published.moment)
        )
        self.control.served(published.version)
        return Response(response.status, response.content_type, response.body, LIVE_HEADERS)

    def _context(self, published: Published, moment: Moment | None) -> dict[str, Any]:
        context: dict[str, Any] = {
            "version": published.version,
            "mode": published.mode,
            "ended": published.mode in ENDED,
            "token": self.control.token,
            "control_url": CONTROL,
            "moment": moment,
        }
        if moment is None:  # the command has not published the run yet (a page opened very early)
            return context
        data = moment.data
        total = len(data.entries)
        page = views.page_count(total, views.PAGE)
        pending = moment.pending or {}
        node_link = self._node_link(data, page)
        return {
            **context,
            **self._urls(data),
            "node_link": node_link,
            "info": data.info,
            "result": data.result,
            "totals": data.stats["run"],
            "pending": moment.pending,
            "next_nodes": [stage["node"] for stage in pending.get("stages", ())],
            "graph": flow_graph(data) if data.is_flow else None,
            "node_width": NODE_WIDTH,
            "node_height": NODE_HEIGHT,
            "plan": None if data.is_flow else views.plan_view(data.final_plan()),
            "step_link": self._step_link(data, node_link),
            "rows": views.timeline(data, page),
            "first": min((page - 1) * views.PAGE + 1, total),
            "last": total,
            "page": page,
            "pages": page,
            "per_page": views.PAGE,
            "run_page": f"/run/live/{data.info.run_id}",
        }

    def _node_link(self, data: RunData, page: int) -> Callable[[int], str]:
        """A cycle's link from the live page: the row on this page (the page script opens it), else the cycle on
        the run's own page."""
        elsewhere = self._urls(data)["node_link"]
        return lambda index: f"#c-{index + 1}" if views.page_of(index) == page else str(elsewhere(index))

    @staticmethod
    def _step_link(data: RunData, node_link: Callable[[int], str]) -> Callable[[str], str | None]:
        """A plan step's link: its last cycle."""
        cycles = views.last_cycles(data)
        return lambda step_id: node_link(cycles[step_id]) if step_id in cycles else None

    # --- POST --------------------------------------------------------------------------------------------------

    def post(self, path: str, headers: Mapping[str, str], body: bytes) -> Response:
        """A control request (``headers`` with lower-case names; the server checked ``Host``)."""
        try:
            return self._post(path, headers, body)
        except Exception as exc:  # a bug: say so, keep serving (the run waits for a control that works)
            log.exception("the step-through control failed")
            return _plain(500, f"the control failed: {type(exc).__name__}: {scrub_secrets(str(exc))}")

    def _post(self, path: str, headers: Mapping[str, str], body: bytes) -> Response:
        if path != CONTROL:
            return Response(405, "text/plain; charset=utf-8", b"only the step-through controls take a POST\n")
        origin = headers.get("origin")
        if origin is not None and origin != f"http://{headers.get('host', '')}":
            return _plain(403, "refused: the request does not come from this page")
        if headers.get("sec-fetch-site", "same-origin") != "same-origin":
            return _plain(403, "refused: the request does not come from this page")
        if headers.get("content-type", "").split(";")[0].strip().lower() != FORM:
            return _plain(400, f"send the controls as {FORM}")
        fields = parse_qs(body.decode("utf-8", errors="replace"))
        token = fields.get("token", [""])[0]
        if not hmac.compare_digest(token.encode(), self.control.token.encode()):
            return _plain(403, "refused: no valid token (reload the page)")
        action = fields.get("action", [""])[0]
        if action not in ACTIONS:
            return _plain(400, f"unknown action {action!r}: {', '.join(ACTIONS)}")
        seen = fields.get("seen", [""])[0]
        reason = fields.get("reason", [""])[0]
        try:
            version = self.control.act(cast(Action, action), int(seen) if seen.isdigit() else None, reason)
        except Refused as exc:
            return self._refused(str(exc))
        self.control.wait_change(version, SETTLE)
        return Response(303, HTML, b"", {**LIVE_HEADERS, "Location": "/live"})

    def _refused(self, message: str) -> Response:
        response = self._render(
            "error.html", code=409, status=409, title="Not now", message=scrub_secrets(message)
        )
        return Response(response.status, response.content_type, response.body, LIVE_HEADERS)
