"""The prompt of a model call, where the run kept one: its cassette.

Neither the state store nor the log keeps prompts (they are large, and rebuilt from the state on every cycle);
a run made with ``--record FILE`` or ``--replay FILE`` names that cassette in its manifest, and the cassette holds
each request whole. Cassette lines carry no run id, so a call is matched by its output text, in order: from the
first request that holds the run's request (its planning prompt), each call takes the next line whose response is
the call's text. The page says where a prompt came from; a call with no match says the prompt was not kept.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

#: how far past the last match a call's output is looked for (a call with none must not scan the whole file)
_LOOKAHEAD = 2000
_lock = threading.Lock()
#: path -> ((mtime_ns, size), records)
_read: dict[str, tuple[tuple[int, int], list[dict[str, Any]]]] = {}


def cassette_path(manifest: dict[str, Any]) -> str | None:
    """The cassette a run recorded into or replayed from, as its manifest names it."""
    cassette = manifest.get("cassette")
    if isinstance(cassette, dict):
        for mode in ("record", "replay"):
            if isinstance(cassette.get(mode), str):
                return str(cassette[mode])
    return None


def _records(path: str) -> list[dict[str, Any]]:
    """The cassette's request lines (kept until the file changes); [] when it cannot be read."""
    try:
        status = Path(path).stat()
    except OSError:
        return []
    version = (status.st_mtime_ns, status.st_size)
    with _lock:
        cached = _read.get(path)
        if cached is not None and cached[0] == version:
            return cached[1]
    records = []
    try:
        lines = Path(path).read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return []
    for line in lines[1:]:
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and isinstance(record.get("request"), dict):
            records.append(record)
    with _lock:
        _read[path] = (version, records)
    return records


def _text(record: dict[str, Any]) -> Any:
    response = record.get("response")
    return response.get("text") if isinstance(response, dict) else None


def match_prompts(
    manifest: dict[str, Any], request: str | None, calls: Sequence[Sequence[dict[str, Any]]]
) -> dict[tuple[int, int], dict[str, Any]]:
    """(cycle index, call index) -> the cassette's request for that call, for each call matched."""
    path = cassette_path(manifest)
    records = _records(path) if path else []
    if not records:
        return {}
    start = 0
    first = next((call for cycle in calls for call in cycle), None)
    if first is not None and request:
        start = next(
            (
                i
                for i, record in enumerate(records)
                if _text(record) == first.get("text") and request in str(record["request"].get("prompt"))
            ),
            0,
        )
    found: dict[tuple[int, int], dict[str, Any]] = {}
    at = start
    for cycle, made in enumerate(calls):
        for number, call in enumerate(made):
            text = call.get("text")
            ahead = range(at, min(len(records), at + _LOOKAHEAD))
            hit = next((i for i in ahead if _text(records[i]) == text), None)
            if hit is None:
                continue
            found[(cycle, number)] = records[hit]["request"]
            at = hit + 1
    return found
