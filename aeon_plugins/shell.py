"""The ``shell`` tool: run one of an allowlist of programs with arguments, in a root directory, within limits
(issue 17).

Off until granted: ``[tools.shell] grant = ["run"]``, ``programs = ["git", "python3"]`` and ``root = "workspace"``.

Never through a shell: the program is executed directly with the arguments as given, so ``;``, ``|``, ``>``,
``$(...)`` and backticks are plain text. Each program is looked up once, when the tool is built, in
:data:`SEARCH_PATH` (or given as an absolute path) and run by that absolute path; the model chooses among the names
as the user wrote them and nothing else. The allowlist is only as narrow as its programs: many run others —
``env``, ``xargs``, ``find -exec``, ``awk``, ``sed`` (its ``e`` command), ``python3``, ``sh``, ``bash``, ``ssh``,
``make``, ``npm``, ``pip``, ``git`` (``git -c alias.x='!id' x``, and the commands its repository's configuration and
hooks name) — and then the model can run anything. ``subcommands = { git = ["status", "log", "diff"] }`` allows a
program only with one of those words as its first argument; and for ``git`` the options that name a program or
configuration to run (``-c``, ``--config-env``, ``--exec-path=``, ``--upload-pack``, ``--receive-pack``,
``--exec``, ``--extcmd``, ``--config``, ``--template``, ``--open-files-in-pager``, their abbreviations, ``clone
-u``, ``rebase -x``, ``grep -O``) and the subcommands that run programs or rewrite configuration (``config``,
``submodule``, ``bisect``, ``difftool``, ``mergetool``, ``filter-branch``, ``send-email``...) are always refused: a
deny list, so a help, not a guarantee — list the subcommands you need.

What a call touches, for policies (``resources``): every argument, each word within it (split at whitespace,
quotes and ``= : , ; @`` and the like: ``--file=a``, ``HEAD:a``, ``-d @a``), and each value a short option may
carry (``-fa``) is a path; a URL is not, except a ``file:`` one. Each is resolved against the root as the program
would: ``..`` normalised, symbolic links followed (``realpath``), absolute paths as such, ``~`` as the root (the
programs' ``HOME``); and a glob (which no shell expands, but some programs do) is expanded. Each is reported
relative to the root — both as written and as resolved — or, outside it, as an absolute path; a directory is
reported with everything beneath it (links followed), up to :data:`MAX_WALK_ENTRIES`. What cannot be worked out (a
larger tree, a glob with more than :data:`MAX_GLOB_MATCHES` matches, an unreadable directory, arguments holding
more than :data:`MAX_CANDIDATE_CHARS` characters of possible paths) is reported as ``unresolved``, which the
``rules`` policy refuses while any path rule applies to the call. This binds what the arguments name, not what a
program computes (``python3 -c``) or reads by itself: a program run without a path reads the working directory
(``grep -r x``, ``find``), so keep what a path rule protects outside the root.

The root is the working directory, not a jail: a program may open any path its user can. Set ``user`` to run the
programs as an unprivileged account (``user = "nobody"``, which must then be able to use the root). The
environment is built from nothing: ``PATH`` (:data:`SEARCH_PATH`), ``LANG=C.UTF-8``, and ``HOME`` and ``TMPDIR``
set to the root (so what a program keeps for itself or writes as a temporary file stays in the workspace), plus
``[tools.shell] env``, which may override them; a credential there is a reference (``{ "$env" = "TOKEN" }``),
registered as a secret, so the scrubbers hide it and the tool's repr shows ``**********``.

Limits, set with ``setrlimit`` in the child before it runs (``preexec_fn``; the function only calls
``setrlimit`` with values computed beforehand, so it takes no lock another thread could hold): ``cpu_seconds`` of
CPU per process (``SIGXCPU``, then ``SIGKILL`` a second later), ``memory_mb`` of address space (an allocation
beyond it fails: Python's ``MemoryError``, C's ``NULL``; runtimes that reserve much more address space than they
use, such as Go, Java or Node, need a larger value), ``max_file_bytes`` per file written (``SIGXFSZ``), no core
files, and ``max_processes`` (``RLIMIT_NPROC``). ``RLIMIT_NPROC`` counts every process of the user, not of this
call, and is not enforced at all for root: running as root without ``user``, a fork bomb is bounded only by the
timeout and the group kill below.

The program runs in a new session (its own process group). Its output is read as it comes, each stream up to
``max_output_bytes``: past that the program is stopped and the result says ``truncated``. At ``timeout`` seconds,
or as soon as the program itself exits, the whole group is killed (``SIGKILL``), so nothing it started runs on;
the group is killed before the program is reaped, so its number cannot have been reused. A process that leaves the
group (``setsid``, ``setpgid``: daemons, job-control shells) escapes this: only cgroups or a container catch it.

A non-zero exit is a result (``exit_code``; negative: killed by that signal); hitting the timeout, the CPU limit or
the file-size limit, or failing to start, is a ToolError that says which limit and how to raise it. ``timeout`` is
the :class:`~aeon_kernel.Tool` field the kernel also holds a call to; the tool ``enforces_timeout``, so the kernel
waits a little longer and the tool's own message is the one recorded.
"""

