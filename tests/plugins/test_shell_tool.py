"""The ``shell`` tool, with real processes: no shell in between, only allowlisted programs, the root as working
directory, a scrubbed environment, secrets kept out of sight, and limits that stop runaway programs (and every
process they started)."""

from __future__ import annotations

import hashlib
import json
import os
import pwd
import shutil
import signal
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

import aeon_plugins.shell as shell_plugin
from aeon_kernel import ConfigError, Engine, PermissionDeniedError, ToolContext, ToolError, ValidationError
from aeon_kernel.config import parse_config
from aeon_kernel.invocation import invoke_tool
from aeon_kernel.kit import scrub_secrets
from aeon_kernel.testing import tool_conformance
from aeon_plugins.shell import DRAIN_SECONDS, MAX_ARGUMENT_CHARS, MAX_ARGUMENTS, ShellTool

PY = sys.executable
PROGRAMS = ["echo", "printf", "env", "cat", "sleep", "yes", PY]
AS_ROOT = os.geteuid() == 0
SECRET = "s3cr3t-shell-token-4f9a1c"

Make = Callable[..., ShellTool]


@pytest.fixture
def make(tmp_path: Path) -> Make:
    """A granted shell tool in ``tmp_path``, with the test programs and ``options``."""

    def build(**options: Any) -> ShellTool:
        return ShellTool(**{"granted": {"run"}, "programs": PROGRAMS, "root": tmp_path, **options})

    return build


@pytest.fixture
def tool(make: Make) -> ShellTool:
    return make()


def python(tool: ShellTool, code: str) -> dict[str, Any]:
    return tool.invoke(program=PY, args=["-c", textwrap.dedent(code)])


