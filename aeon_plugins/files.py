"""The ``files`` tool: read, write and list files under one root directory, and nowhere else (issue 17).

Off until granted: ``[tools.files] grant = ["read", "list"]`` (or ``"write"``) and ``root = "workspace"``.

A path is a relative path under the root, with ``/`` between its parts. It is refused before anything is opened
when it is absolute, holds ``..``, a backslash, a NUL byte, a control or format character, a lone surrogate, a
part longer than 255 bytes or is longer than :data:`MAX_PATH_BYTES` in all. It is then opened one directory at
a time from a descriptor of the root, never following a symbolic link (``O_NOFOLLOW`` at every part), so no name
inside the root can lead outside it, even if it is changed while the call runs. Only regular files with one
link are read or written: symbolic links, hard links (which may be a file outside the root under another name),
devices, FIFOs and sockets are refused. Writes go to a temporary file in the same directory, flushed to disk,
then renamed over the target: a reader sees the old content or the new, never half of it. The new file keeps the
old one's permission bits, never its setuid, setgid or sticky bit (the owner is now the tool's user). A failure of
the system (a full disk, a read-only directory) is a ToolError naming the path asked for, never the temporary file.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import stat
import unicodedata
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

from pydantic import Field, model_validator

from aeon_kernel import Register, Tool, ToolError, hookimpl
from aeon_kernel.kit import workspace_root

OPERATIONS: Final = ("list", "read", "write")
MAX_PATH_BYTES: Final = 1024
MAX_PART_BYTES: Final = 255
_OPEN_DIR: Final = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
#: a Windows drive ("C:"), which a model may write for an absolute path
_DRIVE: Final = re.compile(r"[A-Za-z]:")
_REFUSED_CHARACTERS: Final = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})


def input_schema(operations: tuple[str, ...]) -> dict[str, Any]:
    """The arguments, with only the ``operations`` this instance may perform (a model cannot ask for another)."""
    return {
        "type": "object",
        "properties": {
            "operation": {"enum": list(operations)},
            "path": {"type": "string", "minLength": 1, "maxLength": MAX_PATH_BYTES},
            "content": {"type": "string"},
        },
        "required": ["operation", "path"],
        "additionalProperties": False,
    }


OUTPUT_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        "operation": {"enum": list(OPERATIONS)},
        "path": {"type": "string"},
        "content": {"type": "string"},
        "bytes": {"type": "integer", "minimum": 0},
        "entries": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "type": {"enum": ["file", "directory", "link", "other"]},
                    "bytes": {"type": "integer", "minimum": 0},
                },
                "required": ["name", "type"],
                "additionalProperties": False,
            },
        },
        "truncated": {"type": "boolean"},
    },
    "required": ["operation", "path"],
    "additionalProperties": False,
}


class FilesTool(Tool):
    name: str = "files"
    description: str = (
        "Read, write or list files in the workspace. path is relative to the workspace, e.g. 'notes/todo.txt'; "
        "use '.' to list the workspace itself. write needs content."
    )
    input_schema: dict[str, Any] = input_schema(OPERATIONS)
    output_schema: dict[str, Any] = OUTPUT_SCHEMA
    example: dict[str, Any] | None = {"operation": "read", "path": "notes.txt"}
    permissions: dict[str, str] = {
        "read": "read files under the root",
        "write": "create and replace files under the root (and the directories that hold them)",
        "list": "list the directories under the root",
    }
    #: the directory every path is relative to; required once something is granted
    root: Path | None = None
    max_read_bytes: int = Field(default=1_000_000, gt=0)
    max_write_bytes: int = Field(default=1_000_000, gt=0)
    max_entries: int = Field(default=1000, gt=0)

    @model_validator(mode="before")
    @classmethod
    def _schema_for_grant(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("granted") and "input_schema" not in data:
            granted = tuple(op for op in OPERATIONS if op in data["granted"])
            return {**data, "input_schema": input_schema(granted or OPERATIONS)}
        return data

    @model_validator(mode="after")
    def _usable_root(self) -> FilesTool:
        if not self.granted:
            return self
        object.__setattr__(self, "root", workspace_root(self.root, "files"))
        return self

    def required_permissions(self, arguments: dict[str, Any]) -> frozenset[str]:
        return frozenset({arguments["operation"]})

    def resources(self, arguments: dict[str, Any]) -> dict[str, list[str]]:
        try:
            return {"path": ["/".join(relative_parts(arguments["path"])) or "."]}
        except ToolError:
            return {"path": [arguments["path"]]}

    def invoke(self, **kwargs: Any) -> dict[str, Any]:
        parts = relative_parts(kwargs["path"])
        try:
            return self._operation(kwargs, parts)
        except OSError as exc:  # the system's refusal, in words, for the path asked for (never a file's name)
            raise ToolError(
                f"{kwargs['operation']} {_shown(parts)} failed: {exc.strerror or type(exc).__name__}"
            ) from None

    def _operation(self, kwargs: dict[str, Any], parts: list[str]) -> dict[str, Any]:
        operation = kwargs["operation"]
        shown = _shown(parts)
        if operation == "list":
            return {"operation": "list", "path": shown, **self._list(parts)}
        if not parts:
            raise ToolError(f"{operation} needs a file's path, not the workspace itself")
        if operation == "read":
            content = self._read(parts)
            return {"operation": "read", "path": shown, "content": content, "bytes": len(content.encode())}
        if "content" not in kwargs:
            raise ToolError("write needs content: the text to write")
        size = self._write(parts, kwargs["content"])
        return {"operation": "write", "path": shown, "bytes": size}

    # --- the three operations ----------------------------------------------------------------------------------

    def _read(self, parts: list[str]) -> str:
        with self._directory(parts[:-1]) as directory:
            name = parts[-1]
            try:
                before = _regular_file(directory, name, parts)
            except FileNotFoundError:
                raise ToolError(f"{_shown(parts)} does not exist") from None
            if before.st_size > self.max_read_bytes:
                raise ToolError(
                    f"{_shown(parts)} holds {before.st_size:,} bytes, more than the {self.max_read_bytes:,} allowed"
                )
            fd = _open(name, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY, directory, parts)
            with os.fdopen(fd, "rb") as file:
                now = os.fstat(file.fileno())
                if (now.st_dev, now.st_ino) != (before.st_dev, before.st_ino) or now.st_nlink != 1:
                    raise ToolError(f"{_shown(parts)} changed while it was being opened; try again")
                data = file.read(self.max_read_bytes + 1)
        if len(data) > self.max_read_bytes:
            raise ToolError(f"{_shown(parts)} holds more than the {self.max_read_bytes:,} bytes allowed")
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            raise ToolError(f"{_shown(parts)} is not UTF-8 text") from None

    def _write(self, parts: list[str], content: str) -> int:
        try:
            data = content.encode("utf-8")
        except UnicodeEncodeError:
            raise ToolError("content holds a lone surrogate; it cannot be written as UTF-8") from None
        if len(data) > self.max_write_bytes:
            raise ToolError(f"content is {len(data):,} bytes, more than the {self.max_write_bytes:,} allowed")
        with self._directory(parts[:-1], create=True) as directory:
            name = parts[-1]
            mode = 0o644
            with contextlib.suppress(
                FileNotFoundError
            ):  # the old permissions, without setuid, setgid, sticky
                mode = stat.S_IMODE(_regular_file(directory, name, parts).st_mode) & 0o777
            temporary = f".aeon-{secrets.token_hex(8)}.tmp"
            fd = os.open(
                temporary,
                os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                0o600,
                dir_fd=directory,
            )
            try:
                with os.fdopen(fd, "wb") as file:
                    file.write(data)
                    file.flush()
                    os.fchmod(file.fileno(), mode)
                    os.fsync(file.fileno())
                os.replace(temporary, name, src_dir_fd=directory, dst_dir_fd=directory)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(temporary, dir_fd=directory)
                raise
            os.fsync(directory)
        return len(data)

    def _list(self, parts: list[str]) -> dict[str, Any]:
        entries: list[dict[str, Any]] = []
        truncated = False
        with self._directory(parts) as directory, os.scandir(directory) as found:
            for entry in sorted(found, key=lambda e: e.name):
                if not _printable(entry.name):
                    continue  # a name that is not UTF-8 text cannot be shown (nor asked for)
                if len(entries) == self.max_entries:
                    truncated = True
                    break
                info = entry.stat(follow_symlinks=False)
                kind = (
                    "link"
                    if stat.S_ISLNK(info.st_mode)
                    else "directory"
                    if stat.S_ISDIR(info.st_mode)
                    else "file"
                    if stat.S_ISREG(info.st_mode)
                    else "other"
                )
                item: dict[str, Any] = {"name": entry.name, "type": kind}
                if kind == "file":
                    item["bytes"] = info.st_size
                entries.append(item)
        return {"entries": entries, "truncated": truncated}

    @contextlib.contextmanager
    def _directory(self, parts: list[str], create: bool = False) -> Iterator[int]:
        """A descriptor of the directory ``parts`` under the root, reached one part at a time without following
        a symbolic link; missing directories are made when ``create``."""
        assert self.root is not None  # set once anything is granted, and nothing runs ungranted
        fd = os.open(self.root, _OPEN_DIR)
        try:
            for depth, part in enumerate(parts, 1):
                try:
                    inner = os.open(part, _OPEN_DIR, dir_fd=fd)
                except FileNotFoundError:
                    if not create:
                        raise ToolError(f"{_shown(parts[:depth])} does not exist") from None
                    with contextlib.suppress(FileExistsError):
                        os.mkdir(part, 0o755, dir_fd=fd)
                    inner = _open(part, _OPEN_DIR, fd, parts[:depth])
                except OSError:
                    _refuse(fd, part, parts[:depth])
                    raise
                os.close(fd)
                fd = inner
            yield fd
        finally:
            os.close(fd)


def relative_parts(path: str) -> list[str]:
    """The parts of ``path`` under the root (``[]`` for the root itself); ToolError when it may not be used."""
    if "\x00" in path:
        raise ToolError("the path holds a NUL byte")
    if not _printable(path):
        raise ToolError("the path holds a control character, a format character or a lone surrogate")
    if len(path.encode("utf-8")) > MAX_PATH_BYTES:
        raise ToolError(f"the path is longer than {MAX_PATH_BYTES} bytes")
    if path.startswith(("/", "~")) or _DRIVE.match(path):
        raise ToolError(f"{path!r} is absolute; paths are relative to the workspace")
    if "\\" in path:
        raise ToolError("the path holds a backslash; separate its parts with '/'")
    parts = [part for part in path.split("/") if part not in ("", ".")]
    if ".." in parts:
        raise ToolError("the path holds '..'; paths stay inside the workspace")
    for part in parts:
        if len(part.encode("utf-8")) > MAX_PART_BYTES:
            raise ToolError(f"a part of the path is longer than {MAX_PART_BYTES} bytes")
    return parts


def _printable(text: str) -> bool:
    return all(unicodedata.category(c) not in _REFUSED_CHARACTERS for c in text)


def _shown(parts: list[str]) -> str:
    return "/".join(parts) or "."


def _regular_file(directory: int, name: str, parts: list[str]) -> os.stat_result:
    """The status of ``name``, which must be a regular file with one link (FileNotFoundError when absent)."""
    info = os.stat(name, dir_fd=directory, follow_symlinks=False)
    if stat.S_ISLNK(info.st_mode):
        raise ToolError(f"{_shown(parts)} is a symbolic link; links are not followed")
    if stat.S_ISDIR(info.st_mode):
        raise ToolError(f"{_shown(parts)} is a directory")
    if not stat.S_ISREG(info.st_mode):
        raise ToolError(f"{_shown(parts)} is not a regular file (a device, FIFO or socket)")
    if info.st_nlink != 1:
        raise ToolError(f"{_shown(parts)} has other hard links, which may be outside the workspace")
    return info


def _open(name: str, flags: int, directory: int, parts: list[str]) -> int:
    try:
        return os.open(name, flags | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=directory)
    except OSError:
        _refuse(directory, name, parts)
        raise


def _refuse(directory: int, name: str, parts: list[str]) -> None:
    """Raise the ToolError that says why ``name`` could not be opened."""
    try:
        info = os.stat(name, dir_fd=directory, follow_symlinks=False)
    except FileNotFoundError:
        raise ToolError(f"{_shown(parts)} does not exist") from None
    except OSError as exc:
        raise ToolError(f"{_shown(parts)} cannot be opened: {exc.strerror}") from None
    if stat.S_ISLNK(info.st_mode):
        raise ToolError(f"{_shown(parts)} is a symbolic link; links are not followed")
    if not stat.S_ISDIR(info.st_mode):
        raise ToolError(f"{_shown(parts)} is not a directory")
    raise ToolError(f"{_shown(parts)} cannot be opened")


@hookimpl
def aeon_register_tools(register: Register) -> None:
    register("files", FilesTool)