from __future__ import annotations

import contextlib
import glob
import itertools
import os
import pwd
import re
import resource
import selectors
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar, Final

from pydantic import Field, PrivateAttr, SecretStr, model_validator

from aeon_kernel import ConfigError, Register, Tool, ToolError, hookimpl
from aeon_kernel.kit import is_utf8, register_secret, workspace_root

#: where program names are looked up, and the ``PATH`` the programs get
SEARCH_PATH: Final = "/usr/local/bin:/usr/bin:/bin"
MAX_ARGUMENTS: Final = 64
MAX_ARGUMENT_CHARS: Final = 4096
#: after the program exits (and its group is killed), how long to wait for the end of its output: only a process
#: that escaped the group can hold the pipes open longer
DRAIN_SECONDS: Final = 1.0
#: how often to look whether the program exited, where a pidfd cannot tell
_POLL_SECONDS: Final = 0.02
_READ_BYTES: Final = 65536
_ENV_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_EXIT: Final = "exit"
#: at most this many entries beneath the directories a call names are looked at for policies; past it, what the
#: call touches is ``unresolved``
MAX_WALK_ENTRIES: Final = 10_000
#: at most this many matches of a glob in an argument; past it, ``unresolved``
MAX_GLOB_MATCHES: Final = 1_000
#: at most this many characters of possible paths (``-aaaa...`` holds a path at each letter) are resolved for a
#: call; past it, its arguments are ``unresolved``
MAX_CANDIDATE_CHARS: Final = 1_000_000
#: where an argument is split into the words that may each be a path
_WORD_SEPARATORS: Final = re.compile(r"[\s=:,;'\"()<>|&`@$]+")
_URL: Final = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*)://([^\s'\"]*)")
_GLOB: Final = re.compile(r"[*?\[]")
#: git's options that name a program or configuration for it to run (long options are refused by any
#: abbreviation git would accept too), the short ones by subcommand, and the subcommands that run programs or
#: rewrite the configuration others then run
_GIT_OPTIONS: Final = (
    "config-env",
    "exec-path",
    "upload-pack",
    "receive-pack",
    "exec",
    "extcmd",
    "config",
    "template",
    "open-files-in-pager",
)
_GIT_SHORT: Final = {"clone": "u", "rebase": "x", "grep": "O", "ls-remote": "u", "archive": "x"}
_GIT_SUBCOMMANDS: Final = frozenset(
    {
        "config",
        "submodule",
        "bisect",
        "difftool",
        "mergetool",
        "filter-branch",
        "filter-repo",
        "send-email",
        "daemon",
        "instaweb",
        "web--browse",
        "help",
        "credential",
        "upload-pack",
        "receive-pack",
        "upload-archive",
        "shell",
        "remote-ext",
        "remote-fd",
        "run-command",
        "hook",
    }
)
#: git's global options that take the next argument as their value
_GIT_GLOBAL_VALUES: Final = frozenset({"-C", "--git-dir", "--work-tree", "--namespace", "--super-prefix"})


def input_schema(programs: list[str]) -> dict[str, Any]:
    """The arguments, with only the allowlisted ``programs`` (a model cannot ask for another)."""
    return {
        "type": "object",
        "properties": {
            "program": {"type": "string", "enum": programs},
            "args": {
                "type": "array",
                "items": {"type": "string", "maxLength": MAX_ARGUMENT_CHARS},
                "maxItems": MAX_ARGUMENTS,
            },
        },
        "required": ["program"],
        "additionalProperties": False,
    }


