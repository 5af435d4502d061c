"""Step-through (spec 004 §10.7): ``aeon run --inspect`` and ``aeon flow run --inspect`` pause before each cycle and
the inspector's page drives them with Step / Continue / Stop.

Each test starts the real command as a subprocess on the scripted model (a 3-step plan: calculator, echo of a
``<script>``, the model's answer) or on a flow without agent nodes, reads the page's URL from its stderr, and drives
it — in Debian's headless Chromium through Playwright (skipped, saying why, where either is missing; required where
``AEON_REQUIRE_BROWSER`` is set, as in CI), or over plain HTTP for the control endpoint's refusals. The page must
advance exactly one cycle per Step, show the pending unit of work with its context, and never request anything
from elsewhere, open a dialog or throw.

``AEON_INSPECTOR_SCREENSHOTS=1`` also saves the step-through screenshot into docs/img/ (docs/inspector.md shows it).
"""

from __future__ import annotations

import http.client
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest

from tests.support.browser import needs_browser
from tests.support.builders import answer, llm_step, plan, tool_step
from tests.support.servers import started

ROOT = Path(__file__).resolve().parents[2]
#: no digit in the echoed text: the calculator's review would ask that a number the request states be used
SCRIPT = "<script>alert(document.domain)</script>"
#: asks for what THREE_STEPS does: the sum, then the echo (each tool's review finds its calls asked for)
REQUEST = f"add 5 and 10, then echo {SCRIPT}"
THREE_STEPS = plan(
    tool_step("1", "calculator", {"expression": "5 + 10"}),
    tool_step("2", "echo", {"message": SCRIPT}),
    llm_step("3"),
)
FLOW_YAML = """\
name: tidy-up
start: intake
nodes:
  - {id: intake, role: start, impl: pick, options: {keys: [text]}}
  - {id: tidy, role: linear, impl: assign, options: {values: {lang: en}}, context: global}
  - {id: done, role: exit}
edges:
  - [intake, tidy]
  - [tidy, done]
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A working directory whose aeon.toml selects the scripted model; the CLI records into ``data/``."""
    (tmp_path / "responses.json").write_text(json.dumps([THREE_STEPS, answer("The sum is 15")]))
    (tmp_path / "aeon.toml").write_text('[llm]\nuse = "scripted"\nresponses = "responses.json"\n')
    flow = tmp_path / "flow"
    flow.mkdir()
    (flow / "flow.yaml").write_text(FLOW_YAML)
    return tmp_path


def environment(project: Path) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key != "AEON_CONFIG"}
    return {**env, "AEON_DATA_DIR": str(project / "data")}


def aeon(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "aeon_cli", *args],
        cwd=project,
        env=environment(project),
        capture_output=True,
        text=True,
        timeout=60,
    )


@dataclass
class Inspected:
    """A command running with ``--inspect``: its process and the page's address (with the session's token)."""

    process: subprocess.Popen[str]
    url: str
    port: int
    #: the session's secret, from the URL: every request here carries it as the browser's cookie would
    token: str
    #: the process's output once it ended: status, stdout, stderr
    ended: tuple[int, str, str] | None = field(default=None)

    def wait(self, timeout: float = 30) -> tuple[int, str, str]:
        if self.ended is None:
            out, err = self.process.communicate(timeout=timeout)
            self.ended = (self.process.returncode, out, err)
        return self.ended

    def request(
        self, method: str, path: str, body: str = "", headers: dict[str, str] | None = None
    ) -> tuple[int, dict[str, str], str]:
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            sent = {
                "Host": f"127.0.0.1:{self.port}",
                "Cookie": f"aeon-inspect-{self.port}={self.token}",
                **(headers or {}),
            }
            if method == "POST":
                sent.setdefault("Content-Type", "application/x-www-form-urlencoded")
            connection.request(method, path, body=body.encode(), headers=sent)
            response = connection.getresponse()
            return response.status, dict(response.getheaders()), response.read().decode("utf-8")
        finally:
            connection.close()

    def wait_paused(self) -> None:
        """Until the run pauses (before its first cycle, or after a Step)."""
        for _ in range(600):
            if self.live()["mode"] == "paused":
                return
            time.sleep(0.05)
        raise AssertionError(f"the run did not pause: {self.live()}")

    def live(self) -> dict[str, Any]:
        status, _, body = self.request("GET", "/api/live")
        assert status == 200, body
        found: dict[str, Any] = json.loads(body)
        return found


