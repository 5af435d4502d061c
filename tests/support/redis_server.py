"""A real ``redis-server`` for the tests, started once per session on a free loopback port.

Import the fixture into a test module with ``from tests.support.redis_server import redis_url  # noqa: F401``. When
``redis-server`` is missing the tests fail, saying how to install it: CI installs it (.ci/run), so a silent skip
would hide a broken setup.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator

import pytest

STARTUP_TIMEOUT = 10.0


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _answers_ping(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as conn:
            conn.sendall(b"PING\r\n")
            return conn.recv(16).startswith(b"+PONG")
    except OSError:
        return False


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    """The URL of a throw-away redis-server (no persistence), terminated at the end of the session."""
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.fail(
            "redis-server is not installed; the redis memory tests need it. Install it with "
            "`apt-get install -y redis-server` (CI does this in .ci/run).",
            pytrace=False,
        )
    with tempfile.TemporaryDirectory(prefix="aeon-redis-") as workdir:
        port = _free_port()
        command = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        command += ["--dir", workdir, "--maxclients", "1000"]
        with open(f"{workdir}/redis.log", "wb") as log:
            server = subprocess.Popen(command, cwd=workdir, stdout=log, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + STARTUP_TIMEOUT
            while not _answers_ping(port):
                if server.poll() is not None or time.monotonic() > deadline:
                    with open(f"{workdir}/redis.log", encoding="utf-8", errors="replace") as log_text:
                        output = log_text.read()[-2000:]
                    pytest.fail(f"redis-server did not start on port {port}:\n{output}", pytrace=False)
                time.sleep(0.05)
            yield f"redis://127.0.0.1:{port}/0"
        finally:
            server.terminate()
            try:
                server.wait(timeout=10)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
