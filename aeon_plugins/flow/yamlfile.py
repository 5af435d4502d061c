"""Reading a manifest file safely, remembering where each key was written.

Manifests are user input: a file may be huge, nested thousands deep, full of aliases, or not YAML at all. Each of
these is a :class:`Problem` naming the file (and the line when there is one), never a traceback. Values are built
with PyYAML's safe constructor only, so no tag can create a Python object.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import yaml

#: A manifest larger than this is refused before it is parsed.
MAX_FILE_BYTES: Final = 1_000_000
#: Deeper nesting than this is refused (a flow needs a handful of levels).
MAX_DEPTH: Final = 64
#: More YAML nodes than this (aliases expanded) is refused: the "billion laughs".
MAX_NODES: Final = 200_000

Path_ = tuple[str | int, ...]


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a flow: where (file, line, key), which node, and what to do."""

    file: str
    message: str
    line: int | None = None
    key: str | None = None
    node: str | None = None

    def __str__(self) -> str:
        where = self.file + (f":{self.line}" if self.line else "")
        what = f" {self.key}:" if self.key else ""
        node = f" (node {self.node!r})" if self.node else ""
        return f"{where}:{what}{node} {self.message}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "file": self.file,
            "line": self.line,
            "key": self.key,
            "node": self.node,
            "message": self.message,
        }


def dotted(path: Path_) -> str:
    """``("nodes", 2, "role")`` as ``nodes[2].role``."""
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


@dataclass(frozen=True)
class Loaded:
    """A file's value and the line of every key path in it."""

    file: str
    value: Any
    lines: dict[Path_, int]
    #: sha256 of the file's bytes (spec 004 §10.2: runs record the manifests they ran)
    digest: str = ""

    def line(self, path: Path_) -> int | None:
        """The line of ``path``, or of its nearest ancestor that has one."""
        while path:
            if path in self.lines:
                return self.lines[path]
            path = path[:-1]
        return self.lines.get(())

    def problem(self, path: Path_, message: str, node: str | None = None) -> Problem:
        return Problem(self.file, message, self.line(path), dotted(path) or None, node)


class _Walker:
    def __init__(self, loader: yaml.SafeLoader, file: str) -> None:
        self.loader, self.file = loader, file
        self.lines: dict[Path_, int] = {}
        self.count = 0

    def build(self, node: yaml.Node, path: Path_) -> Any:
        self.count += 1
        line = node.start_mark.line + 1
        if self.count > MAX_NODES:
            raise _Refused(f"holds more than {MAX_NODES} values (aliases expanded); a flow manifest is small")
        if len(path) > MAX_DEPTH:
            raise _Refused(f"is nested deeper than {MAX_DEPTH} levels", line, path)
        self.lines.setdefault(path, line)
        if isinstance(node, yaml.MappingNode | yaml.SequenceNode) and node.tag not in _PLAIN_TAGS:
            raise _Refused(
                f"uses the YAML tag {node.tag!r}; manifests are plain YAML, without tags", line, path
            )
        if isinstance(node, yaml.MappingNode):
            out: dict[str, Any] = {}
            for key_node, value_node in node.value:
                key = self.loader.construct_object(key_node, deep=True)
                key_line = key_node.start_mark.line + 1
                if not isinstance(key, str):
                    raise _Refused(f"keys must be strings, got {key!r}", key_line, path)
                if key in out:
                    raise _Refused("appears twice; a key is given once", key_line, (*path, key))
                out[key] = self.build(value_node, (*path, key))
            return out
        if isinstance(node, yaml.SequenceNode):
            return [self.build(item, (*path, i)) for i, item in enumerate(node.value)]
        return self.loader.construct_object(node, deep=True)


_PLAIN_TAGS = frozenset({"tag:yaml.org,2002:map", "tag:yaml.org,2002:seq"})


class _Refused(Exception):
    def __init__(self, message: str, line: int | None = None, path: Path_ = ()) -> None:
        super().__init__(message)
        self.line, self.path = line, path


def load_file(path: Path, shown: str) -> Loaded | Problem:
    """The YAML (or JSON) file at ``path`` with its key lines; a :class:`Problem` when it cannot be used."""
    try:
        if not path.is_file():
            return Problem(shown, "does not exist" if not path.exists() else "is not a regular file")
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            return Problem(shown, f"is {size:,} bytes; a manifest is at most {MAX_FILE_BYTES:,}")
        # at most the limit: a file that grows, or lies in stat(), is not read whole
        with path.open("rb") as file:
            data = file.read(MAX_FILE_BYTES + 1)
        if len(data) > MAX_FILE_BYTES:
            return Problem(shown, f"is larger than {MAX_FILE_BYTES:,} bytes, the most a manifest may be")
        text = data.decode("utf-8")
    except FileNotFoundError:
        return Problem(shown, "does not exist")
    except UnicodeDecodeError as exc:
        return Problem(shown, f"is not UTF-8 text ({exc.reason} at byte {exc.start})")
    except OSError as exc:
        return Problem(shown, f"cannot be read: {exc.strerror or exc}")
    digest = hashlib.sha256(data).hexdigest()
    if path.suffix == ".json":
        try:
            return Loaded(shown, json.loads(text), {}, digest)
        except (ValueError, RecursionError) as exc:
            return Problem(shown, f"is not valid JSON: {exc}")
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return Loaded(shown, None, {}, digest)
        walker = _Walker(loader, shown)
        return Loaded(shown, walker.build(node, ()), walker.lines, digest)
    except yaml.MarkedYAMLError as exc:
        line = exc.problem_mark.line + 1 if exc.problem_mark else None
        return Problem(shown, f"is not valid YAML: {exc.problem or exc}", line)
    except yaml.YAMLError as exc:
        return Problem(shown, f"is not valid YAML: {exc}")
    except _Refused as exc:
        return Problem(shown, str(exc), exc.line, dotted(exc.path) or None)
    except RecursionError:
        return Problem(shown, "is nested too deeply to read")
    finally:
        loader.dispose()
