"""The daemon threads that run streamed runs (``aeon_kernel.runtime.stream._Workers``): every job gets a thread —
a kept one when one waits, a new one otherwise — at once, even while others run for a long time; idle ones end."""

from __future__ import annotations

import threading
import time

from aeon_kernel.runtime.stream import _Workers


def test_jobs_that_run_together_each_get_a_thread_at_once() -> None:
    workers = _Workers()
    # every job waits for all the others: none may queue behind one
    together = threading.Barrier(12, timeout=10)
    names: list[str] = []

    def job() -> None:
        names.append(threading.current_thread().name)
        together.wait()

    for _ in range(12):
        workers.run(job)
    deadline = time.monotonic() + 10
    while len(names) < 12 or workers._waiting < 12:
        assert time.monotonic() < deadline, (len(names), workers._waiting)
        time.sleep(0.01)


def test_a_waiting_thread_is_kept_for_the_next_job_and_ends_when_idle() -> None:
    workers = _Workers()
    workers.IDLE_SECONDS = 0.2
    ran: list[threading.Thread] = []
    done = threading.Event()

    def job() -> None:
        ran.append(threading.current_thread())
        done.set()

    for _ in range(5):  # one after another: the same kept thread each time
        done.clear()
        workers.run(job)
        assert done.wait(5)
        while workers._waiting != 1:
            time.sleep(0.005)
    assert len(set(ran)) == 1 and ran[0].daemon
    deadline = time.monotonic() + 5
    while ran[0].is_alive():  # idle past IDLE_SECONDS: it ends
        assert time.monotonic() < deadline
        time.sleep(0.02)
    assert workers._waiting == 0
    done.clear()
    workers.run(job)  # and a new one is started for the next job
    assert done.wait(5) and ran[-1] is not ran[0]


def test_a_job_reserved_as_its_thread_gives_up_still_runs() -> None:
    """The race the reservation guards: a job handed to a waiting thread just as that thread's wait times out."""
    workers = _Workers()
    workers.IDLE_SECONDS = 0.001  # waits time out all the time
    count = 0
    lock = threading.Lock()

    def job() -> None:
        nonlocal count
        with lock:
            count += 1

    for _ in range(500):
        workers.run(job)
        time.sleep(0.0005)
    deadline = time.monotonic() + 10
    while count < 500:
        assert time.monotonic() < deadline, count
        time.sleep(0.01)