OUTPUT_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        "program": {"type": "string"},
        "exit_code": {"type": "integer"},
        "stdout": {"type": "string"},
        "stderr": {"type": "string"},
        "truncated": {"type": "boolean"},
    },
    "required": ["program", "exit_code", "stdout", "stderr", "truncated"],
    "additionalProperties": False,
}


class ShellTool(Tool):
    #: at ``timeout`` the tool kills the command itself and says so; the kernel waits a little longer
    enforces_timeout: ClassVar[bool] = True
    name: str = "shell"
    description: str = (
        "Run one of the allowed programs with arguments in the workspace (never through a shell: no pipes, "
        "redirections or variables). Returns exit_code, stdout and stderr; truncated is true when the output "
        "was too long and the program was stopped."
    )
    input_schema: dict[str, Any] = input_schema([])
    output_schema: dict[str, Any] = OUTPUT_SCHEMA
    example: dict[str, Any] | None = None
    permissions: dict[str, str] = {"run": "run the allowlisted programs in the root"}
    #: program names (looked up in SEARCH_PATH) or absolute paths; required once granted
    programs: list[str] = []
    #: the programs' working directory; required once granted
    root: Path | None = None
    #: wall seconds a call may take (the Tool field the kernel holds calls to, enforced here by a group kill)
    timeout: float = Field(default=10, gt=0)
    cpu_seconds: int = Field(default=10, gt=0)
    memory_mb: int = Field(default=1024, gt=0)
    max_output_bytes: int = Field(default=1_000_000, gt=0)
    max_file_bytes: int = Field(default=100_000_000, gt=0)
    max_processes: int = Field(default=64, gt=0)
    #: variables added to the programs' (otherwise empty) environment; secrets arrive as SecretStr
    env: dict[str, str | SecretStr] = {}
    #: the account to run the programs as (root only); the programs' own user when unset
    user: str | None = None
    #: program -> the first arguments it may be run with (``git = ["status", "log", "diff"]``); others run with any
    subcommands: dict[str, list[str]] = {}

    _paths: dict[str, str] = PrivateAttr(default_factory=dict)
    _account: tuple[int, int] | None = PrivateAttr(default=None)

    @model_validator(mode="before")
    @classmethod
    def _schema_for_programs(cls, data: Any) -> Any:
        if isinstance(data, dict) and "input_schema" not in data:
            programs = data.get("programs")
            if isinstance(programs, list) and programs and all(isinstance(p, str) for p in programs):
                names = list(dict.fromkeys(programs))
                data = {**data, "input_schema": input_schema(names)}
                data.setdefault("example", {"program": names[0], "args": ["--version"]})
        subcommands = data.get("subcommands") if isinstance(data, dict) else None
        if isinstance(subcommands, dict) and subcommands and "description" not in data:
            rules = "; ".join(
                f"{name} only with {', '.join(map(str, words))} as its first argument"
                for name, words in subcommands.items()
                if isinstance(words, list)
            )
            data = {**data, "description": f"{cls.model_fields['description'].default} Allowed: {rules}."}
        return data

    @model_validator(mode="after")
    def _usable_options(self) -> ShellTool:
        for value in self.env.values():
            if isinstance(value, SecretStr):
                register_secret(value.get_secret_value())
        if not self.granted:
            return self
        if not self.programs:
            raise ConfigError('the shell tool needs programs to run: set programs = ["..."] in [tools.shell]')
        object.__setattr__(self, "root", workspace_root(self.root, "shell"))
        self._paths = {name: _program_path(name) for name in self.programs}
        for name, value in self.env.items():
            shown = "its value" if isinstance(value, SecretStr) else repr(value)
            if not _ENV_NAME.fullmatch(name):
                raise ConfigError(
                    f"[tools.shell] env: {name!r} is not a variable name (letters, digits, '_')"
                )
            if "\x00" in (value.get_secret_value() if isinstance(value, SecretStr) else value):
                raise ConfigError(f"[tools.shell] env: {shown} of {name} holds a NUL byte")
        self._account = _account(self.user)
        for name, words in self.subcommands.items():
            if name not in self._paths:
                raise ConfigError(f"[tools.shell] subcommands: {name!r} is not one of programs")
            if not words or not all(w and not w.startswith("-") for w in words):
                raise ConfigError(
                    f"[tools.shell] subcommands.{name} must list the words {name} may be run with first "
                    '(subcommands, not options), e.g. ["status", "log"]'
                )
        return self

    def resources(self, arguments: dict[str, Any]) -> dict[str, list[str]]:
        """The program, and every path its arguments may name, resolved against the root (see the module's
        docstring): relative to the root, or absolute outside it; what cannot be worked out, ``unresolved``."""
        assert self.root is not None  # judged only when granted
        touched = _Touched(str(self.root))
        budget = MAX_CANDIDATE_CHARS
        for argument in arguments.get("args", []):
            if not isinstance(argument, str):
                continue
            candidates = [c for c in path_candidates(argument) if c not in touched.tried]
            budget -= sum(map(len, candidates))
            if budget < 0:
                touched.unresolved[_short(argument)] = None
                break
            for candidate in candidates:
                touched.add(candidate)
        found: dict[str, list[str]] = {"program": [arguments["program"]], "path": list(touched.paths)}
        if touched.unresolved:
            found["unresolved"] = list(touched.unresolved)
        return found

    def invoke(self, **kwargs: Any) -> dict[str, Any]:
        unknown = sorted(set(kwargs) - {"program", "args"})
        if unknown:
            raise ToolError(f"unknown arguments {', '.join(map(repr, unknown))}: give only program and args")
        name, args = kwargs.get("program"), kwargs.get("args", [])
        if not isinstance(name, str) or name not in self._paths:
            allowed = ", ".join(self._paths) or "none"
            raise ToolError(f"{name!r} is not one of the programs this tool may run ({allowed})")
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            raise ToolError("args must be a list of strings")
        if len(args) > MAX_ARGUMENTS or any(len(a) > MAX_ARGUMENT_CHARS for a in args):
            raise ToolError(
                f"at most {MAX_ARGUMENTS} arguments of at most {MAX_ARGUMENT_CHARS} characters each"
            )
        if any("\x00" in a for a in args):
            raise ToolError("an argument holds a NUL byte, which no program can be given; remove it")
        if not all(is_utf8(a) for a in args):
            raise ToolError("an argument holds a lone surrogate, which has no UTF-8 form; remove it")
        first_words = self.subcommands.get(name)
        if first_words is not None and (not args or args[0] not in first_words):
            raise ToolError(
                f"{name} may be run only with one of {', '.join(first_words)} as its first argument (subcommands in "
                f"[tools.shell]); {_first(args)} is not one of them"
            )
        if "git" in (name, os.path.basename(self._paths[name])):
            _check_git(args)
        exit_code, stdout, stderr, truncated = self._run(name, args)
        return {
            "program": name,
            "exit_code": exit_code,
            "stdout": stdout.decode("utf-8", "replace"),
            "stderr": stderr.decode("utf-8", "replace"),
            "truncated": truncated,
        }

    # --- running -----------------------------------------------------------------------------------------------

    def _run(self, name: str, args: list[str]) -> tuple[int, bytes, bytes, bool]:
        """Run the program and read its output; the group is killed and the program reaped whatever happens."""
        assert self.root is not None  # set once anything is granted, and nothing runs ungranted
        account: dict[str, Any] = {}
        if self._account is not None:  # the user's own group, and none of this process's other groups
            account = {"user": self._account[0], "group": self._account[1], "extra_groups": []}
        started = time.monotonic()
        try:
            process = subprocess.Popen(  # noqa: S603 - an allowlisted program, by absolute path, with no shell
                [self._paths[name], *args],
                cwd=self.root,
                env=self._environment(),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
                close_fds=True,
                preexec_fn=_limiter(self._limits()),  # setrlimit only: see the module docstring
                **account,
            )
        except OSError as exc:
            raise ToolError(
                f"{name} could not be started ({self._paths[name]}): {exc.strerror or exc}; check that it still "
                "exists and is executable, and that its arguments are not too long"
            ) from None
        except subprocess.SubprocessError:
            raise ToolError(f"{name} could not be started: its limits could not be set") from None
        assert process.stdout is not None and process.stderr is not None
        out, err = bytearray(), bytearray()
        stopped = timed_out = truncated = False
        try:
            exited, timed_out, truncated = self._read(process, out, err, started + self.timeout)
            stopped = not exited
        finally:
            _kill_group(process.pid)  # before the program is reaped: its number, the group's, is still taken
            code, cpu = _reap(process)
            process.stdout.close()
            process.stderr.close()
        if timed_out:
            raise ToolError(
                f"{name} did not finish within timeout = {self.timeout:g} s and was stopped, with every process "
                f"it started; if it needs longer, raise it (e.g. timeout = {max(30, 3 * self.timeout):g} in "
                "[tools.shell])"
            )
        if code == -signal.SIGXCPU or (code == -signal.SIGKILL and not stopped and cpu >= self.cpu_seconds):
            raise ToolError(
                f"{name} used its cpu_seconds = {self.cpu_seconds} s of CPU time and was stopped; if it needs "
                f"more, raise it (e.g. cpu_seconds = {3 * self.cpu_seconds} in [tools.shell])"
            )
        if code == -signal.SIGXFSZ:
            raise ToolError(
                f"{name} tried to write a file larger than max_file_bytes = {self.max_file_bytes:,} and was "
                "stopped; if it must, raise max_file_bytes in [tools.shell]"
            )
        if code is None:
            raise ToolError(
                f"{name}'s exit status was taken by another part of this process (is SIGCHLD ignored?)"
            )
        return code, bytes(out), bytes(err), truncated

    def _read(
        self, process: subprocess.Popen[bytes], out: bytearray, err: bytearray, deadline: float
    ) -> tuple[bool, bool, bool]:
        """Read both streams until they end and the program has exited, a stream passes ``max_output_bytes`` or
        ``deadline`` comes. Kills the group as soon as the program exits. Answers (exited, timed out, truncated).
        """
        assert process.stdout is not None and process.stderr is not None
        pidfd = _pidfd(process.pid)
        exited = False
        try:
            with selectors.DefaultSelector() as selector:
                for stream, buffer in ((process.stdout, out), (process.stderr, err)):
                    os.set_blocking(stream.fileno(), False)
                    selector.register(stream.fileno(), selectors.EVENT_READ, buffer)
                if pidfd is not None:
                    selector.register(pidfd, selectors.EVENT_READ, _EXIT)
                while True:
                    now = time.monotonic()
                    if not exited and (pidfd is None and _has_exited(process.pid)):
                        exited, deadline = True, min(deadline, now + DRAIN_SECONDS)
                        _kill_group(process.pid)
                    if exited and len(selector.get_map()) == 0:
                        return True, False, False
                    if now >= deadline:
                        return exited, not exited, False
                    wait = deadline - now if pidfd is not None else min(deadline - now, _POLL_SECONDS)
                    for key, _ in selector.select(wait):
                        if key.data is _EXIT:
                            selector.unregister(key.fd)
                            exited, deadline = True, min(deadline, time.monotonic() + DRAIN_SECONDS)
                            _kill_group(process.pid)
                            continue
                        try:
                            chunk = os.read(key.fd, _READ_BYTES)
                        except BlockingIOError:
                            continue
                        if not chunk:
                            selector.unregister(key.fd)
                            continue
                        buffer = key.data
                        room = self.max_output_bytes - len(buffer)
                        buffer += chunk[:room]
                        if len(chunk) > room:
                            return exited, False, True
        finally:
            if pidfd is not None:
                os.close(pidfd)

    def _environment(self) -> dict[str, str]:
        """Nothing from this process's environment: the documented variables and ``env``."""
        root = str(self.root)
        return {
            "PATH": SEARCH_PATH,
            "LANG": "C.UTF-8",
            "HOME": root,
            "TMPDIR": root,
            **{k: v.get_secret_value() if isinstance(v, SecretStr) else v for k, v in self.env.items()},
        }

    def _limits(self) -> list[tuple[int, tuple[int, int]]]:
        """The (soft, hard) limits to set, never above the hard limits this process has (which only root may
        raise)."""
        wanted = [
            (resource.RLIMIT_CPU, self.cpu_seconds, self.cpu_seconds + 1),
            (resource.RLIMIT_AS, self.memory_mb * 2**20, self.memory_mb * 2**20),
            (resource.RLIMIT_FSIZE, self.max_file_bytes, self.max_file_bytes),
            (resource.RLIMIT_CORE, 0, 0),
            (resource.RLIMIT_NPROC, self.max_processes, self.max_processes),
        ]
        limits = []
        for kind, soft, hard in wanted:
            ceiling = resource.getrlimit(kind)[1]
            if ceiling != resource.RLIM_INFINITY:
                hard = min(hard, ceiling)
            limits.append((kind, (min(soft, hard), hard)))
        return limits


