"""Registering the built-in plugins imports none of their heavy code (DESIGN rule 5).

An engine with plugin autoloading on imports every package the ``aeon`` entry points name, for its
``aeon_register_*`` hooks. That must not load ``ssl``, ``asyncio``, ``httpx`` or the face's libraries: the
``http`` tool's network code and the ``mcp`` tool's event loop are imported when the tool is built. Each case runs
in a fresh interpreter, where ``sys.modules`` says what was imported.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

#: what an embedder's run must not import through the plugins it registers
HEAVY = ("click", "rich", "jinja2", "yaml", "platformdirs", "httpx", "ssl", "asyncio")
#: the plugins' own modules that bring the heavy ones in, loaded only when their tool is built
LAZY_PARTS = (
    "aeon_plugins.http.connection",
    "aeon_plugins.mcp_tools.connections",
    "aeon_plugins.mcp_tools.servers",
)

RUN_ONE_PLAN = """
import json, sys
from aeon_kernel import Engine
from aeon_kernel.config import AeonConfig
plan = {"goal": "g", "steps": [{"step_id": "1", "description": "d", "tool": "echo", "arguments": {"text": "x"}}]}
with Engine(AeonConfig().with_choice("llm", "scripted", responses=[plan, {"answer": "x"}])) as engine:
    result = engine.run("say x")
print(json.dumps({
    "loaded": sorted(m for m in sys.modules if m.startswith("aeon_plugins.") or m in HEAVY + LAZY_PARTS),
    "status": result["status"],
}))
"""

BUILD_THE_HTTP_TOOL = """
import json, sys
from aeon_kernel import Engine
from aeon_kernel.config import AeonConfig
config = AeonConfig(tools_enabled=("http",), tool_options={"http": {"grant": ["get"], "hosts": ["127.0.0.1"]}})
with Engine(config) as engine:
    before = sorted(m for m in HEAVY + LAZY_PARTS if m in sys.modules)
    tool = engine.tools.get("http")
    after = sorted(m for m in HEAVY + LAZY_PARTS if m in sys.modules)
print(json.dumps({"before": before, "after": after, "tool": type(tool).__qualname__, "granted": sorted(tool.granted)}))
"""

READ_THE_LAZY_NAMES = """
import json, sys
import aeon_plugins.http as http_plugin
import aeon_plugins.mcp_tools as mcp_plugin
from aeon_plugins.http import HttpTool, parse_url
from aeon_plugins.mcp_tools import MCPTool, mcp_tools
seen = {"imported": sorted(m for m in LAZY_PARTS if m in sys.modules)}
from aeon_plugins.mcp_tools import CLOSE_SECONDS, MAX_TOOLS, ServerOptions
from aeon_plugins.http import Deadline, resolve
from aeon_plugins.http.connection import _tls
seen["same"] = [
    http_plugin._tls is _tls,
    http_plugin.resolve is resolve,
    mcp_plugin.ServerOptions is sys.modules["aeon_plugins.mcp_tools.servers"].ServerOptions,
    mcp_plugin.CLOSE_SECONDS == sys.modules["aeon_plugins.mcp_tools.connections"].CLOSE_SECONDS,
]
seen["read"] = sorted(m for m in LAZY_PARTS if m in sys.modules)
try:
    http_plugin.no_such_name
except AttributeError as exc:
    seen["missing"] = str(exc)
print(json.dumps(seen))
"""


def run_probe(code: str, cwd: Path) -> Any:
    """``code`` in a fresh interpreter with plugin autoloading on (whatever this process's environment says)."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k
        not in ("AEON_DISABLE_PLUGIN_AUTOLOAD", "AEON_PLUGINS_ALLOW", "AEON_PLUGINS_BLOCK", "AEON_CONFIG")
    }
    prelude = f"HEAVY = {HEAVY!r}\nLAZY_PARTS = {LAZY_PARTS!r}\n"
    done = subprocess.run(
        [sys.executable, "-c", prelude + code],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_run_with_every_builtin_plugin_registered_imports_no_heavy_module(tmp_path: Path) -> None:
    seen = run_probe(RUN_ONE_PLAN, tmp_path)
    assert isinstance(seen["status"], str)  # the run happened (its outcome is the scripted model's business)
    loaded = set(seen["loaded"])
    assert {"aeon_plugins.http", "aeon_plugins.mcp_tools"} <= loaded  # registered: the probe proves something
    assert sorted(loaded & set(HEAVY)) == []
    assert sorted(loaded & set(LAZY_PARTS)) == []


def test_building_the_granted_http_tool_imports_its_network_code(tmp_path: Path) -> None:
    seen = run_probe(BUILD_THE_HTTP_TOOL, tmp_path)
    assert seen["tool"] == "HttpTool" and seen["granted"] == ["get"]
    assert "ssl" not in seen["before"] and "aeon_plugins.http.connection" not in seen["before"]
    assert {"ssl", "aeon_plugins.http.connection"} <= set(seen["after"])


def test_the_parts_names_stay_readable_from_the_packages_and_load_on_first_use(tmp_path: Path) -> None:
    seen = run_probe(READ_THE_LAZY_NAMES, tmp_path)
    assert seen["imported"] == []
    assert seen["same"] == [True, True, True, True]
    assert seen["read"] == sorted(LAZY_PARTS)
    assert seen["missing"] == "module 'aeon_plugins.http' has no attribute 'no_such_name'"
