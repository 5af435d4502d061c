"""Secret providers (spec 004 §10.11, issue 17): a plugin says where secrets come from; the tools that need
credentials get them when they are built; no output of a run shows them, whether its steps succeed or fail."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from aeon_kernel import ConfigError, Engine, Register, SecretProvider, hookimpl
from aeon_kernel.config import parse_config, resolve_secrets
from tests.support.builders import answer, plan, tool_step
from tests.test_secrets import assert_no_leak, everything_written

HTTP_TOKEN = "vlt-hTTp-'tok\"en'-Qz8Wx3Lm5Rp1"
SHELL_TOKEN = "vlt-sHeLL-tokEn-Kd4Nv7Bq2Ty9"


class Vault(SecretProvider):
    """A provider backed by a dict, as a keyring or a vault client would answer."""

    secrets = {"api/token": f"Bearer {HTTP_TOKEN}", "shell/token": SHELL_TOKEN}
    asked: list[str] = []

    def get(self, reference: str) -> str:
        self.asked.append(reference)
        if reference == "broken":
            raise RuntimeError(f"vault said: {SHELL_TOKEN}")  # a message quoting a secret: never shown
        if reference not in self.secrets:
            raise ConfigError(f"the vault holds no secret {reference!r}")
        return self.secrets[reference]


class VaultPlugin:
    @hookimpl
    def aeon_register_secret_providers(self, register: Register) -> None:
        register("vault", Vault)


def engine(config: dict[str, Any]) -> Engine:
    return Engine(parse_config(config), plugins=[VaultPlugin()])


@pytest.fixture
def echo_server() -> Iterator[tuple[str, list[str]]]:
    """A loopback server that answers with the Authorization header it got (a careless API's error page)."""
    seen: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            auth = self.headers.get("Authorization", "")
            seen.append(auth)
            body = json.dumps({"error": f"token {auth!r} is not allowed", "raw": auth}).encode()
            self.send_response(401)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"127.0.0.1:{server.server_address[1]}", seen
    server.shutdown()
    server.server_close()


def test_hook_aeon_register_secret_providers(
    tmp_path: Path, echo_server: tuple[str, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Canary credentials from a provider plugin reach the http and shell tools, which leak them back (a server
    echoing its Authorization header, a program printing its environment); the run succeeds and fails steps,
    and no output — the --json result, stdout, stderr, the JSONL log, the state store — holds either."""
    from aeon_cli import main

    host, seen = echo_server
    responses = [
        plan(
            tool_step("1", "http", {"method": "GET", "url": f"http://{host}/me"}),
            tool_step("2", "shell", {"program": "printenv", "args": ["API_TOKEN"]}),
            tool_step(
                "3", "http", {"method": "GET", "url": "http://example.invalid/"}
            ),  # refused: not listed
            goal="check the token",
        ),
        answer("done"),
    ]
    (tmp_path / "responses.json").write_text(json.dumps(responses))
    (tmp_path / "work").mkdir()
    (tmp_path / "aeon.toml").write_text(
        '[llm]\nuse = "scripted"\nresponses = "responses.json"\n'
        "[tools.http]\n"
        f'grant = ["get"]\nhosts = ["{host}"]\n'
        'headers = { Authorization = { "$vault" = "api/token" } }\n'
        "[tools.shell]\n"
        'grant = ["run"]\nprograms = ["printenv"]\nroot = "work"\n'
        'env = { API_TOKEN = { "$vault" = "shell/token" } }\n'
        '[state]\nuse = "sqlite"\npath = "state.db"\n'
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(main, "_engine", lambda config, **o: Engine(config, plugins=[VaultPlugin()], **o))
    outcome = CliRunner().invoke(main.cli, ["run", "--json", "--log", "run.jsonl", "check the token"])
    result = json.loads(outcome.stdout)
    steps = result["final_state"]["plan"]["steps"]
    assert [s["status"] for s in steps] == ["complete", "complete", "failed"], steps
    assert seen == [f"Bearer {HTTP_TOKEN}"]  # the server got the credential, exactly
    assert steps[0]["result"]["status"] == 401 and "***" in steps[0]["result"]["body"]
    assert steps[1]["result"]["exit_code"] == 0 and steps[1]["result"]["stdout"].strip() == "***"
    assert {"api/token", "shell/token"} <= set(Vault.asked)
    written = everything_written(tmp_path)
    del written["responses.json"], written["aeon.toml"]
    assert {"run.jsonl", "state.db"} <= set(written)
    for token in (HTTP_TOKEN, SHELL_TOKEN):
        assert_no_leak({"stdout": outcome.stdout, "stderr": outcome.stderr, **written}, token)


def test_a_reference_to_a_provider_that_is_not_there_or_fails_is_a_config_error() -> None:
    config = {"tools": {"shell": {"grant": ["run"], "programs": ["true"], "root": ".", "env": {}}}}
    for reference, complaint in [
        ({"$keyring": "x"}, r"\$keyring names no secret provider; use \$env or \$file, or install"),
        ({"$vault": "missing"}, "the vault holds no secret 'missing'"),
        ({"$vault": "broken"}, "the secret provider 'vault' failed for 'broken': RuntimeError"),
        ({"$vault": 5}, r"\$vault must be a reference"),
    ]:
        config["tools"]["shell"]["env"] = {"TOKEN": reference}
        with engine(config) as e, pytest.raises(ConfigError, match=complaint) as info:
            _ = e.tools
        assert SHELL_TOKEN not in str(info.value)
    with pytest.raises(ConfigError, match="names no secret provider"):
        resolve_secrets({"token": {"$vault": "api/token"}}, "tool")  # no engine: only $env and $file


def test_a_provided_secret_is_cleaned_and_registered() -> None:
    with engine({}) as e:
        resolved = resolve_secrets({"key": {"$vault": "shell/token"}}, "tool", e.components.secret_provider)
    assert resolved["key"].get_secret_value() == SHELL_TOKEN
    from aeon_kernel.kit import scrub_secrets

    assert scrub_secrets(f"<{SHELL_TOKEN}>") == "<***>"


def test_canary_credentials_survive_a_crash_and_a_resume_unseen(
    tmp_path: Path, echo_server: tuple[str, list[str]]
) -> None:
    """``aeon run`` killed (SIGKILL) in the middle of a step, then ``aeon resume``: the credentials of the http
    and shell tools ($env here: a real process, no plugin) reach the tools in both processes and no output of
    either — stdout, stderr, the log, the store — holds them."""
    import os
    import signal
    import sqlite3
    import subprocess
    import sys
    import time

    host, seen = echo_server
    responses = [
        plan(
            tool_step("1", "http", {"method": "GET", "url": f"http://{host}/me"}),
            tool_step("2", "shell", {"program": "sleep", "args": ["2"]}),
            tool_step("3", "shell", {"program": "printenv", "args": ["API_TOKEN"]}),
            goal="check the token",
        )
    ]
    (tmp_path / "responses.json").write_text(json.dumps(responses))
    (tmp_path / "work").mkdir()
    (tmp_path / "aeon.toml").write_text(
        '[llm]\nuse = "scripted"\nresponses = "responses.json"\n'
        f'[tools.http]\ngrant = ["get"]\nhosts = ["{host}"]\n'
        'headers = { Authorization = { "$env" = "CANARY_HTTP" } }\n'
        '[tools.shell]\ngrant = ["run"]\nprograms = ["printenv", "sleep"]\nroot = "work"\n'
        'env = { API_TOKEN = { "$env" = "CANARY_SHELL" } }\n'
        '[state]\nuse = "sqlite"\npath = "state.db"\n'
    )
    env = {**os.environ, "CANARY_HTTP": f"Bearer {HTTP_TOKEN}", "CANARY_SHELL": SHELL_TOKEN}
    aeon = [sys.executable, "-m", "aeon_cli"]
    common = ["--json", "--log", "run.jsonl", "--config", "aeon.toml"]
    first = subprocess.Popen(
        [*aeon, "run", *common, "check the token"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 60
    while not seen:  # step 1 has called the server: step 2 (two seconds of sleep) comes next
        assert first.poll() is None and time.monotonic() < deadline, first.communicate()
        time.sleep(0.05)
    time.sleep(0.7)
    first.send_signal(signal.SIGKILL)
    killed_out, killed_err = first.communicate(timeout=30)
    with sqlite3.connect(tmp_path / "state.db") as db:
        (run_id,) = db.execute("SELECT run_id FROM runs").fetchone()
    second = subprocess.run(
        [*aeon, "resume", run_id, *common], cwd=tmp_path, env=env, capture_output=True, timeout=120
    )
    assert second.returncode == 0, second.stderr.decode()
    result = json.loads(second.stdout)
    assert [s["status"] for s in result["plan"]["steps"]] == ["complete", "complete", "complete"]
    assert result["plan"]["steps"][2]["result"]["stdout"].strip() == "***"  # the child had it; the record not
    assert seen == [f"Bearer {HTTP_TOKEN}"]  # step 1 ran once, before the crash
    written = everything_written(tmp_path)
    del written["responses.json"], written["aeon.toml"]
    outputs = {"run stdout": killed_out, "run stderr": killed_err, "resume stdout": second.stdout, **written}
    outputs["resume stderr"] = second.stderr
    for token in (HTTP_TOKEN, SHELL_TOKEN):
        assert_no_leak(outputs, token)