@contextmanager
def inspected(project: Path, *args: str) -> Iterator[Inspected]:
    """``aeon ARGS --inspect --no-browser --json``, until its page's URL is printed; stopped (SIGTERM, then
    SIGKILL) if the test ends before it did."""
    command = [sys.executable, "-m", "aeon_cli", *args, "--inspect", "--no-browser", "--json"]
    with started(
        command,
        cwd=project,
        env=environment(project),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as process:
        assert process.stderr is not None
        line = process.stderr.readline()
        found = re.search(r"(http://127\.0\.0\.1:(\d+)/live\?token=([A-Za-z0-9_-]+))", line)
        assert found, line + process.stderr.read()
        yield Inspected(process, found[1], int(found[2]), found[3])


def token_of(page_html: str) -> str:
    found = re.search(r'name="token" value="([^"]+)"', page_html)
    assert found, page_html[:2000]
    return found[1]


# --- over HTTP ------------------------------------------------------------------------------------------------


def test_the_controls_refuse_a_request_without_the_page_s_token_or_from_elsewhere(project: Path) -> None:
    """The only POST of the inspector: 403 without the token, with another token, from another Origin or a
    cross-site fetch, or to another Host; 405 anywhere but the control endpoint; 409 from a page that is out of
    date. None of them moves the run; a POST with the token does, and Stop ends the command with status 130."""
    with inspected(project, "run", REQUEST) as run:
        run.wait_paused()
        status, headers, page = run.request("GET", "/live")
        assert status == 200 and headers["Referrer-Policy"] == "same-origin"
        assert "script-src 'self'" in headers["Content-Security-Policy"]
        token = token_of(page)
        version = run.live()["version"]
        step = {"action": "step", "seen": str(version)}
        origin = {"Origin": f"http://127.0.0.1:{run.port}"}
        refused = [
            ("/live/control", urlencode(step), origin),
            ("/live/control", urlencode({**step, "token": "x" * len(token)}), origin),
            ("/live/control", urlencode({**step, "token": token}), {"Origin": "http://evil.example"}),
            ("/live/control", urlencode({**step, "token": token}), {"Origin": "null"}),
            ("/live/control", urlencode({**step, "token": token}), {"Sec-Fetch-Site": "cross-site"}),
            ("/live/control", urlencode({**step, "token": token}), {"Host": "evil.example"}),
        ]
        for path, body, headers in refused:
            assert run.request("POST", path, body, headers)[0] == 403, (body, headers)
        assert run.request("POST", f"/run/live/{token}", urlencode({**step, "token": token}))[0] == 405
        assert run.request("GET", "/live", headers={"Host": "evil.example"})[0] == 403
        stale = urlencode({**step, "token": token, "seen": str(version - 1)})
        assert run.request("POST", "/live/control", stale, origin)[0] == 409
        assert run.live() == {"version": version, "mode": "paused", "cycles": 0}  # nothing moved

        status, headers, _ = run.request("POST", "/live/control", urlencode({**step, "token": token}), origin)
        assert status == 303 and headers["Location"] == "/live"
        for _ in range(200):
            if run.live()["mode"] == "paused":
                break
            time.sleep(0.05)
        assert run.live()["cycles"] == 1  # exactly one cycle: the plan
        (listed,) = json.loads(run.request("GET", "/api/runs")[2])["runs"]
        assert (listed["source"], listed["cycles"]) == ("live", 1)
        for path in (f"/run/live/{listed['run_id']}", f"/run/live/{listed['run_id']}/cycle/1?fragment=1"):
            assert run.request("GET", path)[0] == 200, path  # the recorded-run pages, over the live run
        assert run.request("GET", "/")[1]["Location"] == "/live"
        status, _, _ = run.request("POST", "/live/control", urlencode({"action": "stop", "token": token}))
        assert status == 303
        code, out, err = run.wait()
    assert code == 130, err
    stopped = json.loads(out)
    assert (stopped["status"], stopped["cycles"], stopped["resumable"]) == ("stopped", 1, True)
    assert f"aeon resume {stopped['run_id']}" in err


def control(run: Inspected, action: str) -> None:
    """Press ``action`` as the page would (its token, the version it saw), then wait until the run pauses or ends."""
    status, _, page = run.request("GET", "/live")
    assert status == 200
    seen = run.live()["version"]
    body = urlencode({"action": action, "token": token_of(page), "seen": str(seen)})
    assert run.request("POST", "/live/control", body)[0] == 303
    for _ in range(400):
        if run.process.poll() is not None or (
            run.live()["version"] != seen and run.live()["mode"] != "running"
        ):
            return
        time.sleep(0.05)


def stopped_after_one_cycle(project: Path, *command: str) -> tuple[str, str]:
    """``aeon *command --inspect`` stepped through one cycle, then stopped: the run id and what it printed to
    stderr."""
    with inspected(project, *command) as run:
        run.wait_paused()
        control(run, "step")
        assert run.live()["cycles"] == 1
        control(run, "stop")
        code, out, err = run.wait()
    assert code == 130, err
    return json.loads(out)["run_id"], err


def test_resume_inspect_shows_the_stored_cycles_and_steps_through_the_rest(project: Path) -> None:
    """``aeon resume RUN_ID --inspect``: the run stopped after its plan is claimed again; the page shows its stored
    cycle, pauses before each new one (Step runs exactly one), can be stopped again, and Continue ends it."""
    run_id, _ = stopped_after_one_cycle(project, "run", REQUEST)

    (project / "responses.json").write_text(json.dumps([answer("15")]))  # the plan is made: only the answer
    with inspected(project, "resume", run_id) as resumed:
        resumed.wait_paused()
        assert resumed.live()["cycles"] == 1  # the stored cycle, shown before any new one ran
        (listed,) = json.loads(resumed.request("GET", "/api/runs")[2])["runs"]
        assert (listed["run_id"], listed["cycles"]) == (run_id, 1)
        control(resumed, "step")
        assert resumed.live()["cycles"] == 2  # exactly one more: step 1, the calculator
        status, _, cycle = resumed.request("GET", f"/run/live/{run_id}/cycle/2?fragment=1")
        assert status == 200 and "calculator" in cycle
        control(resumed, "stop")
        code, out, err = resumed.wait()
    assert code == 130, err
    assert json.loads(out)["cycles"] == 2 and f"aeon resume {run_id}" in err

    with inspected(project, "resume", run_id) as again:
        again.wait_paused()
        assert again.live()["cycles"] == 2
        control(again, "continue")
        code, out, err = again.wait()
    assert code == 0, err
    result = json.loads(out)
    assert (result["run_id"], result["status"], result["answer"]) == (run_id, "completed", "15")


def test_flow_resume_inspect_shows_the_stored_stages_and_steps_through_the_rest(project: Path) -> None:
    """``aeon flow resume RUN_ID --inspect``: a flow run stopped after its first stage is claimed again, its stored
    cycle shown, the next node pending; Step runs exactly one more stage and Continue ends it."""
    run_id, err = stopped_after_one_cycle(project, "flow", "run", "flow", "--input", '{"text": "hello"}')
    assert f"aeon flow resume {run_id}" in err

    with inspected(project, "flow", "resume", run_id) as resumed:
        resumed.wait_paused()
        assert resumed.live()["cycles"] == 1  # intake's stage, stored
        status, _, page = resumed.request("GET", "/live")
        assert status == 200 and "t1/tidy" in page  # the node that comes next
        control(resumed, "step")
        assert resumed.live()["cycles"] == 2
        control(resumed, "continue")
        code, out, err = resumed.wait()
    assert code == 0, err
    result = json.loads(out)
    assert result["run_id"] == run_id and result["status"] == "success", result
    assert result["output"] == {"text": "hello", "lang": "en"}


# --- in Chromium ----------------------------------------------------------------------------------------------


@dataclass
class Browsing:
    """A page and everything it did: the URLs it requested, the dialogs it opened, the errors it threw."""

    page: Any
    requests: list[str]
    dialogs: list[str]
    errors: list[str]


@pytest.fixture
def browsing(browser: Any) -> Iterator[Browsing]:
    context = browser.new_context(viewport={"width": 1360, "height": 900})
    page = context.new_page()
    page.set_default_timeout(20_000)
    seen = Browsing(page, [], [], [])
    page.on("request", lambda request: seen.requests.append(request.url))
    page.on("dialog", lambda dialog: (seen.dialogs.append(dialog.message), dialog.dismiss()))
    page.on("pageerror", lambda error: seen.errors.append(str(error)))
    yield seen
    context.close()
    elsewhere = [url for url in seen.requests if not url.startswith("http://127.0.0.1:")]
    assert seen.requests and not elsewhere, f"requests that left the server: {elsewhere}"
    assert not seen.dialogs and not seen.errors, (seen.dialogs, seen.errors)


def shot(page: Any, name: str, tmp_path: Path) -> None:
    page.screenshot(path=str(tmp_path / name), full_page=True)
    if os.environ.get("AEON_INSPECTOR_SCREENSHOTS"):
        (ROOT / "docs" / "img").mkdir(exist_ok=True)
        shutil.copy(tmp_path / name, ROOT / "docs" / "img" / name)


def paused_at(page: Any, cycles: int) -> None:
    """Wait until the page shows the run paused after exactly ``cycles`` cycles."""
    page.wait_for_selector(f'#live[data-mode="paused"][data-cycles="{cycles}"]')


def click(page: Any, action: str) -> None:
    page.locator(f"#live form.controls button.{action}").click()


def timeline(page: Any) -> list[str]:
    return [text.strip() for text in page.locator("#live .timeline .row .n").all_inner_texts()]


@needs_browser
def test_each_step_runs_exactly_one_cycle_and_continue_runs_to_the_end(
    browsing: Browsing, project: Path, tmp_path: Path
) -> None:
    page = browsing.page
    with inspected(project, "run", REQUEST) as run:
        page.goto(run.url)
        paused_at(page, 0)
        assert page.locator("#live .pending-title").inner_text() == "plan generation"
        assert REQUEST in page.locator("#live section.pending details.prompt pre").text_content()
        assert timeline(page) == []

        click(page, "step")
        paused_at(page, 1)
        assert timeline(page) == ["1"]
        assert page.locator("#live .pending-title").inner_text() == "step 1"
        assert page.locator("#live table.pending-step td").nth(2).inner_text() == "calculator"
        assert '"expression": "5 + 10"' in page.locator("#live table.pending-step pre").inner_text()
        context = page.locator("#live .pending .block.context pre").inner_text()
        assert "Step 1 [running] use calculator" in context and "Step 2 [pending]" in context
        assert page.locator("#live table.plan:not(.pending-step) .badge").all_inner_texts() == ["pending"] * 3
        time.sleep(0.5)
        assert run.live()["cycles"] == 1  # paused: nothing runs until the next click

        click(page, "step")
        paused_at(page, 2)
        assert timeline(page) == ["1", "2"]
        assert page.locator("#live .pending-title").inner_text() == "step 2"
        assert "calculator" in page.locator("#live #c-2 .tools").inner_text()
        page.locator('#live a.step-link:text-is("1")').click()  # a plan step opens its cycle, on this page
        page.locator("#live #c-2 .tool").wait_for()
        assert '"value": 15' in page.locator("#live #c-2 .tool .block.result pre").inner_text()
        assert (
            "Step 1 [complete] use calculator"
            in page.locator("#live .pending .block.context pre").inner_text()
        )
        shot(page, "inspector-step-through.png", tmp_path)

        click(page, "step")
        paused_at(page, 3)
        assert page.locator("#live .pending-title").inner_text() == "step 3"
        summary = page.locator("#live .pending .block.context pre").inner_text()
        assert SCRIPT in summary  # the echoed <script>, shown as text
        assert page.locator("script").count() == 1  # inspector.js alone
        assert "Now do step 3" in page.locator("#live .pending details.prompt pre").text_content()

        click(page, "continue")
        page.wait_for_selector('#live[data-mode="finished"]')
        assert timeline(page) == ["1", "2", "3", "4"]
        assert page.locator("#live .block.result pre.answer").inner_text() == "The sum is 15"
        assert page.locator("#live form.controls button").evaluate_all("bs => bs.map(b => b.disabled)") == [
            True,
            True,
            True,
        ]
        code, out, err = run.wait()
    assert code == 0, err
    result = json.loads(out)
    assert (result["status"], result["answer"]) == ("completed", "The sum is 15")
    assert len(result["final_state"]["llm_outputs"]) == 2  # the plan and the answer: nothing ran twice


@needs_browser
def test_stop_ends_the_command_and_leaves_the_run_resumable(browsing: Browsing, project: Path) -> None:
    page = browsing.page
    with inspected(project, "run", REQUEST) as run:
        page.goto(run.url)
        paused_at(page, 0)
        click(page, "step")
        paused_at(page, 1)
        click(page, "stop")
        page.wait_for_selector('#live[data-mode="stopped"]')
        said = page.locator("#live .live-state").inner_text()
        code, out, err = run.wait()
    assert code == 130, err
    run_id = json.loads(out)["run_id"]
    assert f"aeon resume {run_id}" in said and f"aeon resume {run_id}" in err
    (listed,) = json.loads(aeon(project, "runs", "--json").stdout)
    assert (listed["run_id"], listed["status"], listed["cycles"]) == (run_id, "running", 1)

    (project / "responses.json").write_text(json.dumps([answer("15")]))  # the plan is made: only the answer
    resumed = aeon(project, "resume", run_id, "--json")
    assert resumed.returncode == 0, resumed.stderr
    result = json.loads(resumed.stdout)
    assert (result["run_id"], result["status"], result["answer"]) == (run_id, "completed", "15")


@needs_browser
def test_a_flow_pauses_before_each_node_with_its_assembled_context(
    browsing: Browsing, project: Path, tmp_path: Path
) -> None:
    (project / "flow" / "aeon.toml").write_text('[llm]\nuse = "scripted"\nresponses = "no-such-file.json"\n')
    page = browsing.page
    with inspected(project, "flow", "run", "flow", "--input", '{"text": "hello"}') as run:
        page.goto(run.url)
        paused_at(page, 0)
        assert page.locator("#live .pending-title").inner_text() == "t1/intake"
        assert '"text": "hello"' in page.locator("#live .pending-stage .block pre").inner_text()
        assert (
            page.locator('#live svg.dag g.node[data-node="intake"]').get_attribute("class").endswith(" next")
        )

        click(page, "step")
        paused_at(page, 1)
        assert timeline(page) == ["1"]
        stage = page.locator('#live .pending-stage[data-node="tidy"]')
        assert page.locator("#live .pending-title").inner_text() == "t1/tidy"
        assert "context: global · 1 item" in stage.locator("h4").inner_text()
        cells = stage.locator("table.context-items td").all_inner_texts()
        assert cells[:2] == ["task", "00000001-intake"] and '"text": "hello"' in cells[2]
        assert (
            page.locator('#live svg.dag g.node[data-node="intake"]').get_attribute("data-status") == "success"
        )
        shot(page, "inspector-step-through-flow.png", tmp_path)

        click(page, "step")
        paused_at(page, 2)
        assert timeline(page) == ["1", "2"]
        assert page.locator("#live .pending-title").inner_text() == "t1/done"

        click(page, "continue")
        page.wait_for_selector('#live[data-mode="finished"]')
        assert timeline(page) == ["1", "2", "3"]
        code, out, err = run.wait()
    assert code == 0, err
    result = json.loads(out)
    assert result["status"] == "success" and result["output"] == {"text": "hello", "lang": "en"}
    assert [(stage["node"], stage.get("context")) for stage in result["history"]][1] == (
        "tidy",
        [{"layer": "task", "key": "00000001-intake", "value": {"text": "hello"}, "seq": 1}],
    )


def test_a_run_waiting_for_approval_is_answered_from_the_page(project: Path) -> None:
    """Decision 0021 in the step-through: the page shows the call the run waits on; Deny without a reason is
    refused, Approve runs the call, and the run goes on to its end."""
    (project / "aeon.toml").write_text(
        '[llm]\nuse = "scripted"\nresponses = "responses.json"\n'
        '[[policy.rules.ask]]\nname = "sums"\ntool = "calculator"\nreason = "a person checks sums"\n'
    )
    with inspected(project, "run", REQUEST) as run:
        run.wait_paused()
        control(run, "continue")
        for _ in range(400):
            if run.live()["mode"] == "waiting":
                break
            time.sleep(0.05)
        status, _, page = run.request("GET", "/live")
        assert status == 200 and "Waiting for approval" in page and "a person checks sums" in page
        assert "Approve" in page and "5 + 10" in page
        seen = str(run.live()["version"])
        denied = urlencode({"action": "deny", "token": token_of(page), "seen": seen})
        assert run.request("POST", "/live/control", denied)[0] == 409  # no reason given
        control(run, "approve")
        code, out, err = run.wait()
    assert code == 0, err
    result = json.loads(out)
    assert result["status"] == "completed" and result["answer"] == "The sum is 15"
    decided = [e for e in result["errors"] if e["type"] == "ApprovalDecided"]
    assert [(e["decision"], e["by"]) for e in decided] == [("approved", "the inspector's page")]
