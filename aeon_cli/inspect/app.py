"""The inspector's pages and JSON endpoints: a GET path and query in, a :class:`Response` out (no sockets here).

Every value reaches the page through a Jinja template with autoescaping on, so model and tool text — a
``<script>`` in a tool result — is shown as text; the pages load only ``/static/`` files and fetch only this
server's cycle fragments, and a Content-Security-Policy says so to the browser as well. Every body is scrubbed of
the registered secrets before it leaves, whatever the store or log holds.
"""

from __future__ import annotations

import json
import logging
import math
import re
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from importlib import resources
from typing import Any, Final
from urllib.parse import parse_qs, quote, unquote

from jinja2 import Environment, PackageLoader, StrictUndefined

from aeon_cli.inspect import diff, views
from aeon_cli.inspect.artifacts import EVERY, Narrowed
from aeon_cli.inspect.chart import time_chart
from aeon_cli.inspect.flowgraph import NODE_HEIGHT, NODE_WIDTH, flow_graph
from aeon_cli.inspect.problems import Unreadable
from aeon_cli.inspect.prompts import cassette_path
from aeon_cli.inspect.records import RunData
from aeon_cli.inspect.sources import Catalog
from aeon_kernel.secrets import scrub_secrets, scrub_secrets_json

log = logging.getLogger("aeon.inspect")

HTML: Final = "text/html; charset=utf-8"
JSON: Final = "application/json"
STATIC_TYPES: Final = {
    ".css": "text/css; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".svg": "image/svg+xml",
}
#: what the browser may load: this server's files only (no inline script, no other origin)
SECURITY_HEADERS: Final = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}

_RUN: Final = re.compile(r"^/run/(?P<key>[^/]+)/(?P<run>[^/]+)(?:/cycle/(?P<cycle>\d+))?$")
_API_RUN: Final = re.compile(r"^/api/run/(?P<key>[^/]+)/(?P<run>[^/]+)(?:/cycle/(?P<cycle>\d+))?$")
_STATUS_CLASS: Final = {
    "completed": "ok",
    "complete": "ok",
    "verified": "ok",
    "passed": "ok",
    "resolved": "ok",
    "contradicted": "bad",
    "unverified": "warn",
    "inconclusive": "warn",
    "success": "ok",
    "repaired": "ok",
    "done": "ok",
    "failed": "bad",
    "failure": "bad",
    "invalid": "bad",  # a multi-pass step found blocked
    "ttl_expired": "warn",
    "partial": "warn",
    "running": "info",
    "waiting": "warn",
    "pending": "idle",
    "not-reached": "idle",
}


#: when the request this thread answers came in (the footer says how long the page took to build)
_began = threading.local()


@dataclass(frozen=True)
class Response:
    status: int
    content_type: str
    body: bytes
    headers: Mapping[str, str] = field(default_factory=dict)


class NotFound(LookupError):
    """A path or a run that is not there; the message says which."""


def _quoted(value: str) -> str:
    return quote(value, safe="")


def run_url(key: str, run_id: str, page: int | None = None) -> str:
    url = f"/run/{_quoted(key)}/{_quoted(run_id)}"
    return f"{url}?page={page}" if page and page > 1 else url


def _ms(value: Any) -> str:
    if not isinstance(value, (int, float)) or isinstance(value, bool) or math.isnan(value):
        return "—"
    return f"{value / 1000:.2f} s" if value >= 1000 else f"{value:.1f} ms"


def _count(value: Any) -> str:
    return "—" if value is None else f"{value:,}"


def _when(value: Any) -> str:
    """An ISO timestamp as ``2026-01-02 10:11:12`` (UTC)."""
    text = str(value or "")
    return text[:19].replace("T", " ") if len(text) >= 19 else text or "—"


