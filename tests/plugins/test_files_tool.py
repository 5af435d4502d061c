"""The files tool (issue 17): reads, writes and lists under its root, and nowhere else, whatever the path says."""

from __future__ import annotations

import contextlib
import errno
import hashlib
import itertools
import os
import re
import resource
import socket
import stat
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aeon_kernel import ConfigError, Engine, ToolError
from aeon_kernel.config import parse_config
from aeon_kernel.invocation import ToolContext, invoke_tool
from aeon_plugins.files import MAX_PATH_BYTES, FilesTool, relative_parts

SECRET = "OUTSIDE-SECRET-0123456789"
ALL = frozenset({"read", "write", "list"})


def files(root: Path, granted: frozenset[str] = ALL, **options: Any) -> FilesTool:
    return FilesTool(granted=granted, root=root, **options)


@pytest.fixture
def sandbox(tmp_path: Path) -> tuple[Path, Path]:
    """A root full of traps, and the outside world they point at."""
    outside = tmp_path / "outside"
    (outside / "dir").mkdir(parents=True)
    (outside / "secret.txt").write_text(SECRET)
    (outside / "dir" / "secret.txt").write_text(SECRET)
    root = tmp_path / "root"
    (root / "sub" / "deeper").mkdir(parents=True)
    (root / "notes.txt").write_text("inside notes")
    (root / "sub" / "inner.txt").write_text("inner")
    os.symlink(outside / "secret.txt", root / "link_file")
    os.symlink("../outside", root / "link_dir")
    os.symlink("/etc", root / "link_abs")
    os.symlink("/proc/self", root / "proc_link")
    os.symlink("../../outside", root / "sub" / "link_up")
    os.symlink("notes.txt", root / "link_inside")  # even a link that stays inside is not followed
    os.link(outside / "secret.txt", root / "hard")
    os.mkfifo(root / "fifo")
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(root / "sock"))
    with contextlib.suppress(PermissionError):  # not root: the corpus still names it (a missing file)
        os.mknod(root / "dev", 0o600 | stat.S_IFCHR, os.makedev(1, 3))  # /dev/null's numbers
    return root, outside


