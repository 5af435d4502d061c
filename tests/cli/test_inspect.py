"""``aeon inspect``: the local web app that shows recorded runs (issue 15).

The runs are real: recorded by engines on the scripted model into a SQLite state store and JSONL logs, a flow
replayed from its cassette, a 10,000-cycle run written into the store's tables, and a log holding a registered
secret raw; the flow graph's task marks are checked on flows of their own, in a store and a log apart (a split
whose subtasks merge or share an exit, the same stopped before its merge, examples/flows/review-sentiment's
clones). The server runs in this process on a free loopback port. The HTTP tests read every page and endpoint;
the browser tests drive Debian's Chromium through Playwright (skipped, saying why, where either is missing —
``scripts/setup.sh --dev`` installs both; ``.ci/run`` requires them) and check that no request leaves the server,
no dialog opens and no script error happens in any of them.

``AEON_INSPECTOR_SCREENSHOTS=1`` also saves the screenshots into docs/img/ (docs/inspector.md shows them).
"""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml

from aeon_cli.inspect.app import Inspector
from aeon_cli.inspect.flowgraph import flow_graph
from aeon_cli.inspect.server import InspectorServer, serving
from aeon_cli.inspect.sources import Catalog, JsonlRuns, SqliteRuns, StoreRuns
from aeon_kernel import Engine
from aeon_kernel.config import AeonConfig
from aeon_kernel.secrets import register_secret
from aeon_plugins.sqlite_state import SqliteStateStore
from tests.support.browser import needs_browser
from tests.support.inspector_runs import (
    SCRIPT,
    TRIAGE_NODES,
    build_big_run,
    record_flow,
    record_plain,
    write_secret_log,
)
from tests.support.servers import started

ROOT = Path(__file__).resolve().parents[2]
#: registered as a secret before anything is recorded; written raw into one log
CANARY = "cnry-7d41f0c9e2-q8zx"
BIG = 10_000
REVIEW_SENTIMENT = ROOT / "examples" / "flows" / "review-sentiment"
REVIEW_CASSETTE = ROOT / "tests" / "cassettes" / "flows" / "review-sentiment.jsonl"
#: the review its cassette answers
BROKEN_REVIEW = "It broke after two days and support never answered."
#: a split whose first two subtasks merge at ``join`` while the third goes on by itself to the exit the merged task
#: reaches too: the exit is run by two tasks (stacked)
FAN = {
    "name": "fan",
    "start": "in",
    "nodes": [
        {"id": "in", "role": "start"},
        {"id": "fan", "role": "split"},
        *(
            {"id": n, "role": "linear", "impl": "assign", "options": {"values": {n: True}}}
            for n in ("a", "b", "c", "c2")
        ),
        {"id": "join", "role": "merge", "impl": "collect"},
        {"id": "done", "role": "exit"},
    ],
    "edges": [
        ["in", "fan"],
        ["fan", "a"],
        ["fan", "b"],
        ["fan", "c"],
        ["a", "join"],
        ["b", "join"],
        ["c", "c2"],
        ["c2", "done"],
        ["join", "done"],
    ],
}


@dataclass(frozen=True)
class Recorded:
    state: Path
    log: Path
    flow_log: Path
    secret_log: Path
    cassette: Path
    #: recorded with a cassette; answers "15"
    plain: str
    #: the same request, answered "The sum is 15"
    other: str
    flow: str
    big: str
    secret: str

    def catalog(self) -> Catalog:
        return Catalog(
            [
                SqliteRuns("store", self.state),
                JsonlRuns("log1", self.log),
                JsonlRuns("log2", self.flow_log),
                JsonlRuns("log3", self.secret_log),
            ]
        )


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Recorded:
    register_secret(CANARY)
    directory = tmp_path_factory.mktemp("inspect")
    state, log, flow_log = directory / "runs.db", directory / "runs.jsonl", directory / "flow.jsonl"
    cassette = directory / "cassette.jsonl"
    plain = record_plain(directory, state, log, record=cassette)
    other = record_plain(directory, state, log, answer="The sum is 15", name="other")
    flow = record_flow(state, flow_log)
    big = build_big_run(state, BIG)
    secret = write_secret_log(directory / "secret.jsonl", CANARY)
    return Recorded(
        state, log, flow_log, directory / "secret.jsonl", cassette, plain, other, flow, big, secret
    )


@pytest.fixture(scope="module")
def server(recorded: Recorded) -> Iterator[InspectorServer]:
    catalog = recorded.catalog()
    with serving(catalog) as running:
        yield running
    catalog.close()


@dataclass(frozen=True)
class FlowTasks:
    state: Path
    log: Path
    #: FAN run to its end
    fanned: str
    #: FAN stopped by its TTL after the first subtask arrived at ``join``
    stopped: str
    #: examples/flows/review-sentiment replayed from its cassette: a branch's two clones merge at ``votes``
    cloned: str

    def catalog(self, log: Path | None = None) -> Catalog:
        return Catalog([SqliteRuns("store", self.state), JsonlRuns("log", log or self.log)])


