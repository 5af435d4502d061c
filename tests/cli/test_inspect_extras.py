"""The inspector's run page beyond the timeline (issue 15): the chart of ``aeon stats``'s figures, the run's
artifacts, and a replay shown to reproduce its recording exactly.

The runs are made by the real command (``python -m aeon_cli run --json``) on the scripted model, recorded by
the CLI into ``runs.db`` and, beside it, ``runs-artifacts.db`` — one with ``--record cassette.jsonl``, one with
``--replay cassette.jsonl`` while the scripted model would answer otherwise — and served from the catalog
``aeon inspect`` opens. Browser tests drive Debian's Chromium through Playwright as test_inspect.py does (skipped,
saying why, where either is missing; required where ``AEON_REQUIRE_BROWSER`` is set).

``AEON_INSPECTOR_SCREENSHOTS=1`` also saves the chart's and the artifacts' screenshots into docs/img/
(docs/inspector.md shows them).
"""

from __future__ import annotations

import hashlib
import html
import http.client
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from aeon_cli.inspect.app import Inspector
from aeon_cli.inspect.artifacts import Narrowed, SqliteArtifacts, StoredArtifacts
from aeon_cli.inspect.server import InspectorServer, serving
from aeon_cli.inspect.sources import Catalog, JsonlRuns, SqliteRuns, open_catalog
from aeon_kernel import Artifact, Engine
from aeon_kernel.config import parse_config
from aeon_kernel.secrets import register_secret
from aeon_plugins.sqlite_artifacts import SQLiteArtifactStore
from tests.support.browser import needs_browser
from tests.support.builders import answer, llm_step, plan, tool_step
from tests.support.inspector_runs import build_big_run
from tests.support.servers import started

#: no digit in the echoed text: the calculator's review would ask that a number the request states be used
SCRIPT = "<script>alert(document.domain)</script>"
#: asks for what THREE_STEPS does: the sum, then the echo (each tool's review finds its calls asked for)
REQUEST = f"add 5 and 10, then echo {SCRIPT}"
THREE_STEPS = plan(
    tool_step("1", "calculator", {"expression": "5 + 10"}),
    tool_step("2", "echo", {"message": SCRIPT}),
    llm_step("3"),
)
#: put raw into the artifact store (as a store written before it was registered would hold it)
CANARY = "artf-5e0c27b9d4-k3mq"
ROOT = Path(__file__).resolve().parents[2]


def environment(project: Path) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key != "AEON_CONFIG"}
    return {**env, "AEON_DATA_DIR": str(project / "data")}