def snapshot(directory: Path) -> dict[str, str]:
    """Every entry under ``directory`` with a digest of what it is, to show nothing outside the root changed."""
    seen: dict[str, str] = {}
    for path in sorted(directory.rglob("*")):
        info = path.lstat()
        if stat.S_ISREG(info.st_mode):
            seen[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest() + oct(info.st_mode)
        else:
            seen[str(path)] = oct(info.st_mode)
    return seen


PREFIXES = [
    "", "./", "../", "../../", "../../../../../../", "/", "//", "~/", "~root/", "sub/../", "sub/../../", "./../",
    "sub/./../../", "sub/deeper/../../../", "link_dir/", "link_dir/dir/", "sub/link_up/", "sub/link_up/dir/",
    "link_abs/", "proc_link/", "proc_link/root/", "link_inside/", "%2e%2e/", "..%2f", "%2e%2e%2f", "\uff0e\uff0e/",
    "\u2025/", "..\u2215", "..\\", "\\", "\\\\server\\share\\", "C:/", "c:\\", "sub\\..\\..\\", ".../", "..../",
    " ../", "../ ", "..;/", "\u202e../", "\u200b../", "..\u200b/", "\x00", "sub/\x00/", "\n", "\r\n../", "\t../",
    "\x7f", "\udcff", "/proc/self/", "/proc/self/root/", "/dev/", "/etc/", "/sys/", "file:", "file:///",
    "..//..//", "./././../", "sub//..//..//", "a/" * 300, "é/" * 200, "sub/deeper/", "sub/deeper/../../../../",
    "link_dir/../", "./link_dir/", "sub/link_up/../", "%00", "..%00/", "..%c0%af", "..%252f", "....//",
    "\u2024\u2024/", "sub/./link_up/./", "fifo/", "hard/",
]  # fmt: skip
TARGETS = [
    "outside/secret.txt", "secret.txt", "dir/secret.txt", "etc/passwd", "passwd", "shadow", "self/environ",
    "environ", "link_file", "link_inside", "hard", "fifo", "sock", "dev", "null", "notes.txt", "sub", "sub/inner.txt",
    "", ".", "..", "x" * 300, "é" * 200, "new/made.txt", "\x00.txt", "nul\x00", "notes.txt\x00.png",
    "notes.txt/", "cpuinfo", "1/mem", "kcore", "hostname", ".bashrc",
]  # fmt: skip


def hostile_paths() -> list[str]:
    return sorted({prefix + target for prefix, target in itertools.product(PREFIXES, TARGETS)})


def test_the_corpus_is_large() -> None:
    assert len(hostile_paths()) >= 2000


def test_no_hostile_path_reads_or_writes_outside_the_root(sandbox: tuple[Path, Path], tmp_path: Path) -> None:
    """Every path of the corpus, every operation: a call either refuses or stays inside the root."""
    root, outside = sandbox
    tool = files(root)
    before = snapshot(outside)
    system = {p: os.stat(p).st_mtime_ns for p in ("/etc/passwd", "/etc/hostname") if os.path.exists(p)}
    escaped: list[tuple[str, str, str]] = []
    outcomes = {"refused": 0, "inside": 0}
    for path in hostile_paths():
        for operation in ("read", "write", "list"):
            arguments: dict[str, Any] = {"operation": operation, "path": path}
            if operation == "write":
                arguments["content"] = "PWNED"
            call = invoke_tool(tool, arguments, ToolContext("run", "step"))
            if call.error is not None:
                outcomes["refused"] += 1
                continue
            outcomes["inside"] += 1
            assert call.result is not None
            target = root / call.result["path"]
            if SECRET in repr(call.result) or not target.resolve().is_relative_to(root.resolve()):
                escaped.append((operation, path, repr(call.result)[:80]))
            if operation in ("read", "write") and target.is_symlink():
                escaped.append((operation, path, "went through a link"))
    assert escaped == []
    assert snapshot(outside) == before
    assert {p: os.stat(p).st_mtime_ns for p in system} == system
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "outside",
        "root",
    ]  # nothing written beside the root
    assert outcomes["refused"] > outcomes["inside"] > 0, outcomes


def test_a_link_swapped_in_while_reading_never_leads_outside(sandbox: tuple[Path, Path]) -> None:
    """Time of check, time of use: a directory replaced by a link to the outside mid-call is never followed."""
    root, outside = sandbox
    (root / "swap").mkdir()
    (root / "swap" / "secret.txt").write_text("inside")
    tool = files(root)
    stop = threading.Event()

    def swap() -> None:
        while not stop.is_set():
            os.rename(root / "swap", root / "held")
            os.symlink(outside, root / "swap")
            os.unlink(root / "swap")
            os.rename(root / "held", root / "swap")

    swapper = threading.Thread(target=swap)
    swapper.start()
    seen: set[str] = set()
    try:
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            try:
                seen.add(tool.invoke(operation="read", path="swap/secret.txt")["content"])
            except ToolError:
                seen.add("refused")
    finally:
        stop.set()
        swapper.join()
    assert SECRET not in seen and "inside" in seen


def test_read_write_list(sandbox: tuple[Path, Path]) -> None:
    root, _ = sandbox
    tool = files(root)
    assert tool.invoke(operation="write", path="made/here/new.txt", content="héllo") == {
        "operation": "write",
        "path": "made/here/new.txt",
        "bytes": 6,
    }
    assert (root / "made" / "here" / "new.txt").read_text() == "héllo"
    assert tool.invoke(operation="read", path="./made//here/new.txt")["content"] == "héllo"
    listing = tool.invoke(operation="list", path=".")
    kinds = {entry["name"]: entry["type"] for entry in listing["entries"]}
    assert kinds["notes.txt"] == "file" and kinds["sub"] == "directory" and kinds["link_dir"] == "link"
    assert kinds["fifo"] == "other" and listing["truncated"] is False
    assert {"name": "notes.txt", "type": "file", "bytes": 12} in listing["entries"]
    tool.validate_output(listing)
    with pytest.raises(ToolError, match="write needs content"):
        tool.invoke(operation="write", path="x.txt")
    with pytest.raises(ToolError, match="is a directory"):
        tool.invoke(operation="read", path="sub")
    with pytest.raises(ToolError, match="does not exist"):
        tool.invoke(operation="read", path="missing.txt")
    with pytest.raises(ToolError, match="not a directory"):
        tool.invoke(operation="list", path="notes.txt")