@pytest.fixture(scope="module")
def flow_tasks(tmp_path_factory: pytest.TempPathFactory) -> FlowTasks:
    directory = tmp_path_factory.mktemp("flow-tasks")
    (directory / "fan").mkdir()
    (directory / "fan" / "flow.yaml").write_text(yaml.safe_dump(FAN, sort_keys=False), encoding="utf-8")
    state, log = directory / "tasks.db", directory / "tasks.jsonl"
    config = AeonConfig().with_choice("state", "sqlite", path=str(state))
    ids = []
    for where, value, ttl, options in (
        (directory / "fan", {"n": 1}, None, {}),
        (directory / "fan", {"n": 2}, 3, {}),  # in, fan, a: t1.1 waits at join for t1.2
        (REVIEW_SENTIMENT, {"review": BROKEN_REVIEW}, None, {"replay": str(REVIEW_CASSETTE)}),
    ):
        with Engine.from_config_dir(where, config, **options) as flow:
            flow.engine.add_sink("jsonl", path=str(log))
            result = flow.run(value, ttl=ttl)
        assert result.status == ("failure" if ttl else "success"), result.message
        ids.append(str(result.run.run_id))
    return FlowTasks(state, log, *ids)


def fetch(
    server: InspectorServer, path: str, method: str = "GET", host: str | None = None
) -> tuple[int, dict[str, str], str]:
    """A request as the signed-in browser makes it (the session's cookie; test_local_servers.py: without it)."""
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    try:
        headers = {"Host": host or f"127.0.0.1:{server.port}", "Cookie": server.gate.cookie_header}
        connection.request(method, path, headers=headers)
        response = connection.getresponse()
        return response.status, dict(response.getheaders()), response.read().decode("utf-8")
    finally:
        connection.close()


def leaked(text: str) -> list[str]:
    """Pieces of the canary (8 characters or more, what the scrubber hides) that appear in ``text``."""
    return [CANARY[i : i + 8] for i in range(len(CANARY) - 7) if CANARY[i : i + 8] in text]


def small_runs(recorded: Recorded) -> list[tuple[str, str, int]]:
    """(source, run id, cycles) of every run but the big one."""
    return [
        ("store", recorded.plain, 4),
        ("store", recorded.other, 4),
        ("store", recorded.flow, 7),
        ("log1", recorded.plain, 4),
        ("log1", recorded.other, 4),
        ("log2", recorded.flow, 7),
        ("log3", recorded.secret, 2),
    ]


# --- over HTTP ------------------------------------------------------------------------------------------------


def test_every_page_and_endpoint_answers_without_the_canary(
    server: InspectorServer, recorded: Recorded
) -> None:
    """Every page, fragment and JSON endpoint of every run; the secret a log holds raw is shown as ***."""
    paths = ["/", "/api/runs", f"/diff?a=store/{recorded.plain}&b=log1/{recorded.other}"]
    for key, run_id, cycles in small_runs(recorded):
        paths += [f"/run/{key}/{run_id}", f"/api/run/{key}/{run_id}"]
        for number in range(1, cycles + 1):
            base = f"/run/{key}/{run_id}/cycle/{number}"
            paths += [base, f"{base}?fragment=1", f"/api{base}"]
    seen = {}
    for path in paths:
        status, _, body = fetch(server, path)
        assert status == 200, (path, body[:500])
        assert not leaked(body), (path, leaked(body))
        seen[path] = body
    scrubbed = seen[f"/run/log3/{recorded.secret}/cycle/2?fragment=1"]
    assert "***" in scrubbed  # the secret was there, scrubbed
    assert 'class="block error"' in scrubbed and "401 for key ***" in scrubbed  # a tool's error, shown
    assert "***" in seen[f"/api/run/log3/{recorded.secret}/cycle/2"]
    listed = json.loads(seen["/api/runs"])["runs"]
    assert {(run["source"], run["run_id"]) for run in listed} >= {(k, r) for k, r, _ in small_runs(recorded)}


def test_model_and_tool_text_is_escaped(server: InspectorServer, recorded: Recorded) -> None:
    """The echo step's result is ``<script>alert(document.domain)</script>``: every page shows it as text."""
    for key in ("store", "log1"):
        _, _, fragment = fetch(server, f"/run/{key}/{recorded.plain}/cycle/3?fragment=1")
        assert "&lt;script&gt;alert(document.domain)&lt;/script&gt;" in fragment
        assert "<script" not in fragment
        for path in (f"/run/{key}/{recorded.plain}", f"/run/{key}/{recorded.plain}/cycle/3"):
            _, _, page = fetch(server, path)
            assert page.count("<script") == 1 and '<script src="/static/inspector.js" defer></script>' in page
    _, _, diff = fetch(server, f"/diff?a=store/{recorded.plain}&b=store/{recorded.other}")
    assert diff.count("<script") == 1 and "&lt;script&gt;" in diff