def path_candidates(argument: str) -> list[str]:
    """Every text in ``argument`` that a program may read as a path: the argument, each word of it, and what a
    short option may carry (``-xfa`` -> ``fa``, ``a``: options and a value, read every way); URLs left out, a
    ``file:`` URL's path kept."""

    def unurl(match: re.Match[str]) -> str:
        if match.group(1).lower() != "file":
            return " "
        rest = match.group(2)
        return " " + (rest if rest.startswith("/") else "/" + rest.partition("/")[2]) + " "

    words = [argument, *_WORD_SEPARATORS.split(_URL.sub(unurl, argument))]
    candidates: list[str] = []
    for word in words:
        if not word:
            continue
        candidates.append(word)
        if word.startswith("-") and not word.startswith("--"):
            end = 1
            while end < len(word) and word[end].isalnum():
                end += 1
                candidates.append(word[end:])
    return [c for c in dict.fromkeys(candidates) if c]


class _Touched:
    """The paths a call's arguments resolve to under ``root`` (relative) or outside it (absolute), directories
    with what is beneath them, and what could not be resolved."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.paths: dict[str, None] = {}
        self.unresolved: dict[str, None] = {}
        self.walked = 0
        self.seen: set[str] = set()
        self.tried: set[str] = set()

    def add(self, candidate: str) -> None:
        self.tried.add(candidate)
        try:
            if candidate == "~" or candidate.startswith("~/"):
                self._resolve(candidate[2:] or ".")  # the programs' HOME is the root
            elif candidate.startswith("~"):
                self._resolve(os.path.expanduser(candidate))
            if _GLOB.search(candidate):
                found = glob.iglob(candidate, root_dir=self.root, recursive=True, include_hidden=True)
                matches = list(itertools.islice(found, MAX_GLOB_MATCHES + 1))
                if len(matches) > MAX_GLOB_MATCHES:
                    self.unresolved[candidate] = None
                for match in matches[:MAX_GLOB_MATCHES]:
                    self._resolve(match)
            self._resolve(candidate)
        except (OSError, ValueError):
            self.unresolved[candidate] = None

    def _shown(self, path: str) -> str:
        if path == self.root:
            return "."
        if path.startswith(self.root + os.sep):
            return path[len(self.root) + 1 :].replace(os.sep, "/")
        return path

    def _resolve(self, candidate: str) -> None:
        joined = os.path.join(self.root, candidate)
        self.paths[self._shown(os.path.normpath(joined))] = None
        real = os.path.realpath(joined)
        self.paths[self._shown(real)] = None
        if os.path.isdir(real):
            self._walk(candidate, real)

    def _walk(self, candidate: str, directory: str) -> None:
        """Everything beneath ``directory``, links followed, until :data:`MAX_WALK_ENTRIES` (then unresolved)."""
        waiting = [directory]
        while waiting:
            current = waiting.pop()
            if current in self.seen:
                continue
            self.seen.add(current)
            with os.scandir(current) as entries:
                for entry in entries:
                    self.walked += 1
                    if self.walked > MAX_WALK_ENTRIES:
                        self.unresolved[candidate] = None
                        return
                    self.paths[self._shown(entry.path)] = None
                    if entry.is_symlink():
                        real = os.path.realpath(entry.path)
                        self.paths[self._shown(real)] = None
                        if os.path.isdir(real):
                            waiting.append(real)
                    elif entry.is_dir(follow_symlinks=False):
                        waiting.append(entry.path)


def _short(text: str) -> str:
    return text if len(text) <= 80 else text[:77] + "..."


def _first(args: list[str]) -> str:
    return repr(args[0]) if args else "no argument"


def _check_git(args: list[str]) -> None:
    """Refuse what makes git run a program the call names, or rewrite the configuration later calls run."""
    index = 0
    while index < len(args) and args[index].startswith("-"):  # the global options, before the subcommand
        option = args[index]
        if option.startswith("-c") or option.startswith("--c"):  # -c, -cname=value, --config-env
            raise ToolError(f"git {option.split('=', 1)[0]} is refused: it can make git run any program")
        index += 2 if option in _GIT_GLOBAL_VALUES else 1
    command = args[index] if index < len(args) else ""
    if command in _GIT_SUBCOMMANDS:
        raise ToolError(f"git {command} is refused: it runs other programs or rewrites git's configuration")
    for argument in args[index + 1 :] + args[:index]:
        if argument == "--":
            break
        if argument.startswith("--") and len(argument) > 2:
            given = argument[2:].split("=", 1)[0]
            if given in ("exec-path",) and "=" not in argument:
                continue  # only prints where git's programs are
            if any(name.startswith(given) for name in _GIT_OPTIONS):
                raise ToolError(f"git --{given} is refused: it can make git run any program")
        elif argument.startswith("-") and len(argument) > 1:
            letters = argument[1:]
            refused = [c for c in _GIT_SHORT.get(command, "") if c in letters.split("=", 1)[0]]
            if refused and letters[0].isalpha():
                raise ToolError(f"git {command} -{refused[0]} is refused: it can make git run any program")


def _program_path(name: str) -> str:
    """The absolute path ``name`` is run by; a ConfigError when there is no such executable."""
    if os.path.isabs(name):
        path: str | None = name
    elif "/" in name or name in ("", ".", ".."):
        raise ConfigError(
            f"[tools.shell] programs: {name!r} is neither a program's name nor an absolute path; write its name "
            f"(looked up in {SEARCH_PATH}) or its absolute path"
        )
    else:
        path = shutil.which(name, path=SEARCH_PATH)
    if path is None or not os.path.isfile(path) or not os.access(path, os.X_OK):
        raise ConfigError(
            f"[tools.shell] programs: {name!r} is not an executable file"
            + ("" if os.path.isabs(name) else f" in {SEARCH_PATH}; give its absolute path if it is elsewhere")
        )
    return path


def _account(user: str | None) -> tuple[int, int] | None:
    """The uid and gid to run the programs as (None: as this process)."""
    if user is None:
        return None
    try:
        entry = pwd.getpwnam(user) if not user.isdigit() else pwd.getpwuid(int(user))
    except KeyError:
        raise ConfigError(f"[tools.shell] user {user!r} is not an account on this machine") from None
    if entry.pw_uid == os.geteuid():
        return None
    if os.geteuid() != 0:
        raise ConfigError(
            f"[tools.shell] user = {user!r}: only root can run programs as another user; remove user"
        )
    return entry.pw_uid, entry.pw_gid


def _limiter(limits: list[tuple[int, tuple[int, int]]]) -> Callable[[], None]:
    """What the child runs before the program: ``setrlimit`` with values computed in the parent, nothing else."""

    def apply() -> None:
        for kind, limit in limits:
            resource.setrlimit(kind, limit)

    return apply


def _pidfd(pid: int) -> int | None:
    """A descriptor that becomes readable when ``pid`` exits (Linux 5.3+), or None: then it is polled."""
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None


def _has_exited(pid: int) -> bool:
    """Whether the child ``pid`` has exited, without reaping it."""
    try:
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def _reap(process: subprocess.Popen[bytes]) -> tuple[int | None, float]:
    """Wait for the program (killed, or exited): its exit code (None when lost) and the CPU seconds it used. The
    code is also recorded on ``process``, so that ``subprocess`` never waits for the number again."""
    try:
        _, status, usage = os.wait4(process.pid, 0)
    except ChildProcessError:  # reaped elsewhere (SIGCHLD ignored, say): its status is lost
        process.returncode = 0
        return None, 0.0
    process.returncode = os.waitstatus_to_exitcode(status)
    return process.returncode, usage.ru_utime + usage.ru_stime


@hookimpl
def aeon_register_tools(register: Register) -> None:
    register("shell", ShellTool)
