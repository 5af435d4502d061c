"""The kernel's size and import cost (issue 25: kernel, batteries, face). Run by hand, from the repository root:

    python bench/kernel_split.py [--repeat 21] [--json FILE]

Prints, for the checkout it runs in:
- the modules of the project loaded by ``Engine(autoload=False)``, by ``Engine()``, and by a scripted run on an
  ``Engine()`` (counted per package: aeon_kernel, aeon_plugins, aeon_cli), and whether click, rich, jinja2, yaml,
  platformdirs, httpx, ssl or asyncio were imported on the way;
- the cold import of what an embedder writes (``from aeon_kernel import Engine, FunctionTool, hookimpl``) net of
  ``python -c pass``, beside ``import pydantic_graph`` net, interleaved in one run (median of ``--repeat``);
- the public names (``aeon_kernel.__all__``), the lines of each package and of ``aeon_kernel/engine.py``.

Run it in two checkouts (``git worktree add /tmp/before <commit>``) to compare before and after.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

HEAVY = ("click", "rich", "jinja2", "yaml", "platformdirs", "httpx", "ssl", "asyncio")
PACKAGES = ("aeon_kernel", "aeon_plugins", "aeon_cli")

PROBE = """
import json, sys
from aeon_kernel import Engine
from aeon_kernel.config import AeonConfig
def seen():
    mods = sorted(sys.modules)
    return {
        "modules": {p: sum(1 for m in mods if m == p or m.startswith(p + ".")) for p in %(packages)r},
        "heavy": [h for h in %(heavy)r if h in sys.modules],
    }
out = {}
Engine(autoload=False).close()
out["Engine(autoload=False)"] = seen()
Engine().close()
out["Engine()"] = seen()
plan = {"goal": "g", "steps": [{"step_id": "1", "description": "d", "tool": "echo", "arguments": {"text": "x"}}]}
with Engine(AeonConfig().with_choice("llm", "scripted", responses=[plan])) as engine:
    engine.run("say x")
out["a scripted run on Engine()"] = seen()
print(json.dumps(out))
"""


def loaded_modules() -> dict[str, object]:
    code = PROBE % {"packages": PACKAGES, "heavy": HEAVY}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded: dict[str, object] = json.loads(result.stdout)
    return loaded


def cold_imports(repeat: int) -> dict[str, float]:
    """Median wall ms of each command, net of ``python -c pass``, the commands interleaved."""
    commands = {
        "python -c pass": "pass",
        "embedder import": "from aeon_kernel import Engine, FunctionTool, hookimpl",
        "import pydantic_graph": "import pydantic_graph",
    }
    samples: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(repeat):
        for name, code in commands.items():
            started = time.perf_counter()
            subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)
            samples[name].append((time.perf_counter() - started) * 1000)
    floor = statistics.median(samples["python -c pass"])
    return {name: round(statistics.median(values) - floor, 1) for name, values in samples.items()}


def lines(root: Path) -> dict[str, int]:
    counted = {}
    for package in PACKAGES:
        files = [p for p in (root / package).rglob("*.py") if "plugin_template" not in p.parts]
        counted[package] = sum(p.read_text(encoding="utf-8").count("\n") for p in files)
    counted["aeon_kernel/engine.py"] = (root / "aeon_kernel" / "engine.py").read_text().count("\n")
    return counted


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeat", type=int, default=21)
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args()
    import aeon_kernel

    figures = {
        "checkout": str(Path(aeon_kernel.__file__).parent.parent),
        "loaded": loaded_modules(),
        "cold import, ms net of python -c pass": cold_imports(args.repeat),
        "public names": len(aeon_kernel.__all__),
        "lines": lines(Path(aeon_kernel.__file__).parent.parent),
    }
    print(json.dumps(figures, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