def test_the_server_is_read_only_and_answers_its_own_host_only(
    server: InspectorServer, recorded: Recorded
) -> None:
    before = hashlib.sha256(recorded.state.read_bytes()).hexdigest()
    for method in ("POST", "PUT", "PATCH", "DELETE"):
        status, headers, _ = fetch(server, f"/run/store/{recorded.plain}", method)
        assert status == 405 and headers["Allow"] == "GET, HEAD"
    assert fetch(server, "/", host="evil.example:80")[0] == 403  # DNS rebinding
    assert fetch(server, "/", host=f"localhost:{server.port}")[0] == 200
    status, headers, _ = fetch(server, f"/run/store/{recorded.plain}")
    assert status == 200 and "script-src 'self'" in headers["Content-Security-Policy"]
    assert "default-src 'none'" in headers["Content-Security-Policy"]
    assert fetch(server, "/run/store/no-such-run")[0] == 404
    assert fetch(server, f"/run/store/{recorded.plain}/cycle/99")[0] == 404
    assert fetch(server, "/static/../../etc/passwd")[0] == 404
    assert json.loads(fetch(server, "/api/run/store/nope")[2])["error"]
    assert hashlib.sha256(recorded.state.read_bytes()).hexdigest() == before


def test_the_plan_of_each_cycle_is_the_same_from_the_store_and_from_the_log(recorded: Recorded) -> None:
    catalog = recorded.catalog()
    stored, logged = catalog.run("store", recorded.plain), catalog.run("log1", recorded.plain)
    statuses = []
    for index in range(4):
        plans = [source.plans.after(index) for source in (stored, logged)]
        assert plans[0] is not None and plans[1] is not None
        found = [[step["status"] for step in plan["steps"]] for plan in plans]
        assert found[0] == found[1]
        statuses.append(found[0])
    assert statuses == [
        ["pending"] * 3,
        ["complete", "pending", "pending"],
        ["complete", "complete", "pending"],
        ["complete"] * 3,
    ]
    assert stored.final_plan() == stored.plans.after(3)
    assert [len(calls) for calls in stored.calls] == [1, 0, 0, 1]
    catalog.close()


def test_any_state_store_is_read_through_its_contract_as_the_sqlite_file_is(recorded: Recorded) -> None:
    """StoreRuns (``list_runs``, ``load``: any store) and SqliteRuns (the file, read-only) give the same run."""
    store = SqliteStateStore(recorded.state)
    engine = SimpleNamespace(state_store=store, close=store.close)
    contract, direct = (
        StoreRuns("store", engine, "the sqlite state store"),
        SqliteRuns("store", recorded.state),
    )
    assert {run.run_id for run in contract.runs()} == {run.run_id for run in direct.runs()}
    for run_id in (recorded.plain, recorded.flow):
        ours, theirs = contract.run(run_id), direct.run(run_id)
        assert ours.calls == theirs.calls and ours.info.llm_calls == theirs.info.llm_calls
        assert [e["step_number"] for e in ours.entries] == [e["step_number"] for e in theirs.entries]
        assert [ours.plans.after(i) == theirs.plans.after(i) for i in range(len(ours.entries))] == [
            True
        ] * len(ours.entries)
        assert ours.is_flow == theirs.is_flow == (run_id == recorded.flow)
    contract.close()
    direct.close()


def test_a_prompt_is_shown_where_the_run_kept_its_cassette(
    server: InspectorServer, recorded: Recorded
) -> None:
    _, _, first = fetch(server, f"/run/store/{recorded.plain}/cycle/1?fragment=1")
    assert 'class="prompt"' in first and "add 5 and 10" in first and str(recorded.cassette) in first
    _, _, other = fetch(server, f"/run/store/{recorded.other}/cycle/1?fragment=1")
    assert 'class="prompt"' not in other and "Prompt not kept" in other


def test_a_flow_graph_has_every_node_with_its_status(recorded: Recorded) -> None:
    catalog = recorded.catalog()
    for key in ("store", "log2"):
        graph = flow_graph(catalog.run(key, recorded.flow))
        statuses = {node.id: node.status for node in graph.nodes}
        assert set(statuses) == set(TRIAGE_NODES) and graph.note is None
        assert {node for node, status in statuses.items() if status == "success"} == {
            "intake",
            "classify",
            "billing",
            "facts",
            "acknowledge",
            "join",
            "billing_done",
        }
        assert {statuses[node] for node in ("fix", "fix_reply", "fix_done")} == {"not-reached"}
        assert len({(node.x, node.y) for node in graph.nodes}) == len(graph.nodes)  # no two boxes on one spot
        tallies = {node.id: node.tally for node in graph.nodes}
        assert tallies["billing"].spawned == ("t1.1", "t1.2") and tallies["billing"].lineage == "subtask"
        assert tallies["billing"].marks == [("spawn", "→ 2 subtasks")]
        assert (tallies["facts"].ran, tallies["acknowledge"].ran) == (("t1.1",), ("t1.2",))
        assert (tallies["join"].merged, tallies["join"].owners) == (("t1.1", "t1.2"), ("t1",))
        assert tallies["join"].marks == [("merged", "merged 2 inputs")] and not tallies["join"].parked
        assert all(t.stack == 0 for t in tallies.values())  # every node ran by one task
        assert {n for n, t in tallies.items() if t.marks} == {"billing", "join"}
        assert not any(tallies[node].ran for node in ("fix", "fix_reply", "fix_done"))
    data = catalog.run("store", recorded.flow)
    recorded_flow = data.manifest["flow"]
    data.manifest["flow"] = {**recorded_flow, "hashes": {"flow.yaml": "0" * 64}}
    changed = flow_graph(data)
    assert changed.note and "changed since this run" in changed.note and len(changed.nodes) == 10
    data.manifest["flow"] = {**recorded_flow, "directory": str(ROOT / "no-such-flow")}
    gone = flow_graph(data)  # drawn from the stages the run recorded: the nodes it reached
    assert gone.note and "cannot be loaded" in gone.note
    assert {node.id for node in gone.nodes} == {n for n in TRIAGE_NODES if not n.startswith("fix")}
    assert {(edge.source, edge.target) for edge in gone.edges} >= {
        ("classify", "billing"),
        ("join", "billing_done"),
    }
    data.manifest["flow"] = recorded_flow
    catalog.close()