def gone(pid: int) -> bool:
    """Whether ``pid`` no longer runs: absent, or a zombie waiting for its (new) parent to reap it."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return True
    return "State:\tZ" in status


def all_gone(pids: list[int], within: float = 1.0) -> bool:
    """Whether every one of ``pids`` is gone within ``within`` seconds (the kernel takes a moment)."""
    deadline = time.monotonic() + within
    while not all(gone(pid) for pid in pids):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def pids_in(path: Path) -> list[int]:
    return [int(line) for line in path.read_text().split()] if path.exists() else []


# --- no shell, only the allowlist, in the root -----------------------------------------------------------------

HOSTILE = [
    "; rm -rf x",
    "$(touch pwned)",
    "`touch pwned2`",
    "| cat",
    "> out",
    "&& touch and",
    "*",
    "~",
    "$HOME",
]


@pytest.mark.parametrize("argument", HOSTILE)
def test_arguments_reach_the_program_literally(tool: ShellTool, tmp_path: Path, argument: str) -> None:
    (tmp_path / "x").write_text("still here")
    result = tool.invoke(program="echo", args=[argument])
    assert result == {
        "program": "echo",
        "exit_code": 0,
        "stdout": argument + "\n",
        "stderr": "",
        "truncated": False,
    }
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x"]


def test_each_argument_is_one_argument(tool: ShellTool) -> None:
    result = tool.invoke(program="printf", args=["[%s]\\n", "a b", "; ls", "$(id)", ""])
    assert result["stdout"] == "[a b]\n[; ls]\n[$(id)]\n[]\n"


def test_only_allowlisted_programs_run(tool: ShellTool) -> None:
    assert tool.input_schema["properties"]["program"]["enum"] == PROGRAMS
    for program in ("rm", "sh", "/usr/bin/echo", "../echo", "./echo", "bin/echo", "echo "):
        assert program not in tool.input_schema["properties"]["program"]["enum"]
        with pytest.raises(ValidationError):
            tool.validate_input(program=program)
        with pytest.raises(ToolError, match="not one of the programs"):
            tool.invoke(program=program, args=[])


def test_the_schema_bounds_the_arguments(tool: ShellTool) -> None:
    assert tool.validate_input(program="echo", args=["a"] * MAX_ARGUMENTS)
    assert tool.input_schema["additionalProperties"] is False
    for bad in (
        {"program": "echo", "args": ["a"] * (MAX_ARGUMENTS + 1)},
        {"program": "echo", "args": ["a" * (MAX_ARGUMENT_CHARS + 1)]},
        {"program": "echo", "args": "a b"},
        {"program": "echo", "shell": True},
        {"args": ["a"]},
    ):
        with pytest.raises(ValidationError):
            tool.validate_input(**bad)
        with pytest.raises(ToolError):
            tool.invoke(**bad)


def test_an_argument_no_program_can_be_given_is_refused(tool: ShellTool) -> None:
    with pytest.raises(ToolError, match="NUL"):
        tool.invoke(program="echo", args=["a\x00b"])
    with pytest.raises(ToolError, match="surrogate"):
        tool.invoke(program="echo", args=["a\ud800b"])


def test_the_program_runs_in_the_root(tool: ShellTool, tmp_path: Path) -> None:
    result = python(tool, "import os; print(os.getcwd())")
    assert result["stdout"] == f"{tmp_path.resolve()}\n"
    (tmp_path / "notes.txt").write_text("hello\n")
    assert tool.invoke(program="cat", args=["notes.txt"])["stdout"] == "hello\n"


def test_a_non_zero_exit_is_a_result(tool: ShellTool) -> None:
    result = python(tool, "import sys; print('out'); sys.stderr.write('bad'); sys.exit(3)")
    assert result == {"program": PY, "exit_code": 3, "stdout": "out\n", "stderr": "bad", "truncated": False}
    assert tool.invoke(program="cat", args=["missing"])["exit_code"] == 1


def test_output_that_is_not_utf8_is_replaced(tool: ShellTool) -> None:
    result = python(tool, r"import sys; sys.stdout.buffer.write(b'ok \xff\xfe \xc3\xa9')")
    assert result["stdout"] == "ok \ufffd\ufffd \u00e9"


def test_stdin_is_empty(tool: ShellTool) -> None:
    assert tool.invoke(program="cat", args=[]) == {
        "program": "cat",
        "exit_code": 0,
        "stdout": "",
        "stderr": "",
        "truncated": False,
    }


def test_resources_name_the_program_and_every_path_resolved(tool: ShellTool, tmp_path: Path) -> None:
    """Every argument, and each word and option value in it, resolved against the root: relative to it, or
    absolute outside it (the rules policy's tests and test_policy_resources.py judge them)."""
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "a.txt").write_text("a")
    os.symlink("notes/a.txt", tmp_path / "link")
    arguments = {"program": "cat", "args": ["-n", "notes/./a.txt", "/etc/passwd", "../up", "b", "link"]}
    assert tool.resources(arguments) == {
        "program": ["cat"],
        "path": ["-n", "notes/a.txt", "/etc/passwd", str(tmp_path.parent / "up"), "b", "link"],
    }
    assert tool.resources({"program": "echo"}) == {"program": ["echo"], "path": []}
    found = tool.resources(
        {"program": "cat", "args": ["--file=notes//a.txt,x", "-fb", "HEAD:c", "https://h/d"]}
    )
    assert found["path"] == [
        "--file=notes/a.txt,x",
        "--file",
        "notes/a.txt",
        "x",
        "-fb",
        "b",
        "HEAD:c",
        "HEAD",
        "c",
        "https:/h/d",
    ]  # fmt: skip: a URL's words are not paths (the whole argument still is one)
    walked = tool.resources({"program": "grep", "args": ["-r", "x", "."]})["path"]
    assert set(walked) == {"-r", "x", ".", "notes", "notes/a.txt", "link"}


# --- programs that run others: git's options, and the first arguments a program may take --------------------

GIT = shutil.which("git", path=shell_plugin.SEARCH_PATH)
needs_git = pytest.mark.skipif(GIT is None, reason="git is not installed")


