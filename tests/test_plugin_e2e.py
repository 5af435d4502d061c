"""End to end, with real processes: ``aeon plugin new`` → ``pip install`` into a fresh virtual environment next to
aeon-core (installed from this checkout as a wheel would be, not editable) → ``aeon plugins`` lists the plugin →
``aeon run`` with the scripted model calls its tool → the generated package's own tests pass.

Slow (a minute or two: pip installs aeon-core's dependencies, pytest and hypothesis from the package index), and
deliberately never skipped: it is the proof that a plugin author's path works from an installed aeon-core.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from aeon_kernel import HOOKSPEC_VERSION

ROOT = Path(__file__).resolve().parent.parent
#: What a source build of aeon-core must not pick up from the checkout.
NOT_SOURCE = (
    ".git",
    "build",
    "dist",
    "*.egg-info",
    "__pycache__",
    ".*_cache",
    ".hypothesis",
    ".benchmarks",
    ".venv",
)
PLAN = {
    "goal": "Count the words of a line of Hamlet",
    "steps": [
        {
            "step_id": "1",
            "description": "Count the words",
            "tool": "demo_word_count",
            "arguments": {"text": "to be or not to be"},
        }
    ],
}


@dataclass
class Venv:
    root: Path
    work: Path

    @property
    def bin(self) -> Path:
        return self.root / ("Scripts" if os.name == "nt" else "bin")

    @property
    def python(self) -> str:
        return str(self.bin / ("python.exe" if os.name == "nt" else "python"))

    @property
    def aeon(self) -> str:
        return str(self.bin / ("aeon.exe" if os.name == "nt" else "aeon"))

    def run(
        self, *args: str, cwd: Path | None = None, timeout: float = 300
    ) -> subprocess.CompletedProcess[str]:
        """Run a command with only the venv on PATH and none of this process's Aeon or Python settings."""
        env = {
            key: value
            for key, value in os.environ.items()
            if not key.startswith(("AEON_", "PYTHON", "VIRTUAL_ENV", "PYTEST_"))
        }
        env.update(VIRTUAL_ENV=str(self.root), PATH=os.pathsep.join([str(self.bin), env.get("PATH", "")]))
        env.update(PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INPUT="1")
        return subprocess.run(
            list(args), cwd=cwd or self.work, capture_output=True, text=True, timeout=timeout, env=env
        )

    def check(
        self, *args: str, cwd: Path | None = None, timeout: float = 300
    ) -> subprocess.CompletedProcess[str]:
        proc = self.run(*args, cwd=cwd, timeout=timeout)
        assert proc.returncode == 0, describe(proc)
        return proc


def describe(proc: subprocess.CompletedProcess[str]) -> str:
    command = " ".join(proc.args)
    return f"$ {command}\nexit status {proc.returncode}\n--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}"


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Venv]:
    """A fresh venv (no system site packages) with aeon-core[cli] built from a clean copy of this checkout."""
    base = tmp_path_factory.mktemp("e2e")
    source = base / "aeon-core"
    shutil.copytree(ROOT, source, symlinks=True, ignore=shutil.ignore_patterns(*NOT_SOURCE))
    subprocess.run([sys.executable, "-m", "venv", str(base / "venv")], check=True, timeout=300)
    env = Venv(base / "venv", base / "work")
    env.work.mkdir()
    env.check(
        env.python, "-m", "pip", "install", f"{source}[cli]", timeout=900
    )  # the plugin author uses aeon
    yield env


@pytest.fixture(scope="module")
def plugin(venv: Venv) -> Path:
    """``aeon plugin new demo`` with the venv's aeon (the template comes from the installed wheel), installed."""
    created = venv.check(venv.aeon, "plugin", "new", "demo")
    project = venv.work / "aeon-demo"
    assert "Created aeon-demo" in created.stdout and "cd aeon-demo" in created.stdout, describe(created)
    assert {p.name for p in project.iterdir()} == {
        ".gitignore",
        "README.md",
        "aeon_demo.py",
        "pyproject.toml",
        "tests",
    }
    venv.check(venv.python, "-m", "pip", "install", str(project), timeout=600)
    return project


def test_the_venv_is_isolated_and_aeon_core_is_not_editable(venv: Venv) -> None:
    probe = "import sys, aeon_kernel; print(sys.prefix != sys.base_prefix, aeon_kernel.__file__)"
    inside, location = venv.check(venv.python, "-c", probe).stdout.split()
    assert inside == "True" and Path(location).is_relative_to(venv.root), location
    assert venv.run(venv.python, "-c", "import cookiecutter").returncode != 0  # not needed, not there


def test_aeon_plugins_lists_the_plugin_with_its_hooks_and_components(venv: Venv, plugin: Path) -> None:
    # A bare install loads every plugin without error. --check also builds every component aeon.toml selects,
    # so it runs where aeon.toml picks a model a bare install can build (llama_cpp needs aeon-core[local]).
    checked = venv.work / "checked"
    checked.mkdir(exist_ok=True)
    (checked / "aeon.toml").write_text('[llm]\nuse = "scripted"\nresponses = []\n', encoding="utf-8")
    proc = venv.check(venv.aeon, "plugins", "--check", cwd=checked)
    described = json.loads(proc.stdout)
    assert described["errors"] == [], describe(proc)
    (demo,) = [p for p in described["plugins"] if p["name"] == "demo"]
    assert demo == {
        "name": "demo",
        "distribution": "aeon-demo",
        "version": "0.1.0",
        "hookspec_version": HOOKSPEC_VERSION,
        "hooks": ["aeon_register_tools"],
        "components": {"tools": ["demo_word_count"]},
    }
    # The generated README shows exactly this.
    (excerpt,) = re.findall(
        r"```json\n(.*?)```", (plugin / "README.md").read_text(encoding="utf-8"), re.DOTALL
    )
    assert excerpt.rstrip("\n") == textwrap.indent(json.dumps(demo, indent=2), "    ")
    tools = {t["name"]: t for t in json.loads(venv.check(venv.aeon, "tools").stdout)}
    assert tools["demo_word_count"]["input_schema"]["required"] == ["text"]


def test_aeon_run_calls_the_plugins_tool(venv: Venv, plugin: Path) -> None:
    run_dir = venv.work / "run"
    run_dir.mkdir()
    (run_dir / "responses.json").write_text(json.dumps([PLAN]), encoding="utf-8")
    (run_dir / "aeon.toml").write_text(
        '[llm]\nuse = "scripted"\nresponses = "responses.json"\n', encoding="utf-8"
    )
    proc = venv.check(venv.aeon, "run", "how many words are in 'to be or not to be'?", "--json", cwd=run_dir)
    result = json.loads(proc.stdout)
    assert result["status"] == "completed", describe(proc)
    assert result["answer"] == {"words": 6, "characters": 18}
    (call,) = result["final_state"]["tool_history"]
    assert call["tool_name"] == "demo_word_count" and call["result"] == {"words": 6, "characters": 18}


def test_the_generated_tests_pass_in_the_venv(venv: Venv, plugin: Path) -> None:
    venv.check(venv.python, "-m", "pip", "install", "pytest>=8", "hypothesis>=6.100", timeout=600)
    proc = venv.run(venv.python, "-m", "pytest", "-q", "-p", "no:cacheprovider", cwd=plugin, timeout=600)
    assert proc.returncode == 0, describe(proc)
    summary = proc.stdout.strip().splitlines()[-1]
    assert re.search(r"\d+ passed", summary), describe(proc)
    assert "failed" not in summary and "error" not in summary, describe(proc)