def test_a_flow_graph_marks_subtasks_clones_stacked_nodes_and_merges(flow_tasks: FlowTasks) -> None:
    """Each node's tasks, from the stages' routing events: what a fork spawned, a node several tasks ran (stacked),
    what a merge merged — or waits for, when the run stopped before it — with the task ids in the tooltip."""
    catalog = flow_tasks.catalog()
    for key in ("store", "log"):
        fanned = {node.id: node for node in flow_graph(catalog.run(key, flow_tasks.fanned)).nodes}
        assert fanned["fan"].tally.spawned == ("t1.1", "t1.2", "t1.3")
        assert fanned["fan"].tally.marks == [("spawn", "→ 3 subtasks")]
        assert [fanned[n].tally.ran for n in ("a", "b", "c", "c2")] == [
            ("t1.1",),
            ("t1.2",),
            ("t1.3",),
            ("t1.3",),
        ]
        assert all(
            not fanned[n].tally.marks and fanned[n].tally.stack == 0 for n in ("in", "a", "b", "c", "c2")
        )
        done = fanned["done"]
        assert (done.tally.ran, done.runs, done.tally.stack) == (("t1.3", "t1"), 2, 1)
        assert done.tally.marks == [("tasks", "2 tasks")] and done.status == "success"
        join = fanned["join"].tally
        assert (join.merges, join.merged, join.owners, join.parked) == (1, ("t1.1", "t1.2"), ("t1",), ())
        assert join.marks == [("merged", "merged 2 inputs")]
        assert join.details == ["ran by t1", "merged t1.1, t1.2 into t1"]
        stopped = {node.id: node for node in flow_graph(catalog.run(key, flow_tasks.stopped)).nodes}
        waiting = stopped["join"]
        assert (waiting.status, waiting.tally.parked, waiting.tally.merges) == ("not-reached", ("t1.1",), 0)
        assert waiting.tally.marks == [("waiting", "waiting 1/2")]  # t1.3 goes to the exit, not to join
        assert waiting.tally.details == ["waiting: t1.1 arrived, 2 expected"]
        assert stopped["fan"].tally.marks == [("spawn", "→ 3 subtasks")] and not stopped["done"].tally.ran
        cloned = {node.id: node.tally for node in flow_graph(catalog.run(key, flow_tasks.cloned)).nodes}
        assert cloned["approaches"].marks == [("spawn", "→ 2 clones")]
        assert cloned["approaches"].details[1] == "spawned 2 clones: t1.1, t1.2"
        assert cloned["votes"].marks == [("merged", "merged 2 inputs")]
        assert cloned["verdict"].ran == ("t1",)
    inspector = Inspector(catalog)
    page = inspector.handle(f"/run/store/{flow_tasks.fanned}").body.decode()
    assert '<tspan class="spawn">→ 3 subtasks</tspan>' in page
    assert '<tspan class="merged">merged 2 inputs</tspan>' in page
    assert '<tspan class="tasks">2 tasks</tspan>' in page
    stacked = re.findall(r'<g class="node ([^"]*)" data-node="(\w+)"', page)
    assert [node for classes, node in stacked if "stacked" in classes.split()] == ["done"]
    assert page.count('<rect class="stack"') == 1
    assert "exit · success · ran 2 times\nran by t1.3, t1</title>" in page  # the tooltip lists the tasks
    assert "spawned 3 subtasks: t1.1, t1.2, t1.3</title>" in page
    assert " style=" not in page  # the CSP allows no inline style: the stylesheet draws the marks
    stopped_page = inspector.handle(f"/run/store/{flow_tasks.stopped}").body.decode()
    assert '<tspan class="waiting">waiting 1/2</tspan>' in stopped_page
    assert 'class="node s-idle role-merge waiting" data-node="join"' in stopped_page
    catalog.close()