def test_writes_are_atomic_keep_the_mode_and_leave_no_temporary_file(sandbox: tuple[Path, Path]) -> None:
    root, _ = sandbox
    (root / "notes.txt").chmod(0o600)
    files(root).invoke(operation="write", path="notes.txt", content="replaced")
    assert (root / "notes.txt").read_text() == "replaced"
    assert stat.S_IMODE((root / "notes.txt").stat().st_mode) == 0o600
    assert not [p for p in root.iterdir() if p.name.startswith(".aeon-")]


@pytest.mark.parametrize("mode", [0o4755, 0o2755, 0o6777, 0o1644, 0o7700])
def test_a_write_never_keeps_setuid_setgid_or_sticky(sandbox: tuple[Path, Path], mode: int) -> None:
    """The file's owner becomes the tool's user: a setuid bit kept would make the new content run as that user."""
    root, _ = sandbox
    target = root / "tool.sh"
    target.write_text("#!/bin/sh\necho old\n")
    os.chmod(target, mode)
    assert stat.S_IMODE(target.stat().st_mode) & 0o7000  # the bits are really there (root or the owner)
    files(root).invoke(operation="write", path="tool.sh", content="#!/bin/sh\nid\n")
    written = stat.S_IMODE(target.stat().st_mode)
    assert written == mode & 0o777 and not written & (stat.S_ISUID | stat.S_ISGID | stat.S_ISVTX)


def test_a_failing_write_is_a_tool_error_naming_the_path_asked_for(
    sandbox: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The system's refusal (a full disk, a file too large, a read-only directory) says which path, never the
    temporary file's name, and leaves no temporary file behind."""
    root, _ = sandbox
    tool = files(root)
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (1000, hard))  # a real EFBIG (Python ignores SIGXFSZ)
    try:
        with pytest.raises(ToolError) as info:
            tool.invoke(operation="write", path="sub/big.txt", content="x" * 5000)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    assert str(info.value) == "write sub/big.txt failed: File too large"
    real_replace = os.replace

    def refused(source: Any, target: Any, **kwargs: Any) -> None:  # as a read-only file system answers
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), source, None, target)

    monkeypatch.setattr("aeon_plugins.files.os.replace", refused)
    with pytest.raises(ToolError) as info:
        tool.invoke(operation="write", path="notes.txt", content="new")
    assert str(info.value) == "write notes.txt failed: Read-only file system"
    monkeypatch.setattr("aeon_plugins.files.os.replace", real_replace)
    if os.geteuid() != 0:  # root writes anywhere: a directory without write permission only binds others
        (root / "sub").chmod(0o555)
        try:
            with pytest.raises(ToolError, match=r"^write sub/inner.txt failed: Permission denied$"):
                tool.invoke(operation="write", path="sub/inner.txt", content="new")
        finally:
            (root / "sub").chmod(0o755)
    assert (root / "notes.txt").read_text() == "inside notes"
    assert not [p for p in root.rglob(".aeon-*")]


def test_a_write_never_replaces_a_link_a_hard_link_or_a_device(sandbox: tuple[Path, Path]) -> None:
    root, outside = sandbox
    tool = files(root)
    for name, why in [
        ("link_inside", "symbolic link"),
        ("hard", "other hard links"),
        ("fifo", "not a regular"),
    ]:
        with pytest.raises(ToolError, match=why):
            tool.invoke(operation="write", path=name, content="x")
    assert (root / "link_inside").is_symlink() and (outside / "secret.txt").read_text() == SECRET


def test_size_limits(sandbox: tuple[Path, Path]) -> None:
    root, _ = sandbox
    tool = files(root, max_read_bytes=10, max_write_bytes=10, max_entries=2)
    with pytest.raises(ToolError, match="more than the 10 allowed"):
        tool.invoke(operation="write", path="big.txt", content="x" * 11)
    (root / "big.txt").write_text("x" * 11)
    with pytest.raises(ToolError, match="holds 11 bytes, more than the 10 allowed"):
        tool.invoke(operation="read", path="big.txt")
    listing = tool.invoke(operation="list", path=".")
    assert len(listing["entries"]) == 2 and listing["truncated"] is True


