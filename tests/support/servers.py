"""Long-running ``aeon`` processes in tests (``aeon inspect``, ``aeon mcp serve``, step-through), started so that no
failure leaves one behind, stopped as a supervisor stops them (SIGTERM), and requests made as someone else.

* :func:`started`: a ``Popen`` whose process — and every process it started — is gone when the block ends:
  SIGTERM, then SIGKILL after a while; optionally started with SIGINT ignored, as a shell starts a background job.
* :func:`gone`: whether a pid (and the processes it had started) no longer exist (``psutil``).
* :func:`curl`: an HTTP request made by another process that does not hold the session's secret — as the user
  ``nobody`` where this test runs as root and ``su`` is there, else as this user.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psutil

#: the account the "someone else" requests run as, where this test can become it
OTHER_ACCOUNT = "nobody"
SU = shutil.which("su")
CURL = shutil.which("curl")


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@contextmanager
def started(
    command: list[str], *, ignore_sigint: bool = False, **popen: Any
) -> Iterator[subprocess.Popen[Any]]:
    """``Popen(command, **popen)`` (SIGINT ignored in the child where asked, as ``cmd &`` in a script leaves it),
    stopped for sure when the block ends: SIGTERM, then SIGKILL; the processes it started are killed too."""
    process: subprocess.Popen[Any] = subprocess.Popen(
        command, preexec_fn=_ignore_sigint if ignore_sigint else None, **popen
    )
    try:
        yield process
    finally:
        stop(process)


def descendants(pid: int) -> list[psutil.Process]:
    """The processes ``pid`` started, and theirs (none if it is gone)."""
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def stop(process: subprocess.Popen[Any], grace: float = 10) -> None:
    """End ``process`` if it still runs (SIGTERM, then SIGKILL after ``grace`` seconds) and whatever it started."""
    children = descendants(process.pid)
    if process.poll() is None:
        process.terminate()
        try:
            process.communicate(timeout=grace)
        except subprocess.TimeoutExpired:
            process.kill()
            process.communicate(timeout=30)
    else:
        with contextlib.suppress(ValueError, OSError):  # read what is left, so the pipes close
            process.communicate(timeout=5)
    for child in children:
        with contextlib.suppress(psutil.NoSuchProcess):
            child.kill()


def gone(pid: int, children: Sequence[psutil.Process] = (), timeout: float = 10) -> bool:
    """Whether ``pid`` and ``children`` have all exited (a zombie awaiting its parent counts as exited)."""
    deadline = time.monotonic() + timeout
    while True:
        alive = []
        for process in [*children, pid]:
            try:
                found = process if isinstance(process, psutil.Process) else psutil.Process(process)
                if found.is_running() and found.status() != psutil.STATUS_ZOMBIE:
                    alive.append(found)
            except psutil.NoSuchProcess:
                continue
        if not alive:
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)


def as_someone_else() -> str:
    """Who :func:`curl` runs as: ``nobody`` where this process is root and can become it, else this user."""
    if os.geteuid() == 0 and SU is not None:
        return OTHER_ACCOUNT
    return "this user, another process"


def curl(*args: str, timeout: float = 30) -> tuple[int, dict[str, str], str]:
    """``curl -s -i ARGS`` run by another process without the secret, as ``nobody`` where it can be: the status,
    the headers (names in lower case; the last of each) and the body."""
    if CURL is None:
        raise RuntimeError("these tests need curl (apt-get install curl)")
    command = [CURL, "-s", "-i", "--max-time", str(int(timeout)), *args]
    if as_someone_else() == OTHER_ACCOUNT:
        assert SU is not None
        command = [SU, OTHER_ACCOUNT, "-s", "/bin/sh", "-c", shlex.join(command)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout + 10, cwd="/")
    assert done.returncode == 0, (done.returncode, done.stderr)
    head, _, body = done.stdout.replace("\r\n", "\n").partition("\n\n")
    status_line, *lines = head.splitlines()
    headers = {}
    for line in lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return int(status_line.split()[1]), headers, body


def read_as_someone_else(path: Path) -> bool:
    """Whether the other account can read ``path`` (False where this test cannot become another account)."""
    if as_someone_else() != OTHER_ACCOUNT:
        return False
    assert SU is not None
    done = subprocess.run(
        [SU, OTHER_ACCOUNT, "-s", "/bin/sh", "-c", f"cat {shlex.quote(str(path))}"],
        capture_output=True,
        timeout=30,
        cwd="/",
    )
    return done.returncode == 0