def test_a_flow_graph_s_task_ids_are_escaped(flow_tasks: FlowTasks, tmp_path: Path) -> None:
    """Task ids come from the record: a log whose ids hold markup shows them as text."""
    hostile = 't1.3<img src=x onerror="alert(1)">'
    log = tmp_path / "hostile.jsonl"
    log.write_text(flow_tasks.log.read_text(encoding="utf-8").replace('"t1.3"', json.dumps(hostile)))
    catalog = flow_tasks.catalog(log)
    graph = flow_graph(catalog.run("log", flow_tasks.fanned))
    assert next(node for node in graph.nodes if node.id == "done").tally.ran == (hostile, "t1")
    page = Inspector(catalog).handle(f"/run/log/{flow_tasks.fanned}").body.decode()
    assert "ran by t1.3&lt;img src=x onerror=&#34;alert(1)&#34;&gt;, t1" in page
    assert "<img" not in page
    catalog.close()


def test_an_empty_store_says_how_to_record_a_run(tmp_path: Path) -> None:
    inspector = Inspector(Catalog([SqliteRuns("store", tmp_path / "runs.db")]))
    answer = inspector.handle("/")
    assert answer.status == 200 and b"No runs recorded yet" in answer.body
    assert not (tmp_path / "runs.db").exists()  # reading never creates the store


def test_the_diff_marks_the_cycle_that_differs(server: InspectorServer, recorded: Recorded) -> None:
    _, _, page = fetch(server, f"/diff?a=store/{recorded.plain}&b=store/{recorded.other}")
    rows = dict(re.findall(r'<tr id="d-(\d+)" class="([\w-]+)"', page))
    assert rows == {"1": "same-row", "2": "same-row", "3": "same-row", "4": "differs"}
    assert '<span class="changed">The sum is </span>' in page
    assert "1 of 4 cycles differ" in page
    assert fetch(server, "/diff?a=store/" + recorded.plain)[0] == 404  # two runs, or a page saying so


def test_a_10000_cycle_run_is_paginated(server: InspectorServer, recorded: Recorded) -> None:
    began = time.perf_counter()
    status, _, first = fetch(server, f"/run/store/{recorded.big}")
    took = time.perf_counter() - began
    assert status == 200 and first.count('<details class="cycle"') == 200
    assert "page 1 of 50" in first and 'id="c-200"' in first and 'id="c-201"' not in first
    _, _, last = fetch(server, f"/run/store/{recorded.big}?page=999")  # past the end: the last page
    assert "page 50 of 50" in last and 'id="c-9801"' in last and 'id="c-10000"' in last
    _, _, cycle = fetch(server, f"/run/store/{recorded.big}/cycle/{BIG}?fragment=1")
    assert "9999 steps" in cycle and "&#34;value&#34;: 10000" in cycle
    data = json.loads(fetch(server, f"/api/run/store/{recorded.big}?page=2")[2])
    assert [row["number"] for row in data["cycles"]] == list(range(201, 401)) and data["pages"] == 50
    print(f"\n10,000-cycle run, first page over HTTP (read, cached and rendered): {took * 1000:.0f} ms")


# --- the command ----------------------------------------------------------------------------------------------