def test_text_only(sandbox: tuple[Path, Path]) -> None:
    root, _ = sandbox
    (root / "binary").write_bytes(b"\xff\xfe\x00")
    with pytest.raises(ToolError, match="not UTF-8 text"):
        files(root).invoke(operation="read", path="binary")
    with pytest.raises(ToolError, match="lone surrogate"):
        files(root).invoke(operation="write", path="x.txt", content="\udcff")


@settings(max_examples=60, deadline=None)
@given(
    name=st.text(
        st.characters(
            blacklist_categories=("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"), blacklist_characters="/\\"
        ),
        min_size=1,
        max_size=40,
    ).filter(lambda n: n.strip(".") != "" and not n.startswith("~") and not re.match("[A-Za-z]:", n)),
    content=st.text(st.characters(blacklist_categories=("Cs",)), max_size=200),
)
def test_what_is_written_is_read_back(
    tmp_path_factory: pytest.TempPathFactory, name: str, content: str
) -> None:
    """Any name the tool accepts is a file directly inside the root, holding exactly what was written."""
    root = tmp_path_factory.mktemp("round")
    tool = files(root)
    tool.invoke(operation="write", path=name, content=content)
    assert [p.name for p in root.iterdir()] == [name]
    assert tool.invoke(operation="read", path=name)["content"] == content


def test_path_rules() -> None:
    assert relative_parts("a//b/./c/") == ["a", "b", "c"]
    assert relative_parts(".") == []
    for path, why in [
        ("a/../b", r"'\.\.'"),
        ("/etc", "absolute"),
        ("~/x", "absolute"),
        ("C:/x", "absolute"),
        ("a\\b", "backslash"),
        ("a\x00", "NUL"),
        ("a\u202eb", "format character"),
        ("x" * 256, "longer than 255 bytes"),
        ("a/" * (MAX_PATH_BYTES // 2 + 1), f"longer than {MAX_PATH_BYTES} bytes"),
    ]:
        with pytest.raises(ToolError, match=why):
            relative_parts(path)


def test_permissions_follow_the_operation(sandbox: tuple[Path, Path]) -> None:
    root, _ = sandbox
    reader = files(root, granted=frozenset({"read", "list"}))
    assert reader.input_schema["properties"]["operation"] == {"enum": ["list", "read"]}
    assert reader.required_permissions({"operation": "write", "path": "x"}) == {"write"}
    refused = invoke_tool(reader, {"operation": "write", "path": "x", "content": "y"}, ToolContext("r", "s"))
    assert refused.error is not None and refused.error["type"] == "PermissionDeniedError"
    assert not (root / "x").exists()
    assert reader.resources({"operation": "read", "path": "./sub//inner.txt"}) == {"path": ["sub/inner.txt"]}


def test_root_must_be_a_real_workspace(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="needs a root"):
        FilesTool(granted=frozenset({"read"}))
    with pytest.raises(ConfigError, match="not an existing directory"):
        files(tmp_path / "missing")
    for system in ("/", "/proc", "/sys/kernel", "/dev"):
        with pytest.raises(ConfigError, match="system directory"):
            files(Path(system))
    assert FilesTool().root is None  # nothing granted: nothing to check, the engine leaves it off


def test_the_engine_builds_it_only_when_granted(tmp_path: Path) -> None:
    with Engine(parse_config({})) as engine:
        assert "files" not in [tool.name for tool in engine.tools]
    config = {"tools": {"files": {"grant": ["read"], "root": str(tmp_path)}}}
    with Engine(parse_config(config)) as engine:
        tool = engine.tools.get("files")
        assert isinstance(tool, FilesTool) and tool.granted == {"read"} and tool.root == tmp_path.resolve()
    ungranted = Engine(parse_config({"tools": {"files": {"root": str(tmp_path)}}}))
    with ungranted, pytest.raises(ConfigError, match=r"add grant = \[...\] to \[tools.files\]"):
        _ = ungranted.tools