def _environment() -> Environment:
    env = Environment(
        loader=PackageLoader("aeon_cli.inspect", "templates"),
        autoescape=True,  # every template, whatever its name: model and tool text is untrusted
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(
        status_class=lambda status: _STATUS_CLASS.get(str(status), "other"),
        ms=_ms,
        count=_count,
        short=lambda run_id: str(run_id)[:12],
        when=_when,
        preview=views.preview,
        pretty=views.pretty,
    )
    env.globals["run_url"] = run_url
    return env


def _static() -> dict[str, bytes]:
    folder = resources.files("aeon_cli.inspect") / "static"
    return {
        item.name: item.read_bytes() for item in folder.iterdir() if item.name.endswith(tuple(STATIC_TYPES))
    }


_KIND: Final = re.compile(r"[a-z_]{1,40}")


def _page(query: Mapping[str, list[str]], name: str = "page") -> int:
    try:
        return max(int(query.get(name, ["1"])[0]), 1)
    except ValueError:
        return 1


def _narrowed(query: Mapping[str, list[str]]) -> Narrowed:
    """What the page's artifacts are narrowed to: ``?kind=`` (a plain name, else none), ``?node=`` and
    ``?schema=`` (any text up to 200 characters: they are compared, never run)."""
    kind = query.get("kind", [""])[0]
    node, schema = (query.get(name, [""])[0][:200] or None for name in ("node", "schema"))
    return Narrowed(kind if _KIND.fullmatch(kind) else None, node, schema)


class Inspector:
    """Routes GET requests over a :class:`Catalog`. Thread-safe: requests share only read-only data and caches."""

    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog
        self.env = _environment()
        self.static = _static()

    # --- entry point -------------------------------------------------------------------------------------------

    def handle(self, path: str, query_string: str = "") -> Response:
        _began.at = time.perf_counter()
        query = parse_qs(query_string)
        try:
            return self._route(path, query)
        except (NotFound, Unreadable) as exc:
            return self._error(404, "Not found", str(exc), api=path.startswith("/api/"))
        except Exception as exc:  # a bug or unexpected data: say so on the page, keep serving
            log.exception("the inspector failed on %s", path)
            message = f"{type(exc).__name__}: {exc}"
            return self._error(500, "The inspector failed", message, api=path.startswith("/api/"))

    def _route(self, path: str, query: Mapping[str, list[str]]) -> Response:
        if path == "/":
            return self._runs_page(_page(query))
        if path.startswith("/static/"):
            return self._file(path.removeprefix("/static/"))
        if path == "/favicon.ico":
            return self._file("favicon.svg")
        if path == "/diff":
            return self._diff_page(query)
        if path == "/api/runs":
            runs, problems = self.catalog.runs()
            return self._json({"runs": [run.to_dict() for run in runs], "problems": problems})
        found = _RUN.match(path)
        if found:
            data = self.catalog.run(unquote(found["key"]), unquote(found["run"]))
            if found["cycle"] is None:
                return self._run_page(data, _page(query), _page(query, "artifacts"), _narrowed(query))
            index = self._index(data, found["cycle"])
            return self._cycle_page(data, index, fragment=bool(query.get("fragment")))
        found = _API_RUN.match(path)
        if found:
            data = self.catalog.run(unquote(found["key"]), unquote(found["run"]))
            if found["cycle"] is None:
                return self._json(self._run_json(data, _page(query)))
            return self._json(views.cycle_json(data, self._index(data, found["cycle"])))
        raise NotFound(f"nothing at {path}")

    # --- pages -------------------------------------------------------------------------------------------------

    def _render(self, template: str, *, code: int = 200, **context: Any) -> Response:
        began = getattr(_began, "at", time.perf_counter())
        context["built_ms"] = lambda: f"{(time.perf_counter() - began) * 1000:.0f}"
        text = self.env.get_template(template).render(**context)
        body = scrub_secrets(text).encode("utf-8", errors="backslashreplace")
        return Response(code, HTML, body, SECURITY_HEADERS)

    def _json(self, value: Any, status: int = 200) -> Response:
        text = scrub_secrets_json(json.dumps(value, ensure_ascii=True, default=str))
        return Response(status, JSON, text.encode("ascii", errors="backslashreplace"), SECURITY_HEADERS)

    def _error(self, status: int, title: str, message: str, *, api: bool) -> Response:
        if api:
            return self._json({"error": message}, status)
        return self._render("error.html", code=status, status=status, title=title, message=message)

    def _file(self, name: str) -> Response:
        body = self.static.get(name)
        if body is None:
            raise NotFound(f"no file {name!r}")
        kind = next(content for suffix, content in STATIC_TYPES.items() if name.endswith(suffix))
        return Response(200, kind, body, {**SECURITY_HEADERS, "Cache-Control": "max-age=3600"})

    def _runs_page(self, page: int) -> Response:
        runs, problems = self.catalog.runs()
        page = views.clamp_page(page, len(runs), views.RUNS_PAGE)
        shown = runs[(page - 1) * views.RUNS_PAGE : page * views.RUNS_PAGE]
        return self._render(
            "runs.html",
            runs=shown,
            problems=problems,
            sources=[source.where for source in self.catalog.sources.values()],
            page=page,
            pages=views.page_count(len(runs), views.RUNS_PAGE),
            page_url=lambda number: f"/?page={number}",
        )

    @staticmethod
    def _index(data: RunData, cycle: str) -> int:
        number = int(cycle)
        if not 1 <= number <= len(data.entries):
            raise NotFound(f"run {data.info.run_id} has no cycle {number} (it has {len(data.entries)})")
        return number - 1

    def _urls(self, data: RunData) -> dict[str, Any]:
        base = run_url(data.info.key, data.info.run_id)
        return {
            "cycle_url": lambda number: f"{base}/cycle/{number}",
            "cycle_api_url": lambda number: f"/api{base}/cycle/{number}",
            "page_url": lambda number: run_url(data.info.key, data.info.run_id, number),
            "node_link": lambda index: (
                f"{run_url(data.info.key, data.info.run_id, views.page_of(index))}#c-{index + 1}"
            ),
        }

    def _artifacts(self, data: RunData, page: int, timeline_page: int, narrowed: Narrowed) -> dict[str, Any]:
        """The run's artifacts for its page (those ``narrowed`` matches): one page of them, its pager, the kinds,
        nodes and schemas to narrow them to, or why they cannot be shown."""
        reader = self.catalog.artifacts
        shown: dict[str, Any] = {
            "where": None,
            "problem": None,
            "rows": [],
            "total": 0,
            "page": 1,
            "pages": 1,
        }
        if reader is None:
            return shown
        shown["where"] = reader.where
        base = run_url(data.info.key, data.info.run_id)

        def url(to: Narrowed, number: int = 1) -> str:
            given = (("kind", to.kind), ("node", to.node), ("schema", to.schema))
            query = "".join(f"&{name}={_quoted(value)}" for name, value in given if value is not None)
            return (
                f"{base}?page={timeline_page}{f'&artifacts={number}' if number > 1 else ''}{query}#artifacts"
            )

        shown["url"] = lambda number: url(narrowed, number)
        shown["kind_url"] = lambda name: url(replace(narrowed, kind=name))
        shown["node_url"] = lambda node: url(replace(narrowed, node=node))
        shown["schema_url"] = lambda schema: url(replace(narrowed, schema=schema))
        shown["narrowed"] = narrowed
        try:
            found = reader.page(
                data.info.run_id, (page - 1) * views.ARTIFACTS_PAGE, views.ARTIFACTS_PAGE, narrowed
            )
            clamped = views.clamp_page(page, found.total, views.ARTIFACTS_PAGE)
            if clamped != page:  # past the last page: read the last one
                page = clamped
                offset = (page - 1) * views.ARTIFACTS_PAGE
                found = reader.page(data.info.run_id, offset, views.ARTIFACTS_PAGE, narrowed)
        except Unreadable as exc:
            shown["problem"] = str(exc)
            return shown
        shown.update(
            kinds=found.kinds,
            every=sum(count for _, count in found.kinds),
            rows=views.artifact_rows(found.rows),
            total=found.total,
            page=page,
            pages=views.page_count(found.total, views.ARTIFACTS_PAGE),
            first=(page - 1) * views.ARTIFACTS_PAGE + 1,
            last=(page - 1) * views.ARTIFACTS_PAGE + len(found.rows),
        )
        return shown

    def _run_page(
        self, data: RunData, page: int, artifacts_page: int = 1, narrowed: Narrowed = EVERY
    ) -> Response:
        total = len(data.entries)
        page = views.clamp_page(page, total, views.PAGE)
        urls = self._urls(data)
        steps = views.last_cycles(data)
        plan = None if data.is_flow else views.plan_view(data.final_plan())

        def step_link(step_id: str) -> str | None:
            index = steps.get(step_id)
            return None if index is None else urls["node_link"](index)

        return self._render(
            "run.html",
            info=data.info,
            manifest=data.manifest,
            result=data.result,
            where=data.where,
            totals=data.stats["run"],
            tools=data.stats["tools"],
            graph=flow_graph(data) if data.is_flow else None,
            node_width=NODE_WIDTH,
            node_height=NODE_HEIGHT,
            plan=plan,
            step_link=step_link,
            rows=views.timeline(data, page),
            first=min((page - 1) * views.PAGE + 1, total),
            last=min(page * views.PAGE, total),
            page=page,
            pages=views.page_count(total, views.PAGE),
            per_page=views.PAGE,
            api_url=f"/api{run_url(data.info.key, data.info.run_id)}",
            cassette=cassette_path(data.manifest),
            chart=time_chart(data, page),
            artifacts=self._artifacts(data, artifacts_page, page, narrowed),
            passes=views.pass_rows(data),
            waiting=views.waiting_on(data) if data.info.status == "waiting" else None,
            **urls,
        )

    def _cycle_page(self, data: RunData, index: int, *, fragment: bool) -> Response:
        urls = self._urls(data)
        context: dict[str, Any] = {"c": views.cycle_view(data, index), **urls}
        if fragment:
            return self._render("_cycle.html", **context)
        return self._render(
            "cycle.html",
            info=data.info,
            total=len(data.entries),
            back_url=urls["node_link"](index),
            **context,
        )

    def _run_json(self, data: RunData, page: int) -> dict[str, Any]:
        page = views.clamp_page(page, len(data.entries), views.PAGE)
        return {
            "run": data.info.to_dict(),
            "manifest": data.manifest,
            "result": data.result,
            "totals": data.stats["run"],
            "tools": data.stats["tools"],
            "plan": data.final_plan(),
            "page": page,
            "pages": views.page_count(len(data.entries), views.PAGE),
            "cycles": views.timeline(data, page),
        }

    def _diff_page(self, query: Mapping[str, list[str]]) -> Response:
        picked = query.get("r", []) if "r" in query else [*query.get("a", [])[:1], *query.get("b", [])[:1]]
        if len(picked) != 2:
            raise NotFound("pick two runs to compare (tick two runs in the list)")
        a, b = (self.catalog.run(*_split(value)) for value in picked)
        total = max(len(a.entries), len(b.entries))
        page = views.clamp_page(_page(query), total, views.PAGE)
        differing = diff.differing(a, b)
        base = f"/diff?a={_quoted(picked[0])}&b={_quoted(picked[1])}"
        return self._render(
            "diff.html",
            a=a,
            b=b,
            sa=diff.summary(a),
            sb=diff.summary(b),
            rows=diff.diff_rows(a, b, page),
            differing=differing,
            first_page=views.page_of(differing[0]) if differing else 1,
            total=total,
            page=page,
            pages=views.page_count(total, views.PAGE),
            page_url=lambda number: f"{base}&page={number}",
        )


def _split(value: str) -> tuple[str, str]:
    key, _, run_id = value.partition("/")
    if not run_id:
        raise NotFound(f"{value!r} does not name a run as SOURCE/RUN_ID")
    return key, run_id