def test_import_of_the_cli_stays_light() -> None:
    code = (
        "import sys, aeon_cli.main; "
        "print([m for m in ('aeon_cli.inspect.app', 'aeon_cli.inspect.server') if m in sys.modules])"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_the_command_serves_on_loopback_prints_the_url_and_scrubs_config_secrets(
    tmp_path: Path, recorded: Recorded
) -> None:
    """`aeon inspect --no-browser`: the store named by --config and a log, on 127.0.0.1, at the URL with the
    session's token it prints; a secret aeon.toml references ($env) is hidden from every page even where the log
    kept it raw; Ctrl-C ends it with status 0 (and the process is stopped for sure if the test fails)."""
    secret = "cfgk-91c3be5a-w7vd"
    write_secret_log(tmp_path / "kept.jsonl", secret, run_id="kept")
    (tmp_path / "aeon.toml").write_text(
        f'[state]\nuse = "sqlite"\npath = "{recorded.state}"\n'
        '[llm]\nuse = "openai"\nbase_url = "http://127.0.0.1:9"\napi_key = { "$env" = "INSPECT_KEY" }\n',
        encoding="utf-8",
    )
    env = {**os.environ, "INSPECT_KEY": secret}
    command = [sys.executable, "-m", "aeon_cli", "inspect", "--no-browser", "--config", "aeon.toml"]
    with started(
        [*command, "kept.jsonl"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as process:
        assert process.stdout is not None
        line = process.stdout.readline()
        found = re.search(r"http://127\.0\.0\.1:(\d+)/\?token=([A-Za-z0-9_-]{43})\s", line)
        assert found, line
        port, cookie = int(found[1]), f"aeon-inspect-{found[1]}={found[2]}"
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        for path in ("/", "/run/log1/kept/cycle/2", "/api/run/log1/kept/cycle/2"):
            connection.request("GET", path, headers={"Cookie": cookie})
            response = connection.getresponse()
            body = response.read().decode()
            assert response.status == 200 and secret not in body and secret[:8] not in body, path
        connection.request("GET", "/", headers={"Cookie": cookie})
        assert recorded.plain in connection.getresponse().read().decode()
        connection.close()
        process.send_signal(signal.SIGINT)
        _, errors = process.communicate(timeout=30)
    assert process.returncode == 0, errors


def test_the_command_s_setup_errors_exit_2(tmp_path: Path) -> None:
    """A configuration that cannot be read, a port that is taken: status 2 and a message, no traceback."""
    (tmp_path / "bad.toml").write_text("[state\n", encoding="utf-8")
    (tmp_path / "good.toml").write_text(f'[state]\nuse = "sqlite"\npath = "{tmp_path / "runs.db"}"\n')
    command = [sys.executable, "-m", "aeon_cli", "inspect", "--no-browser", "--config"]
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        for args, message in ((["bad.toml"], "Error:"), (["good.toml", "--port", port], "cannot serve on")):
            done = subprocess.run([*command, *args], cwd=tmp_path, capture_output=True, text=True, timeout=60)
            assert done.returncode == 2 and message in done.stderr, done.stderr
            assert "Traceback" not in done.stderr


# --- in Chromium ----------------------------------------------------------------------------------------------


@dataclass
class Browsing:
    """A page and everything it did: the URLs it requested, the dialogs it opened, the errors it threw."""

    page: Any
    #: the servers the page may ask (the test's own)
    origins: list[str]
    requests: list[str]
    dialogs: list[str]
    errors: list[str]


@pytest.fixture
def browsing(browser: Any, server: InspectorServer) -> Iterator[Browsing]:
    context = browser.new_context(viewport={"width": 1360, "height": 900})
    page = context.new_page()
    seen = Browsing(page, [server.url], [], [], [])
    page.on("request", lambda request: seen.requests.append(request.url))
    page.on("dialog", lambda dialog: (seen.dialogs.append(dialog.message), dialog.dismiss()))
    page.on("pageerror", lambda error: seen.errors.append(str(error)))
    page.goto(server.login())  # the URL `aeon inspect` prints: it sets the session's cookie, then shows /
    assert page.url == server.url
    yield seen
    context.close()
    elsewhere = [url for url in seen.requests if not url.startswith(tuple(seen.origins))]
    assert seen.requests and not elsewhere, f"requests that left {seen.origins}: {elsewhere}"
    assert not seen.dialogs and not seen.errors, (seen.dialogs, seen.errors)


def shot(
    page: Any,
    name: str,
    tmp_path: Path,
    *,
    full: bool = False,
    upto: str | None = None,
    element: str | None = None,
) -> None:
    """The viewport; ``full``: the whole page; ``upto``: the page from its top to the end of that element;
    ``element``: that element alone (the last two keep the picture small)."""
    if element is not None:
        page.locator(element).screenshot(path=str(tmp_path / name))
    elif upto is None:
        page.screenshot(path=str(tmp_path / name), full_page=full)
    else:
        box = page.locator(upto).bounding_box()
        width = page.viewport_size["width"]
        clip = {"x": 0, "y": 0, "width": width, "height": box["y"] + box["height"] + 12}
        page.screenshot(path=str(tmp_path / name), full_page=True, clip=clip)
    if os.environ.get("AEON_INSPECTOR_SCREENSHOTS"):
        (ROOT / "docs" / "img").mkdir(exist_ok=True)
        shutil.copy(tmp_path / name, ROOT / "docs" / "img" / name)


@needs_browser
def test_the_list_shows_every_run(browsing: Browsing, server: InspectorServer, tmp_path: Path) -> None:
    page = browsing.page
    page.goto(server.url)
    assert page.locator("table.runs tbody tr").count() == 8
    text = page.locator("table.runs").inner_text()
    for run_id in ("big0000run00", "canary000run"):
        assert run_id in text
    assert page.locator("form.compare button").is_disabled()
    shot(page, "inspector-runs.png", tmp_path, full=True)


@needs_browser
def test_a_run_shows_every_cycle_its_model_output_and_tool_call(
    browsing: Browsing, server: InspectorServer, recorded: Recorded, tmp_path: Path
) -> None:
    page = browsing.page
    page.goto(server.url)
    page.locator(f'a.run-link[href="/run/store/{recorded.plain}"]').click()
    cycles = page.locator(".timeline details.cycle")
    assert cycles.count() == 4
    assert page.locator(".timeline .row .n").all_inner_texts() == ["1", "2", "3", "4"]
    page.locator("#c-2 > summary").click()  # the calculator's cycle
    tool = page.locator("#c-2 .tool")
    assert "calculator" in tool.locator(".head").inner_text()
    assert '"value": 15' in tool.locator(".block.result pre").inner_text()
    page.locator("#c-4 > summary").click()  # the model's answer, repaired
    assert page.locator("#c-4 .call .block.output pre").inner_text() == '{"answer": "15",}'
    assert "json_repair" in page.locator("#c-4 .repair").inner_text()
    assert page.locator("#c-4 table.plan .badge").all_inner_texts() == ["complete"] * 3
    page.locator('a.step-link:text-is("2")').click()  # a plan step opens its cycle: the echo of a <script>
    result = page.locator("#c-3 .tool .block.result pre")
    result.wait_for()
    assert SCRIPT in result.inner_text() and result.is_visible()
    assert page.locator("script").count() == 1  # inspector.js alone: the tool's text stayed text
    assert "#c-3" in page.url
    page.locator("#c-1 > summary").click()
    page.locator("#c-1 details.prompt > summary").click()
    assert "add 5 and 10" in page.locator("#c-1 details.prompt pre").last.inner_text()
    page.locator("#c-1 > summary").click()
    page.locator("#c-3 > summary").click()
    page.locator("#c-4").scroll_into_view_if_needed()
    page.evaluate("window.scrollTo(0, 0)")
    shot(page, "inspector-run.png", tmp_path, full=True)


@needs_browser
def test_a_flow_run_shows_every_node_of_its_graph(
    browsing: Browsing, server: InspectorServer, recorded: Recorded, tmp_path: Path
) -> None:
    page = browsing.page
    page.goto(f"{server.url}run/store/{recorded.flow}")
    nodes = page.locator("svg.dag g.node")
    assert nodes.count() == len(TRIAGE_NODES)
    statuses = {
        nodes.nth(i).get_attribute("data-node"): nodes.nth(i).get_attribute("data-status") for i in range(10)
    }
    assert set(statuses) == set(TRIAGE_NODES)
    assert statuses["billing_done"] == "success" and statuses["fix_done"] == "not-reached"
    assert page.locator("svg.dag text.node-id").all_text_contents() == list(TRIAGE_NODES)
    marks = page.locator("svg.dag text.node-marks")
    assert marks.all_text_contents() == ["→ 2 subtasks", "merged 2 inputs"]
    assert all(marks.nth(i).is_visible() for i in range(2))
    billing = page.locator('svg.dag g.node[data-node="billing"]')
    assert billing.locator("text.node-marks").text_content() == "→ 2 subtasks"
    assert "spawned 2 subtasks: t1.1, t1.2" in billing.locator("title").text_content()
    merged = page.locator('svg.dag g.node[data-node="join"] tspan.merged')
    assert merged.evaluate("t => getComputedStyle(t).fill") == "rgb(59, 91, 219)"  # the stylesheet's accent
    assert page.locator(".timeline details.cycle").count() == 7
    page.locator('svg.dag g.node[data-node="classify"] a').click()  # the node opens its stage
    stage = page.locator("#c-2 .stage")
    stage.wait_for()
    assert "t1/classify" in stage.locator("h3").inner_text()
    assert '"team": "billing"' in page.locator("#c-2 .call .block.output pre").inner_text()
    page.evaluate("window.scrollTo(0, 0)")
    shot(page, "inspector-flow.png", tmp_path, upto="section.graph")


@needs_browser
def test_a_flow_graph_shows_stacked_nodes_and_merges_in_the_browser(
    browsing: Browsing, flow_tasks: FlowTasks, tmp_path: Path
) -> None:
    page = browsing.page
    catalog = flow_tasks.catalog()
    with serving(catalog) as running:
        browsing.origins.append(running.url)
        page.goto(running.login(f"/run/store/{flow_tasks.fanned}"))
        done = page.locator('svg.dag g.node[data-node="done"]')
        shadow, box = done.locator("rect.stack"), done.locator("rect:not(.stack)")
        assert shadow.count() == 1 and shadow.is_visible()
        assert done.locator("rect").first.get_attribute("class") == "stack"  # drawn first: behind the node
        front, back = box.bounding_box(), shadow.bounding_box()
        assert front is not None and back is not None
        assert (back["x"] - front["x"], back["y"] - front["y"]) == pytest.approx((4, 4), abs=0.5)  # a stack
        assert (
            done.locator("tspan.tasks").text_content() == "2 tasks"
            and done.locator("tspan.tasks").is_visible()
        )
        assert done.locator("title").text_content().endswith("ran by t1.3, t1")
        assert page.locator('svg.dag g.node[data-node="fan"] tspan.spawn').text_content() == "→ 3 subtasks"
        assert page.locator('svg.dag g.node[data-node="join"] tspan.merged').is_visible()
        shot(page, "inspector-flow-tasks.png", tmp_path, element="section.graph svg.dag")
        page.goto(f"{running.url}run/store/{flow_tasks.stopped}")
        waiting = page.locator('svg.dag g.node[data-node="join"] tspan.waiting')
        assert waiting.text_content() == "waiting 1/2" and waiting.is_visible()
        assert waiting.evaluate("t => getComputedStyle(t).fill") == "rgb(179, 92, 0)"  # the stylesheet's warn
        page.goto(f"{running.url}run/store/{flow_tasks.cloned}")
        clones = page.locator('svg.dag g.node[data-node="approaches"] tspan.spawn')
        assert clones.text_content() == "→ 2 clones" and clones.is_visible()
    catalog.close()


@needs_browser
def test_the_diff_page_shows_where_two_runs_differ(
    browsing: Browsing, server: InspectorServer, recorded: Recorded, tmp_path: Path
) -> None:
    page = browsing.page
    page.goto(server.url)
    page.locator(f'input[value="store/{recorded.plain}"]').check()
    assert page.locator("form.compare button").is_disabled()
    page.locator(f'input[value="store/{recorded.other}"]').check()
    page.locator("form.compare button").click()
    page.wait_for_url("**/diff?**")
    assert page.locator("tr.differs").count() == 1
    assert page.locator("#d-4").get_attribute("class") == "differs"
    assert page.locator("#d-4 span.changed").all_inner_texts() == ["The sum is "]
    assert page.locator("table.diff-summary tr.changed").count() == 1  # the answers
    shot(page, "inspector-diff.png", tmp_path, full=True)


@needs_browser
def test_the_first_page_of_a_10000_cycle_run_loads_quickly(
    browsing: Browsing, recorded: Recorded, server: InspectorServer
) -> None:
    """Measured in the browser on a server that has not read the run yet (cold), then again (warm)."""
    catalog = recorded.catalog()
    with serving(catalog) as fresh:
        browsing.origins.append(fresh.url)
        page = browsing.page
        timings = []
        for _ in ("cold", "warm"):
            page.goto(fresh.login(f"/run/store/{recorded.big}"))  # signs in, then shows the run
            page.wait_for_load_state("load")
            timings.append(
                page.evaluate(
                    "() => { const n = performance.getEntriesByType('navigation')[0];"
                    " return [n.responseStart - n.requestStart, n.domContentLoadedEventEnd, n.loadEventEnd]; }"
                )
            )
        assert page.locator(".timeline details.cycle").count() == 200
        assert "page 1 of 50" in page.locator(".pager").first.inner_text()
        page.locator(".pager a[rel=next]").first.click()
        page.wait_for_selector("#c-201")
        page.goto(f"{fresh.url}run/store/{recorded.big}#c-9999")  # on page 50: the page script goes there
        page.locator("#c-9999 .tool").wait_for()
        assert "page=50" in page.url
    catalog.close()
    (cold_server, _, cold_load), (warm_server, _, warm_load) = timings
    print(
        f"\n10,000-cycle run, first page in Chromium: cold {cold_load:.0f} ms to load "
        f"({cold_server:.0f} ms server), warm {warm_load:.0f} ms ({warm_server:.0f} ms server)"
    )
    assert cold_load < 10_000 and warm_load < 5_000


@needs_browser
def test_no_secret_reaches_the_browser(
    browsing: Browsing, server: InspectorServer, recorded: Recorded
) -> None:
    page = browsing.page
    page.goto(server.url)
    assert not leaked(page.content())
    page.goto(f"{server.url}run/log3/{recorded.secret}")
    for number in (1, 2):
        page.locator(f"#c-{number} > summary").click()
        page.locator(f"#c-{number} .cycle-detail").wait_for()
    content = page.content()
    assert "***" in content and not leaked(content)


LOOP = {
    "name": "rounds",
    "nodes": [
        {"id": "in", "role": "start"},
        {"id": "draft", "role": "linear", "impl": "assign", "options": {"values": {"v": 1}}},
        {
            "id": "check",
            "role": "decision",
            "impl": "route_by",
            "options": {"key": "none", "routes": {}, "default": "draft"},
        },
        {"id": "out", "role": "exit"},
    ],
    "edges": [
        ["in", "draft"],
        ["draft", "check"],
        {"from": "check", "to": "draft", "max_iterations": 2, "otherwise": "out"},
        ["check", "out"],
    ],
}


def test_a_flow_graph_draws_a_loop_with_its_rounds(tmp_path: Path) -> None:
    """The loop edge does not push its nodes to the bottom (the layout is of the DAG without it), and it is
    labelled with the rounds the run took of those it allows; the node says how often it ran."""
    (tmp_path / "rounds").mkdir()
    (tmp_path / "rounds" / "flow.yaml").write_text(yaml.safe_dump(LOOP, sort_keys=False), encoding="utf-8")
    state = tmp_path / "rounds.db"
    config = AeonConfig().with_choice("state", "sqlite", path=str(state))
    with Engine.from_config_dir(tmp_path / "rounds", config) as flow:
        result = flow.run({"x": 1})
    assert result.status == "success" and result.tasks[0]["exit"] == "out", result.message
    catalog = Catalog([SqliteRuns("store", state)])
    graph = flow_graph(catalog.run("store", str(result.run.run_id)))
    catalog.close()
    depth = {node.id: node.y for node in graph.nodes}
    assert depth["in"] < depth["draft"] < depth["check"] < depth["out"]
    labels = {(edge.source, edge.target): edge.label for edge in graph.edges}
    assert labels == {
        ("in", "draft"): None,
        ("draft", "check"): None,
        ("check", "draft"): "2 of 2 rounds",
        ("check", "out"): None,
    }
    assert {node.id: node.runs for node in graph.nodes} == {"in": 1, "draft": 3, "check": 3, "out": 1}