def aeon_run(project: Path, *args: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-m", "aeon_cli", "run", REQUEST, "--json", *args],
        cwd=project,
        env=environment(project),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


@dataclass(frozen=True)
class Runs:
    project: Path
    recorded: str
    replayed: str

    @property
    def artifacts(self) -> Path:
        return self.project / "data" / "runs-artifacts.db"


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Runs:
    """A run recorded into a cassette, then replayed from it while the scripted model would answer otherwise: the
    replay can only answer "The sum is 15" from the cassette."""
    project = tmp_path_factory.mktemp("replay")
    (project / "aeon.toml").write_text('[llm]\nuse = "scripted"\nresponses = "responses.json"\n')
    (project / "responses.json").write_text(json.dumps([THREE_STEPS, answer("The sum is 15")]))
    recorded = aeon_run(project, "--record", "cassette.jsonl")
    (project / "responses.json").write_text(json.dumps([THREE_STEPS, answer("The sum is 99")]))
    replayed = aeon_run(project, "--replay", "cassette.jsonl")
    for result in (recorded, replayed):
        assert (result["status"], result["answer"]) == ("completed", "The sum is 15"), result
    assert recorded["run_id"] != replayed["run_id"]
    register_secret(CANARY)
    store = SQLiteArtifactStore(project / "data" / "runs-artifacts.db")
    store.put([Artifact(run_id=recorded["run_id"], kind="telemetry", cycle=4, value={"key": CANARY})])
    store.close()
    return Runs(project, recorded["run_id"], replayed["run_id"])


@pytest.fixture(scope="module")
def server(runs: Runs) -> Iterator[InspectorServer]:
    """The catalog `aeon inspect` opens in the project: the data directory's store and its artifact store."""
    before = os.environ.get("AEON_DATA_DIR"), os.getcwd()
    os.environ["AEON_DATA_DIR"] = str(runs.project / "data")
    os.chdir(runs.project)
    try:
        catalog = open_catalog(None, [])
    finally:
        if before[0] is None:
            del os.environ["AEON_DATA_DIR"]
        else:
            os.environ["AEON_DATA_DIR"] = before[0]
        os.chdir(before[1])
    assert isinstance(catalog.artifacts, SqliteArtifacts) and catalog.artifacts.path == runs.artifacts
    with serving(catalog) as running:
        yield running
    catalog.close()


def fetch(server: InspectorServer, path: str) -> tuple[int, dict[str, str], str]:
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    try:
        headers = {"Host": f"127.0.0.1:{server.port}", "Cookie": server.gate.cookie_header}  # signed in
        connection.request("GET", path, headers=headers)
        response = connection.getresponse()
        return response.status, dict(response.getheaders()), response.read().decode("utf-8")
    finally:
        connection.close()


# --- over HTTP ------------------------------------------------------------------------------------------------


def test_the_run_page_charts_model_tool_and_kernel_time_per_cycle(
    server: InspectorServer, runs: Runs
) -> None:
    status, headers, page = fetch(server, f"/run/store/{runs.recorded}")
    assert status == 200 and "style-src 'self'" in headers["Content-Security-Policy"]
    chart = page[
        page.index('<section class="time-chart"') : page.index("</section>", page.index("time-chart"))
    ]
    assert re.findall(r'data-cycle="(\d+)"', chart) == ["1", "2", "3", "4"]
    assert 'class="tool"' in chart and 'class="kernel"' in chart  # the calculator's and echo's time
    assert "<title>cycle 2: " in chart and "tools " in chart
    assert " style=" not in page and "<style" not in page  # colours from the stylesheet's classes (the CSP)
    assert page.count("<script") == 1


def test_the_chart_is_paginated_like_the_timeline(tmp_path: Path) -> None:
    run_id = build_big_run(tmp_path / "runs.db", 450)
    inspector = Inspector(Catalog([SqliteRuns("store", tmp_path / "runs.db")]))
    for page, bars in ((1, list(range(1, 201))), (3, list(range(401, 451)))):
        body = inspector.handle(f"/run/store/{run_id}", f"page={page}").body.decode()
        chart = body[body.index('<section class="time-chart"') :]
        chart = chart[: chart.index("</section>")]
        assert [int(n) for n in re.findall(r'data-cycle="(\d+)"', chart)] == bars
        assert f"cycles {bars[0]}\N{EN DASH}{bars[-1]}" in chart
    assert 'id="artifacts"' not in body  # no artifact store in this catalog: no section
    inspector.catalog.close()


def test_the_run_page_lists_its_artifacts_escaped_and_scrubbed(server: InspectorServer, runs: Runs) -> None:
    before = hashlib.sha256(runs.artifacts.read_bytes()).hexdigest()
    _, _, page = fetch(server, f"/run/store/{runs.recorded}")
    section = page[page.index('<section class="artifacts"') :]
    section = section[: section.index("</section>")]
    kinds = re.findall(r'<tr class="artifact" data-kind="(\w+)">', section)
    assert kinds[:2] == ["model_call", "plan"] and kinds[-2:] == ["answer", "telemetry"]
    assert kinds.count("telemetry") == 5 and kinds.count("model_call") == 2  # the plan's and the answer's
    assert {"tool_result", "step_output"} <= set(kinds) and len(kinds) == 14
    assert "tool:calculator" in section and "tool:echo" in section
    assert "&lt;script&gt;alert(document.domain)&lt;/script&gt;" in section and "<script" not in section
    assert CANARY not in page and CANARY[:8] not in page and "***" in section
    assert "14 of 14" in section and str(runs.artifacts) in section
    _, _, other = fetch(server, f"/run/store/{runs.replayed}")
    assert other.count('<tr class="artifact"') == 13  # its own artifacts only
    assert hashlib.sha256(runs.artifacts.read_bytes()).hexdigest() == before


def test_artifacts_are_paginated_and_a_missing_store_is_not_created(tmp_path: Path, runs: Runs) -> None:
    missing = tmp_path / "none-artifacts.db"
    state = runs.project / "data" / "runs.db"
    inspector = Inspector(Catalog([SqliteRuns("store", state)], SqliteArtifacts(missing)))
    body = inspector.handle(f"/run/store/{runs.recorded}").body.decode()
    assert "The artifact store holds nothing for this run." in body and not missing.exists()
    inspector.catalog.close()

    many = tmp_path / "many-artifacts.db"
    store = SQLiteArtifactStore(many)
    store.put([Artifact(run_id=runs.recorded, kind="telemetry", cycle=1, value=n) for n in range(250)])
    store.close()
    inspector = Inspector(Catalog([SqliteRuns("store", state)], SqliteArtifacts(many)))
    last = inspector.handle(f"/run/store/{runs.recorded}", "artifacts=3").body.decode()
    assert (
        last.count('<tr class="artifact"') == 50
        and "201\N{EN DASH}250 of 250" in last
        and "page 3 of 3" in last
    )
    assert f"/run/store/{runs.recorded}?page=1&amp;artifacts=2#artifacts" in last
    # a page past the end shows the last one
    past = inspector.handle(f"/run/store/{runs.recorded}", "artifacts=9").body.decode()
    assert past.count('<tr class="artifact"') == 50 and "201\N{EN DASH}250 of 250" in past
    inspector.catalog.close()


def test_a_replay_is_the_same_run_as_its_recording_over_http(server: InspectorServer, runs: Runs) -> None:
    _, _, page = fetch(server, f"/diff?a=store/{runs.recorded}&b=store/{runs.replayed}")
    assert "Every cycle is the same (timings aside)." in page
    assert re.findall(r'<tr id="d-(\d+)" class="([\w-]+)"', page) == [
        (str(n), "same-row") for n in range(1, 5)
    ]
    assert (
        'class="changed"' not in page
    )  # no summary row either: status, cycles, calls, tokens, errors, answer


# --- in Chromium ----------------------------------------------------------------------------------------------


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    """A page that must request nothing from elsewhere, open no dialog and throw no error."""
    context = browser.new_context(viewport={"width": 1360, "height": 900})
    opened = context.new_page()
    opened.set_default_timeout(20_000)
    requests: list[str] = []
    trouble: list[str] = []
    opened.on("request", lambda request: requests.append(request.url))
    opened.on("dialog", lambda dialog: (trouble.append(dialog.message), dialog.dismiss()))
    opened.on("pageerror", lambda error: trouble.append(str(error)))
    opened.on("console", lambda message: trouble.append(message.text) if message.type == "error" else None)
    yield opened
    context.close()
    elsewhere = [url for url in requests if not url.startswith("http://127.0.0.1:")]
    assert requests and not elsewhere, elsewhere
    assert not trouble, trouble  # a CSP violation is a console error


def shot(element: Any, name: str, tmp_path: Path) -> None:
    """A screenshot of one element (small, unlike a whole page), copied into docs/img/ when asked to."""
    element.screenshot(path=str(tmp_path / name))
    if os.environ.get("AEON_INSPECTOR_SCREENSHOTS"):
        (ROOT / "docs" / "img").mkdir(exist_ok=True)
        shutil.copy(tmp_path / name, ROOT / "docs" / "img" / name)


def model_outputs(page: Any, url: str) -> list[str]:
    """Every model call's output on a run's page, each cycle opened."""
    page.goto(url)
    cycles = page.locator(".timeline details.cycle")
    for number in range(1, cycles.count() + 1):
        page.locator(f"#c-{number} > summary").click()
        page.locator(f"#c-{number} .cycle-detail").wait_for()
    outputs: list[str] = page.locator(".timeline .call .block.output pre").all_inner_texts()
    return outputs


@needs_browser
def test_a_replay_reproduces_its_recording_in_the_browser(
    page: Any, server: InspectorServer, runs: Runs
) -> None:
    page.goto(server.login("/diff") + f"&a=store/{runs.recorded}&b=store/{runs.replayed}")  # signs in
    assert page.locator("p.diff-count").inner_text().startswith("Every cycle is the same (timings aside).")
    assert page.locator("table.diff tr.differs").count() == 0
    assert page.locator("table.diff tr.same-row").count() == 4
    assert page.locator("table.diff-summary tr.changed").count() == 0
    recorded = model_outputs(page, f"{server.url}run/store/{runs.recorded}")
    replayed = model_outputs(page, f"{server.url}run/store/{runs.replayed}")
    assert len(recorded) == 2 and recorded == replayed
    assert recorded[1] == '{"answer": "The sum is 15"}'


@needs_browser
def test_the_chart_and_the_artifacts_in_the_browser(
    page: Any, server: InspectorServer, runs: Runs, tmp_path: Path
) -> None:
    page.goto(server.login(f"/run/store/{runs.recorded}"))  # signs in, then shows the run
    bars = page.locator("section.time-chart svg.stacked a.bar")
    assert bars.count() == 4
    box = page.locator("section.time-chart svg.stacked").bounding_box()
    assert box is not None and box["height"] > 100  # drawn, at its size
    fill = page.locator("svg.stacked rect.kernel").first.evaluate("r => getComputedStyle(r).fill")
    assert fill == "rgb(173, 181, 189)"  # the stylesheet's colour, not the default black
    shot(page.locator("section.time-chart"), "inspector-chart.png", tmp_path)
    bars.nth(1).click()  # a bar leads to its cycle on the timeline
    assert page.url.endswith("#c-2")
    rows = page.locator("section.artifacts tr.artifact")
    assert rows.count() == 14
    rows.nth(1).locator("summary").click()
    assert '"goal": "Add 5 and 10"' in rows.nth(1).locator("pre").inner_text()
    assert page.locator("script").count() == 1  # the echoed <script> stayed text
    assert SCRIPT in page.locator("section.artifacts").inner_text()
    shot(page.locator("section.artifacts"), "inspector-artifacts.png", tmp_path)


@needs_browser
def test_a_replay_steps_through_once_and_continues(page: Any, runs: Runs) -> None:
    """`aeon run --replay cassette.jsonl --inspect`: Step runs one cycle, Continue the rest, from the cassette."""
    command = [sys.executable, "-m", "aeon_cli", "run", REQUEST, "--replay", "cassette.jsonl"]
    with started(
        [*command, "--inspect", "--no-browser", "--json"],
        cwd=runs.project,
        env=environment(runs.project),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as process:
        assert process.stderr is not None
        line = process.stderr.readline()
        found = re.search(r"(http://127\.0\.0\.1:\d+/live\?token=\S+)", line)
        assert found, line
        page.goto(found[1])  # the URL with the session's token: signs in, then shows /live
        page.wait_for_selector('#live[data-mode="paused"][data-cycles="0"]')
        page.locator("#live form.controls button.step").click()
        page.wait_for_selector('#live[data-mode="paused"][data-cycles="1"]')
        assert page.locator("#live .timeline .row .n").all_inner_texts() == ["1"]
        page.locator("#live form.controls button.continue").click()
        page.wait_for_selector('#live[data-mode="finished"]')
        assert page.locator("#live .block.result pre.answer").inner_text() == "The sum is 15"
        out, err = process.communicate(timeout=30)
    assert process.returncode == 0, err
    assert json.loads(out)["answer"] == "The sum is 15"  # the cassette's, not the scripted model's "99"


def test_every_prompt_is_shown_from_the_artifact_store_without_a_cassette(tmp_path: Path) -> None:
    """The CLI's artifact store keeps each model call's request: a run made without ``--record`` shows the exact
    prompt of every call, on its cycle's page and in the JSON."""
    (tmp_path / "aeon.toml").write_text('[llm]\nuse = "scripted"\nresponses = "responses.json"\n')
    (tmp_path / "responses.json").write_text(json.dumps([THREE_STEPS, answer("The sum is 15")]))
    run_id = aeon_run(tmp_path)["run_id"]
    data = tmp_path / "data"
    artifacts = SqliteArtifacts(data / "runs-artifacts.db")
    inspector = Inspector(Catalog([SqliteRuns("store", data / "runs.db")], artifacts))
    try:
        pages = [
            inspector.handle(f"/run/store/{run_id}/cycle/{n}", "fragment=1").body.decode() for n in (1, 2, 4)
        ]
        api = json.loads(inspector.handle(f"/api/run/store/{run_id}/cycle/1").body)
    finally:
        inspector.catalog.close()
    planning, tool_only, answering = pages
    assert f"(from the artifact store {data / 'runs-artifacts.db'})" in planning
    assert f"Request: {html.escape(REQUEST)}\nPlan:</pre>" in planning and "Prompt not kept" not in planning
    assert 'class="prompt"' not in tool_only  # a tool step makes no model call
    assert 'class="prompt"' in answering and "Step 1 [complete]" in answering  # the results so far
    (call,) = api["llm_calls"]
    assert call["prompt"]["prompt"].endswith(f"Request: {REQUEST}\nPlan:") and call["prompt"]["system_prompt"]
    assert call["text"] == json.dumps(THREE_STEPS)


def test_a_multipass_run_shows_its_passes_from_the_artifact_store_and_from_its_log(tmp_path: Path) -> None:
    """Spec 003's events (profile, TTL, assessment, each pass's start and end) are listed on the run's page, each
    at its cycle, whether read from the artifact store (the state store's run) or from the run's JSONL log."""
    profile = {
        "reasoning_depth": 1,
        "information": 9,
        "expected_tool_usage": "minimal",
        "output_breadth": "narrow",
        "confidence_requirement": "low",
        "why": "one sum",
    }
    the_plan = plan(tool_step("1", "calculator", {"expression": "5 + 10"}), llm_step("2", "say the sum"))
    replies = [json.dumps(reply) for reply in (profile, the_plan, {"answer": "15"})]
    (tmp_path / "replies.json").write_text(json.dumps(replies))
    state, log, artifacts = tmp_path / "runs.db", tmp_path / "run.jsonl", tmp_path / "artifacts.db"
    config = parse_config(
        {
            "llm": {"use": "scripted", "responses": str(tmp_path / "replies.json")},
            "reasoning": {"mode": "multipass"},
            "state": {"use": "sqlite", "path": str(state)},
            "artifacts": {"path": str(artifacts)},
            "telemetry": {"use": ["jsonl"], "jsonl": {"path": str(log)}},
        }
    )
    with Engine(config) as engine:
        result = engine.run(REQUEST)
    assert result["status"] == "completed"
    sources = [SqliteRuns("store", state), JsonlRuns("log1", log)]
    inspector = Inspector(Catalog(sources, SqliteArtifacts(artifacts)))
    try:
        pages = [
            inspector.handle(f"/run/{key}/{result['run_id']}").body.decode() for key in ("store", "log1")
        ]
    finally:
        inspector.catalog.close()
    expected = [
        ("1", "0", "pass_start"),
        ("1", "0", "profile"),
        ("1", "0", "ttl"),
        ("2", "0", "pass_end"),
        ("2", "1", "pass_start"),
        ("5", "1", "assessment"),
        ("5", "1", "pass_end"),
    ]
    row = re.compile(
        r'<tr class="pass-event" data-event="(\w+)">\s*<td class="num">(?:<a href="[^"]*">)?(\d+)(?:</a>)?</td>'
        r'\s*<td class="num">(\d+)</td>'
    )
    for page in pages:
        section = page[page.index('<section class="passes"') :]
        section = section[: section.index("</section>")]
        assert [(cycle, number, event) for event, cycle, number in row.findall(section)] == expected
        assert "profile: depth 1, tools minimal, breadth narrow, confidence low" in section
        assert "converged: completeness" in section and "TTL " in section
    assert 'class="passes"' not in inspector_page_of_a_plain_run(tmp_path)


def inspector_page_of_a_plain_run(tmp_path: Path) -> str:
    """A single-pass run's page: no passes section."""
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "replies.json").write_text(json.dumps([json.dumps(THREE_STEPS), answer("15")]))
    artifacts = tmp_path / "plain" / "artifacts.db"
    config = parse_config(
        {
            "llm": {"use": "scripted", "responses": str(tmp_path / "plain" / "replies.json")},
            "state": {"use": "sqlite", "path": str(tmp_path / "plain" / "runs.db")},
            "artifacts": {"path": str(artifacts)},
        }
    )
    with Engine(config) as engine:
        run_id = engine.run(REQUEST)["run_id"]
    inspector = Inspector(
        Catalog([SqliteRuns("store", tmp_path / "plain" / "runs.db")], SqliteArtifacts(artifacts))
    )
    try:
        return inspector.handle(f"/run/store/{run_id}").body.decode()
    finally:
        inspector.catalog.close()


def test_the_artifacts_are_narrowed_to_one_kind(server: InspectorServer, runs: Runs) -> None:
    _, _, page = fetch(server, f"/run/store/{runs.recorded}?kind=model_call")
    section = page[page.index('<section class="artifacts"') :]
    section = section[: section.index("</section>")]
    assert re.findall(r'<tr class="artifact" data-kind="(\w+)">', section) == ["model_call", "model_call"]
    assert "1\N{EN DASH}2 of 2" in section and "<strong>model_call</strong>" in section
    # every kind the run has is a link with its count, in the order first stored, and "all" goes back
    links = re.findall(
        r'<a href="([^"]*)" data-kind="(\w+)">\w+</a> <span class="muted">(\d+)</span>', section
    )
    assert [(kind, count) for _, kind, count in links] == [
        ("plan", "1"),
        ("telemetry", "5"),
        ("tool_result", "2"),
        ("step_output", "3"),
        ("answer", "1"),
    ]
    assert all("kind=" in url and url.endswith("#artifacts") for url, _, _ in links)
    assert f'href="/run/store/{runs.recorded}?page=1#artifacts">all</a>' in section
    _, _, none = fetch(server, f"/run/store/{runs.recorded}?kind=evaluation")
    assert "None of kind <code>evaluation</code>" in none
    _, _, odd = fetch(server, f"/run/store/{runs.recorded}?kind=%3Cscript%3E")  # not a kind: not narrowed
    assert "14 of 14" in odd and "kind=%3C" not in odd


def artifact_rows(page: str) -> list[tuple[str, str, str]]:
    """(kind, node, schema) of each artifact listed on a run page."""
    section = page[page.index('<section class="artifacts"') :]
    section = section[: section.index("</section>")]
    rows = re.findall(r'<tr class="artifact" data-kind="(\w+)">(.*?)</tr>', section, re.DOTALL)
    listed = []
    for kind, cells in rows:
        node = re.search(r"data-node>([^<]*)</a>", cells)
        schema = re.search(r"data-schema>([^<]*)</a>", cells)
        listed.append((kind, node.group(1) if node else "", schema.group(1) if schema else ""))
    return listed


def test_the_artifacts_are_narrowed_to_a_node_or_a_schema(server: InspectorServer, runs: Runs) -> None:
    """As `aeon artifacts --node/--schema` does; each node and schema in the list is a link that narrows to it."""
    _, _, whole = fetch(server, f"/run/store/{runs.recorded}")
    every = artifact_rows(whole)
    schemas = {schema for _, _, schema in every if schema}
    nodes = {node for _, node, _ in every if node}
    assert "tool:calculator" in schemas and nodes
    _, _, by_schema = fetch(server, f"/run/store/{runs.recorded}?schema=tool%3Acalculator")
    assert artifact_rows(by_schema) == [row for row in every if row[2] == "tool:calculator"]
    assert "schema <strong>tool:calculator</strong>" in by_schema and 'data-clear="schema"' in by_schema
    node = sorted(nodes)[0]
    _, _, by_node = fetch(server, f"/run/store/{runs.recorded}?node={node}&kind=step_output")
    assert (
        artifact_rows(by_node) == [row for row in every if row[1] == node and row[0] == "step_output"] != []
    )
    # the links in the list narrow further and keep what is already chosen
    link = re.search(r'<a href="([^"]*)" data-schema>', by_schema)
    assert link is not None and "schema=tool%3Acalculator" in link.group(1)
    node_link = re.search(r'<a href="([^"]*)" data-node>', by_schema)
    assert node_link is not None and "schema=tool%3Acalculator" in node_link.group(1)
    assert "node=" in node_link.group(1)
    _, _, none = fetch(server, f"/run/store/{runs.recorded}?node=%3Cscript%3Ex")
    assert "None at node <code>&lt;script&gt;x</code> for this run." in none and "<script>x" not in none


@pytest.mark.parametrize(
    ("narrowed", "total"),
    [
        (Narrowed(), 4),
        (Narrowed(kind="tool_result"), 2),
        (Narrowed(node="2"), 1),
        (Narrowed(node="1"), 2),
        (Narrowed(schema="tool:echo"), 1),
        (Narrowed(kind="tool_result", node="1", schema="tool:calculator"), 1),
        (Narrowed(node="nowhere"), 0),
    ],
)
def test_the_sqlite_reader_and_the_contract_reader_narrow_alike(
    tmp_path: Path, narrowed: Narrowed, total: int
) -> None:
    """The page reads the `sqlite` store's file with its own SQL, any other store through `find`: same rows."""
    store = SQLiteArtifactStore(tmp_path / "a.db")
    store.put(
        [
            Artifact(run_id="r", kind="plan", cycle=1, value={"steps": 2}),
            Artifact(
                run_id="r", kind="tool_result", node="1", schema_name="tool:calculator", cycle=2, value=5
            ),
            Artifact(run_id="r", kind="step_output", node="1", cycle=2, value=5),
            Artifact(run_id="r", kind="tool_result", node="2", schema_name="tool:echo", cycle=3, value="hi"),
            Artifact(run_id="other", kind="tool_result", node="1", schema_name="tool:calculator", value=9),
        ]
    )
    by_sql, by_contract = SqliteArtifacts(tmp_path / "a.db"), StoredArtifacts(store, "store")
    try:
        pages = [reader.page("r", 0, 10, narrowed) for reader in (by_sql, by_contract)]
    finally:
        by_sql.close()
        store.close()
    assert pages[0] == pages[1]
    assert pages[0].total == total == len(pages[0].rows)
    assert pages[0].kinds == [("plan", 1), ("tool_result", 2), ("step_output", 1)]


def test_a_blocked_multipass_step_shows_as_invalid_with_why(tmp_path: Path) -> None:
    """A multi-pass run stopped by its TTL at a blocked step (spec 003's ``invalid``): the run page marks the step
    as a failure is marked, with why it is blocked."""
    profile = {"reasoning_depth": 1, "information": 1, "expected_tool_usage": "minimal"}
    profile |= {"output_breadth": "narrow", "confidence_requirement": "medium", "why": "one division"}
    script = [profile, plan(tool_step("1", "calculator", {"expression": "1 / 0"}), llm_step("2"))]
    state = tmp_path / "runs.db"
    config = parse_config(
        {
            "llm": {"use": "scripted", "responses": script},
            "state": {"use": "sqlite", "path": str(state)},
            "reasoning": {"mode": "multipass"},
        }
    )
    with Engine(config) as engine:
        result = engine.run("divide 1 by 0", ttl=3)  # profile, plan, step 1
    assert result["status"] == "ttl_expired" and result["plan"]["steps"][0]["status"] == "invalid"
    inspector = Inspector(Catalog([SqliteRuns("store", state)]))
    body = inspector.handle(f"/run/store/{result['run_id']}").body.decode()
    inspector.catalog.close()
    assert '<span class="badge s-bad">invalid</span>' in body
    assert "calculator failed: division by zero" in body