@needs_git
@pytest.mark.parametrize(
    "args",
    [
        ["-c", "alias.x=!touch pwned", "x"],
        ["-calias.x=!touch pwned", "x"],
        ["-C", ".", "-c", "core.pager=touch pwned", "log"],
        ["--config-env=alias.x=HOME", "x"],
        ["--exec-path=.", "status"],
        ["config", "alias.x", "!touch pwned"],
        ["submodule", "foreach", "touch pwned"],
        ["bisect", "run", "touch", "pwned"],
        ["difftool", "-x", "touch pwned"],
        ["clone", "--upload-pack=touch pwned", "a", "b"],
        ["clone", "--upload-p=touch pwned", "a", "b"],  # git takes any unambiguous abbreviation
        ["clone", "-u", "touch pwned", "a", "b"],
        ["clone", "-qu", "touch pwned", "a", "b"],
        ["clone", "--config", "core.sshCommand=touch pwned", "a", "b"],
        ["clone", "--template=.", "a", "b"],
        ["fetch", "--upload-pack", "touch pwned", "origin"],
        ["push", "--receive-pack=touch pwned", "origin"],
        ["rebase", "--exec", "touch pwned", "main"],
        ["rebase", "--exe=touch pwned", "main"],
        ["rebase", "-x", "touch pwned", "main"],
        ["archive", "--remote=x", "--exec=touch pwned", "HEAD"],
        ["grep", "-O", "touch pwned", "x"],
        ["grep", "--open-files-in-pager=touch pwned", "x"],
    ],
)
def test_git_options_that_run_programs_are_refused(make: Make, tmp_path: Path, args: list[str]) -> None:
    tool = make(programs=["git"])
    with pytest.raises(ToolError, match="is refused: it"):
        tool.invoke(program="git", args=args)
    assert not (tmp_path / "pwned").exists()


@needs_git
def test_git_runs_otherwise(make: Make, tmp_path: Path) -> None:
    tool = make(programs=["git"])
    assert tool.invoke(program="git", args=["--version"])["stdout"].startswith("git version")
    assert tool.invoke(program="git", args=["init", "-q", "."])["exit_code"] == 0
    (tmp_path / "a.txt").write_text("one\ntwo\n")
    for args in (["add", "a.txt"], ["grep", "-c", "--cached", "one"], ["diff", "-c"], ["status", "--short"]):
        assert tool.invoke(program="git", args=args)["exit_code"] == 0, args
    assert tool.invoke(program="git", args=["grep", "-c", "--cached", "one"])["stdout"] == "a.txt:1\n"


def test_subcommands_bind_the_first_argument(make: Make) -> None:
    tool = make(programs=["printf", "echo"], subcommands={"printf": ["%s", "[%s]"]})
    assert tool.description.endswith(" Allowed: printf only with %s, [%s] as its first argument.")
    assert tool.invoke(program="printf", args=["[%s]", "a"])["stdout"] == "[a]"
    assert tool.invoke(program="echo", args=["-n", "free"])["stdout"] == "free"
    for args in ([], ["%d", "1"], ["--", "%s"], ["-v", "x", "%s"]):
        with pytest.raises(ToolError, match=r"printf may be run only with one of %s, \[%s\] as its first"):
            tool.invoke(program="printf", args=args)


