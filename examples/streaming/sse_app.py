"""A run streamed to a browser with server-sent events: ``engine.astream`` behind a Starlette route.

    pip install starlette uvicorn        # (FastAPI works the same: it is Starlette underneath)
    uvicorn examples.streaming.sse_app:app

Then open http://127.0.0.1:8000/ and ask. Each event of the run (``aeon_kernel.events``) is one SSE message whose
``event:`` is its type and whose ``data:`` is its JSON; the last one, ``run_finished``, carries the result. A
browser that goes away cancels the response's task, which stops the run at its next safe point; a run with a state
store is then resumable (``aeon resume RUN_ID``).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

from aeon_kernel import Engine

PAGE = """<!doctype html><meta charset="utf-8"><title>Aeon</title>
<form id="ask"><input name="request" size="60" value="calculate the sum of 5 and 10"> <button>Run</button></form>
<pre id="out"></pre>
<script>
document.getElementById("ask").onsubmit = (e) => {
  e.preventDefault();
  const out = document.getElementById("out");
  out.textContent = "";
  const source = new EventSource("/run?request=" + encodeURIComponent(e.target.request.value));
  source.addEventListener("text_delta", (m) => { out.textContent += JSON.parse(m.data).text; });
  for (const kind of ["step_started", "tool_returned", "step_finished"]) {
    source.addEventListener(kind, (m) => { out.textContent += "\\n[" + kind + "] "; });
  }
  source.addEventListener("run_finished", (m) => {
    const result = JSON.parse(m.data).result;
    out.textContent += "\\n\\n" + result.status + ": " + JSON.stringify(result.answer);
    source.close();
  });
};
</script>"""


def sse(event: Any) -> str:
    """One event as a server-sent event message."""
    return f"event: {event.type}\ndata: {json.dumps(event.to_dict(), ensure_ascii=False)}\n\n"


def make_app(engine: Engine) -> Starlette:
    """The app, on ``engine`` (which it closes at shutdown)."""

    async def page(request: Request) -> HTMLResponse:
        return HTMLResponse(PAGE)

    async def run(request: Request) -> Response:
        asked = request.query_params.get("request", "").strip()
        if not asked:
            return PlainTextResponse("ask something: /run?request=...", status_code=400)

        async def events() -> AsyncIterator[str]:
            async with engine.astream(asked) as stream:
                async for event in stream:
                    yield sse(event)

        return StreamingResponse(
            events(), media_type="text/event-stream", headers={"Cache-Control": "no-cache"}
        )

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        engine.close()

    return Starlette(routes=[Route("/", page), Route("/run", run)], lifespan=lifespan)


def __getattr__(name: str) -> Any:
    if (
        name == "app"
    ):  # uvicorn examples.streaming.sse_app:app — the engine aeon.toml describes, built on demand
        return make_app(Engine())
    raise AttributeError(name)