@pytest.mark.parametrize(
    ("subcommands", "message"),
    [
        ({"git": ["status"]}, "'git' is not one of programs"),
        ({"echo": []}, "must list the words echo may be run with first"),
        ({"echo": ["-n"]}, "subcommands, not options"),
    ],
)
def test_unusable_subcommands_are_config_errors(
    make: Make, subcommands: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        make(programs=["echo"], subcommands=subcommands)


# --- the environment -------------------------------------------------------------------------------------------


def environment(tool: ShellTool) -> dict[str, str]:
    result = tool.invoke(program="env", args=[])
    assert result["exit_code"] == 0
    return dict(line.split("=", 1) for line in result["stdout"].splitlines())


def test_the_environment_is_scrubbed(make: Make, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AEON_SHELL_CANARY", "tweet")
    monkeypatch.setenv("LD_PRELOAD", "/nonexistent.so")
    root = str(tmp_path.resolve())
    expected = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": root, "TMPDIR": root}
    assert environment(make()) == expected
    assert environment(make(env={"COLOR": "no", "LANG": "C"})) == {**expected, "COLOR": "no", "LANG": "C"}


def test_a_secret_reaches_the_program_and_nothing_else(make: Make) -> None:
    tool = make(env={"API_TOKEN": SecretStr(SECRET), "MODE": "test"}, timeout=1)
    result = python(
        tool, "import hashlib, os; print(hashlib.sha256(os.environ['API_TOKEN'].encode()).hexdigest())"
    )
    assert result["stdout"] == hashlib.sha256(SECRET.encode()).hexdigest() + "\n"
    shown = [
        repr(tool),
        str(tool),
        str(tool.model_dump()),
        json.dumps(tool.model_dump(mode="json")),
        tool.model_dump_json(),
        json.dumps(tool.describe()),
    ]
    assert all(SECRET not in text for text in shown) and "MODE" in shown[0]
    with pytest.raises(ToolError) as raised:
        tool.invoke(program="sleep", args=["5"])
    with pytest.raises(ToolError) as refused:
        tool.invoke(program="rm", args=[SECRET[:3]])
    assert SECRET not in str(raised.value) + str(refused.value)
    assert SECRET not in scrub_secrets(f"the token is {SECRET}")  # registered when the tool was built


def test_a_secret_env_value_is_never_quoted_in_a_config_error(make: Make) -> None:
    with pytest.raises(ConfigError, match="NUL") as raised:
        make(env={"API_TOKEN": SecretStr("abc-\x00-defghij")})
    assert "abc" not in str(raised.value) and "defghij" not in str(raised.value)


# --- limits ----------------------------------------------------------------------------------------------------


def timed(call: Callable[[], Any]) -> tuple[Any, float]:
    started = time.monotonic()
    try:
        outcome: Any = call()
    except ToolError as exc:
        outcome = exc
    return outcome, time.monotonic() - started


def test_the_timeout_stops_the_program(make: Make) -> None:
    tool = make(timeout=1)
    error, elapsed = timed(lambda: tool.invoke(program="sleep", args=["30"]))
    assert isinstance(error, ToolError), error
    assert "timeout = 1 s" in str(error) and "[tools.shell]" in str(error)
    assert 1 <= elapsed < 3


def test_the_cpu_limit_stops_a_busy_loop(make: Make) -> None:
    tool = make(cpu_seconds=1, timeout=8)
    error, elapsed = timed(lambda: python(tool, "while True: pass"))
    assert isinstance(error, ToolError), error
    assert "cpu_seconds = 1 s" in str(error) and "timeout" not in str(error)
    assert elapsed < 6  # 1 s of CPU: about 1 s of wall time unless the machine is busy


def test_the_cpu_limit_is_enforced_even_if_sigxcpu_is_ignored(make: Make) -> None:
    tool = make(cpu_seconds=1, timeout=8)
    code = "import signal; signal.signal(signal.SIGXCPU, signal.SIG_IGN)\nwhile True: pass"
    error, elapsed = timed(lambda: python(tool, code))
    assert isinstance(error, ToolError) and "cpu_seconds" in str(error), error
    assert elapsed < 7  # the hard limit, a second later: SIGKILL


def test_the_memory_limit_fails_a_large_allocation(make: Make) -> None:
    tool = make(memory_mb=256)
    result, elapsed = timed(lambda: python(tool, "b = bytearray(2 * 1024**3)"))
    assert result["exit_code"] == 1 and "MemoryError" in result["stderr"]
    assert python(tool, "b = bytearray(64 * 1024**2); print(len(b))")["stdout"] == f"{64 * 1024**2}\n"
    assert elapsed < 3


def test_an_output_flood_is_cut_and_the_program_stopped(make: Make) -> None:
    tool = make(max_output_bytes=10_000, timeout=5)
    result, elapsed = timed(lambda: tool.invoke(program="yes", args=[]))
    assert result["truncated"] is True and result["exit_code"] == -signal.SIGKILL
    assert result["stdout"] == "y\n" * 5000 and result["stderr"] == ""
    assert elapsed < 2
    result, elapsed = timed(lambda: python(tool, "import sys\nwhile True: sys.stderr.write('e' * 1000)"))
    assert result["truncated"] is True and result["stderr"] == "e" * 10_000
    assert elapsed < 2


def test_output_up_to_the_limit_is_not_truncated(make: Make) -> None:
    result = python(make(max_output_bytes=10_000), "print('x' * 9999)")
    assert result["truncated"] is False and len(result["stdout"]) == 10_000


def test_the_file_size_limit(make: Make, tmp_path: Path) -> None:
    dd = shutil.which("dd", path="/usr/bin:/bin")
    if dd is None:
        pytest.skip("no dd")
    tool = make(programs=["dd", PY], max_file_bytes=1_000_000)
    error = timed(
        lambda: tool.invoke(program="dd", args=["if=/dev/zero", "of=big", "bs=100000", "count=20"])
    )[0]
    assert isinstance(error, ToolError) and "max_file_bytes = 1,000,000" in str(error), error
    assert (tmp_path / "big").stat().st_size <= 1_000_000
    # Python ignores SIGXFSZ: it sees the error (EFBIG) and exits with it, a result
    result = python(tool, "open('big2', 'wb').write(bytes(2_000_000))")
    assert result["exit_code"] == 1 and "File too large" in result["stderr"]


def test_no_core_files_and_the_limits_the_program_sees(make: Make) -> None:
    tool = make(cpu_seconds=3, memory_mb=300, max_file_bytes=12345, max_processes=7)
    code = """
        import resource as r
        for name in ('RLIMIT_CPU', 'RLIMIT_AS', 'RLIMIT_FSIZE', 'RLIMIT_CORE', 'RLIMIT_NPROC'):
            print(*r.getrlimit(getattr(r, name)))
    """
    assert python(tool, code)["stdout"].split("\n")[:5] == [
        "3 4",
        f"{300 * 2**20} {300 * 2**20}",
        "12345 12345",
        "0 0",
        "7 7",
    ]


FORK_AND_SLEEP = """
    import os, signal, sys, time
    for _ in range(20):
        if os.fork() == 0:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            with open('pids', 'a') as file:
                file.write(f'{os.getpid()}\\n')
            time.sleep(1000)
            os._exit(0)
    time.sleep(1000)
"""


def test_the_timeout_kills_every_process_the_program_started(make: Make, tmp_path: Path) -> None:
    tool = make(timeout=1.5)
    error, elapsed = timed(lambda: python(tool, FORK_AND_SLEEP))
    assert isinstance(error, ToolError) and "timeout" in str(error), error
    assert elapsed < 3.5
    pids = pids_in(tmp_path / "pids")
    assert len(pids) == 20
    assert all_gone(pids)


@pytest.mark.parametrize("output", ["inherited", "elsewhere"])
def test_what_the_program_leaves_behind_is_killed_when_it_exits(
    make: Make, tmp_path: Path, output: str
) -> None:
    """A child left running (holding the output pipes, or not) is killed as soon as the program exits, and the
    call does not wait for the timeout."""
    tool = make(timeout=8)
    redirect = "" if output == "inherited" else ", stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL"
    code = f"""
        import subprocess
        child = subprocess.Popen(['sleep', '30']{redirect})
        open('child', 'w').write(str(child.pid))
        print('left', child.pid)
    """
    result, elapsed = timed(lambda: python(tool, code))
    (pid,) = pids_in(tmp_path / "child")
    assert result["exit_code"] == 0 and result["stdout"] == f"left {pid}\n"
    assert elapsed < 2
    assert all_gone([pid])


def test_a_process_that_leaves_the_group_escapes_it(make: Make, tmp_path: Path) -> None:
    """The documented limitation: ``setsid`` leaves the group, so the group kill misses it (cgroups would not).
    The call still returns: it waits DRAIN_SECONDS at most for the pipes the escapee holds."""
    tool = make(timeout=8)
    code = """
        import os, time
        if os.fork() == 0:
            os.setsid()
            open('escaped', 'w').write(str(os.getpid()))
            time.sleep(30)
            os._exit(0)
        while not os.path.exists('escaped'):
            time.sleep(0.01)
    """
    result, elapsed = timed(lambda: python(tool, code))
    (pid,) = pids_in(tmp_path / "escaped")
    try:
        assert result["exit_code"] == 0
        assert elapsed < DRAIN_SECONDS + 2
        assert not gone(pid)
    finally:
        os.kill(pid, signal.SIGKILL)


@pytest.mark.skipif(not AS_ROOT, reason="shows what root is not limited by")
def test_as_root_max_processes_does_not_hold(make: Make) -> None:
    """RLIMIT_NPROC is not enforced for root: only the timeout and the group kill bound a fork bomb."""
    code = """
        import os
        made = 0
        for _ in range(20):
            pid = os.fork()
            if pid == 0:
                os._exit(0)
            os.waitpid(pid, 0)
            made += 1
        print(made)
    """
    assert python(make(max_processes=2), code)["stdout"] == "20\n"


def unprivileged_python() -> str | None:
    """A Python an unprivileged user can run (this one may be under /root)."""
    for candidate in ("/usr/bin/python3", "/usr/local/bin/python3"):
        if os.access(candidate, os.X_OK):
            return candidate
    return None


@pytest.fixture
def nobody(tmp_path: Path) -> Iterator[str]:
    if not AS_ROOT:
        pytest.skip("only root can run programs as another user")
    try:
        pwd.getpwnam("nobody")
    except KeyError:
        pytest.skip("no user nobody")
    if unprivileged_python() is None:
        pytest.skip("no Python that nobody can run")
    tmp_path.chmod(0o777)  # the root must be usable by the user the programs run as
    yield "nobody"


def test_programs_can_run_as_another_user(make: Make, nobody: str) -> None:
    system_python = unprivileged_python()
    assert system_python is not None
    entry = pwd.getpwnam(nobody)
    tool = make(programs=[system_python], user=nobody)
    result = tool.invoke(
        program=system_python, args=["-c", "import os; print(os.getuid(), os.getgid(), os.getgroups())"]
    )
    assert result["stdout"] == f"{entry.pw_uid} {entry.pw_gid} []\n"


def test_as_another_user_max_processes_holds(make: Make, nobody: str) -> None:
    system_python = unprivileged_python()
    assert system_python is not None
    tool = make(programs=[system_python], user=nobody, max_processes=5, timeout=3)
    code = """
        import os, time
        made = 0
        for _ in range(20):
            try:
                if os.fork() == 0:
                    time.sleep(30)
                    os._exit(0)
            except BlockingIOError:
                break
            made += 1
        print(made)
    """
    result = tool.invoke(program=system_python, args=["-c", textwrap.dedent(code)])
    assert result["exit_code"] == 0 and int(result["stdout"]) < 5  # the program itself is one of the five


# --- building --------------------------------------------------------------------------------------------------


def test_nothing_is_checked_until_granted() -> None:
    tool = ShellTool()
    assert tool.granted == frozenset() and tool.programs == [] and tool.root is None
    assert tool.timeout == 10 and tool.cpu_seconds == 10 and tool.memory_mb == 1024
    assert tool.max_output_bytes == 1_000_000 and tool.max_processes == 64


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"programs": []}, "needs programs"),
        ({"root": None}, "needs a root"),
        ({"root": "/nonexistent/aeon"}, "not an existing directory"),
        ({"root": "/"}, "system directory"),
        ({"root": "/proc"}, "system directory"),
        ({"root": "/dev/shm"}, "system directory"),
        ({"programs": ["no-such-program-aeon"]}, "not an executable file"),
        ({"programs": ["/etc/passwd"]}, "not an executable file"),
        ({"programs": ["bin/echo"]}, "neither a program's name nor an absolute path"),
        ({"programs": ["../echo"]}, "neither a program's name nor an absolute path"),
        ({"env": {"NOT-A-NAME": "x"}}, "not a variable name"),
        ({"env": {"A": "x\x00y"}}, "NUL"),
        ({"user": "no-such-user-aeon"}, "not an account"),
    ],
)
def test_unusable_options_are_config_errors(make: Make, options: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        make(**options)


def test_programs_are_resolved_once_to_absolute_paths(make: Make) -> None:
    tool = make(programs=["echo", "echo", PY])
    assert tool.input_schema["properties"]["program"]["enum"] == ["echo", PY]
    assert tool.invoke(program="echo", args=["once"])["stdout"] == "once\n"
    assert tool.example == {"program": "echo", "args": ["--version"]}


def test_the_engine_builds_it_only_when_granted(tmp_path: Path) -> None:
    config = {"tools": {"shell": {"grant": ["run"], "programs": ["echo"], "root": str(tmp_path)}}}
    engine = Engine(parse_config(config), plugins=[shell_plugin])
    tool = engine.tools.get("shell")
    assert isinstance(tool, ShellTool) and tool.granted == {"run"}
    assert tool.invoke(program="echo", args=["wired"])["stdout"] == "wired\n"
    assert "shell" not in [t.name for t in Engine(parse_config({}), plugins=[shell_plugin]).tools]


def test_a_secret_reference_in_aeon_toml_reaches_the_program(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AEON_SHELL_TEST_TOKEN", SECRET + "-toml")
    options: dict[str, Any] = {"grant": ["run"], "programs": [PY], "root": str(tmp_path)}
    options["env"] = {"API_TOKEN": {"$env": "AEON_SHELL_TEST_TOKEN"}}
    tool = Engine(parse_config({"tools": {"shell": options}}), plugins=[shell_plugin]).tools.get("shell")
    assert isinstance(tool, ShellTool) and isinstance(tool.env["API_TOKEN"], SecretStr)
    assert SECRET not in repr(tool) + tool.model_dump_json()
    result = python(tool, "import os; print(len(os.environ['API_TOKEN']))")
    assert result["stdout"] == f"{len(SECRET + '-toml')}\n"


def test_through_the_kernel(make: Make, tmp_path: Path) -> None:
    """A call past its timeout fails with the tool's own message (the kernel, which holds every call to the
    tool's timeout too, waits a little longer for a tool that enforces it), the program stopped; an ungranted
    tool is refused before anything runs."""
    context = ToolContext("run-1", "step-1")
    assert invoke_tool(make(), {"program": "echo", "args": ["hi"]}, context).result == {
        "program": "echo",
        "exit_code": 0,
        "stdout": "hi\n",
        "stderr": "",
        "truncated": False,
    }
    code = "import os, time; open('pid', 'w').write(str(os.getpid())); time.sleep(30)"
    call = invoke_tool(make(timeout=1), {"program": PY, "args": ["-c", code]}, context)
    assert call.error is not None and call.error["type"] == "ToolError"
    assert "did not finish within timeout = 1 s" in call.error["message"]
    assert all_gone(pids_in(tmp_path / "pid"), within=2)
    refused = invoke_tool(ShellTool(programs=["echo"]), {"program": "echo"}, context)
    assert refused.error is not None and refused.error["type"] == PermissionDeniedError.__name__


def echo_tool() -> ShellTool:
    return ShellTool(granted=frozenset({"run"}), programs=["echo"], root=Path(tempfile.gettempdir()))


TestShellConformance = tool_conformance(echo_tool)
