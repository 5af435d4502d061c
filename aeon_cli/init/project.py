"""What ``aeon init`` writes: a deployable project rendered from ``templates/`` with Jinja2 (as ``aeon plugin new``
renders its template, without cookiecutter), and a lock of the packages installed here.

The lock (``requirements.txt``) pins, as ``name==version`` lines, aeon-core and every package it needs with the
extras the template uses, followed through their own dependencies: what is installed in this environment, read
with :mod:`importlib.metadata`, so the image and the cluster run what was tested here. ``aeon-project.toml``
records its sha256; the engine compares it with the file's current hash and the run manifest says whether they
still match (``Engine.manifest()["project"]``).

Everything is rendered in memory before the first file is written, so a missing package or a broken template
leaves the directory as it was.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.metadata
import json
import os
import platform
import re
import shlex
import sys
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from aeon_kernel.errors import AeonError
from aeon_kernel.version import __version__

if TYPE_CHECKING:
    import jinja2

TEMPLATE_DIR: Final = Path(__file__).resolve().parent / "templates"
PROJECT_FILE: Final = "aeon-project.toml"
LOCK_FILE: Final = "requirements.txt"
DISTRIBUTION: Final = "aeon-core"
#: The input of the smoke command: the example flow greets it.
SMOKE_INPUT: Final = {"name": "smoke"}
#: llama.cpp's portable CPU build (scripts/setup.sh): its default native build crashes on some machines.
CMAKE_ARGS: Final = "-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON"
NAME_PATTERN: Final = re.compile(r"[a-z][a-z0-9]*(?:-[a-z0-9]+)*")
MAX_NAME_LENGTH: Final = 40

_COMMON: Final = (
    "aeon.toml",
    "flows/hello/flow.yaml",
    "flows/hello/schemas/name.json",
    "flows/hello/schemas/greeting.json",
    "Dockerfile",
    ".dockerignore",
    "compose.yaml",
    ".gitignore",
    "var/.gitignore",
    "wheels/README.md",
    "README.md",
)
#: An output path whose template is named otherwise (dotfiles are not shipped as dotfiles in the wheel).
_SOURCES: Final = {
    ".dockerignore": "dockerignore",
    ".gitignore": "gitignore",
    "var/.gitignore": "var-gitignore",
}

#: What each file is for, as the command's report and the project's README list them.
NOTES: Final = {
    "aeon.toml": "the configuration the deployment runs with",
    "smoke.toml": "aeon.toml without Redis or a model server: the smoke command's",
    "flows/hello/flow.yaml": "an example flow of deterministic nodes (no model)",
    "flows/hello/schemas/name.json": "the example flow's input",
    "flows/hello/schemas/greeting.json": "the example flow's output",
    ".dockerignore": "what `docker build` leaves out: var/, .venv/, .git/",
    ".gitignore": "local environments",
    "var/.gitignore": "var/ holds what runs write (state, memory, logs): kept, its contents ignored",
    "requirements.txt": "the lock: every package pinned to the version installed here",
    "aeon-project.toml": "the template and the lock's sha256, which each run's manifest checks",
    "Dockerfile": "the image: python slim, the locked packages, a non-root user, `aeon` as entrypoint",
    "compose.yaml": "the services to run locally with Docker",
    "ray-cluster.yaml": "a Ray cluster for `ray up`: a head node type and a worker node type",
    "wheels/README.md": "where the aeon-core wheel goes (aeon-core is not on PyPI)",
    "README.md": "the bootstrap steps and the smoke command",
}


@dataclass(frozen=True)
class Template:
    """A project layout: the aeon-core extras it runs with, the files it has, the config its smoke uses."""

    description: str
    extras: tuple[str, ...]
    smoke_config: str
    files: tuple[str, ...]
    #: extras that may not exist as aeon-core extras yet, and the package to pin in their place
    fallbacks: dict[str, str] = field(default_factory=dict)

    @property
    def services(self) -> bool:
        """Whether the deployment uses Redis and a model server (the smoke then runs without them)."""
        return "redis" in self.extras


TEMPLATES: Final = {
    "local": Template(
        "one machine: the embedded model (llama.cpp), SQLite state and memory",
        ("cli", "flow", "local"),
        "aeon.toml",
        _COMMON,
    ),
    "service": Template(
        "a service: Redis state and memory, an OpenAI-compatible model server",
        ("cli", "flow", "openai", "redis"),
        "smoke.toml",
        (*_COMMON, "smoke.toml"),
    ),
    "ray": Template(
        "the service template on a Ray cluster",
        ("cli", "flow", "openai", "redis", "ray"),
        "smoke.toml",
        (*_COMMON, "smoke.toml", "ray-cluster.yaml"),
        fallbacks={"ray": "ray"},
    ),
}


class InitError(AeonError):
    """The project cannot be created as asked (a non-empty directory, an invalid name, a missing package)."""


@dataclass(frozen=True)
class Created:
    """What ``aeon init`` made: where, with which template and name, its files, its smoke command."""

    directory: Path
    template: str
    name: str
    files: tuple[str, ...]
    smoke: str
    packages: int


def smoke_command(template: str) -> str:
    """The project's smoke command: the example flow, offline, with the configuration that needs no service."""
    config = TEMPLATES[template].smoke_config
    argv = ["aeon", "flow", "run", "flows/hello", "--config", config, "--input", json.dumps(SMOKE_INPUT)]
    return shlex.join(argv)


def default_name(directory: Path) -> str:
    """The project's name from its directory's: lower case, other characters as hyphens."""
    return re.sub(r"[^a-z0-9]+", "-", directory.resolve().name.lower()).strip("-")


def check_name(name: str, *, given: bool = True) -> str:
    """``name`` when it can name the project everywhere it appears (compose project, Redis namespace, Ray
    cluster, image tag); an InitError saying what a valid one looks like otherwise."""
    if NAME_PATTERN.fullmatch(name) and len(name) <= MAX_NAME_LENGTH:
        return name
    where = f"--name {name!r}" if given else f"the directory's name (giving {name!r})"
    raise InitError(
        f"{where} cannot name the project: use lower-case letters, digits and single hyphens, starting with a "
        f"letter, at most {MAX_NAME_LENGTH} characters" + ("" if given else "; give one with --name")
    )


def create(directory: str | Path, template: str, *, name: str | None = None, force: bool = False) -> Created:
    """Write the ``template`` project into ``directory`` (created when missing) and return what was made.

    A directory that exists and is not empty is refused unless ``force``; with ``force`` the template's files
    replace what is there under their names, and every other file stays.
    """
    if template not in TEMPLATES:
        raise InitError(f"unknown template {template!r}: choose one of {', '.join(TEMPLATES)}")
    target = Path(directory)
    if target.exists() and not target.is_dir():
        raise InitError(f"{target} exists and is not a directory: choose another DIR")
    if target.is_dir() and not force and any(target.iterdir()):
        raise InitError(
            f"{target} is not empty: choose an empty or new directory, or pass --force to write the "
            "template's files over the ones of the same names (nothing was written)"
        )
    project = check_name(name) if name is not None else check_name(default_name(target), given=False)
    files = render(template, project)
    try:
        target.mkdir(parents=True, exist_ok=True)
        for relative, text in files.items():
            _write(target / relative, text)
    except OSError as exc:
        raise InitError(f"cannot write the project in {target}: {exc.strerror or exc}") from None
    lock = files[LOCK_FILE]
    return Created(
        directory=target,
        template=template,
        name=project,
        files=tuple(sorted(files)),
        smoke=smoke_command(template),
        packages=sum(1 for line in lock.splitlines() if line and not line.startswith("#")),
    )


def render(template: str, name: str) -> dict[str, str]:
    """Every file of the project, by relative path: the lock, ``aeon-project.toml`` and the rendered templates."""
    chosen = TEMPLATES[template]
    lock = lock_text(name, template, pinned_requirements(*_roots(chosen)))
    context = {
        "name": name,
        "template": template,
        "description": chosen.description,
        "aeon_version": __version__,
        "python": f"{sys.version_info.major}.{sys.version_info.minor}",
        "python_tag": f"{sys.version_info.major}{sys.version_info.minor}",
        "ray_version": _installed("ray") if template == "ray" else None,
        "ray_executor": template == "ray" and ray_executor_accepted(),
        "cmake_args": CMAKE_ARGS,
        "smoke": smoke_command(template),
        "smoke_config": chosen.smoke_config,
        "services": chosen.services,
        "lock_sha256": hashlib.sha256(lock.encode("utf-8")).hexdigest(),
        "notes": NOTES,
    }
    env = _environment()
    files = {LOCK_FILE: lock}
    for relative in (*chosen.files, PROJECT_FILE):
        source = _SOURCES.get(relative, relative) + ".jinja"
        files[relative] = _render(
            env, source, {**context, "files": sorted({*chosen.files, LOCK_FILE, PROJECT_FILE})}
        )
    return files


# --- the lock ----------------------------------------------------------------------------------------------------


def _roots(chosen: Template) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The aeon-core extras to follow, and the packages to pin in place of extras aeon-core does not have."""
    provided = set(importlib.metadata.metadata(DISTRIBUTION).get_all("Provides-Extra") or ())
    extras = tuple(extra for extra in chosen.extras if extra in provided)
    missing = [extra for extra in chosen.extras if extra not in provided]
    unknown = [extra for extra in missing if extra not in chosen.fallbacks]
    if unknown:
        raise InitError(
            f"the installed aeon-core has no extra {', '.join(unknown)}: install the aeon-core this command "
            "comes with (pip install -e /path/to/aeon)"
        )
    return extras, tuple(chosen.fallbacks[extra] for extra in missing)


def pinned_requirements(extras: Iterable[str], packages: Iterable[str] = ()) -> dict[str, str]:
    """Installed version by normalised name of aeon-core, with ``extras``, and of ``packages``, and of everything
    they require in this environment (markers evaluated for this interpreter and platform).

    A requirement that is not installed, or whose installed version does not satisfy it, is an InitError: a
    lock that pins what was never tested here would be a guess.
    """
    requirement_type = _requirement_type()
    pins: dict[str, str] = {}
    walked: set[tuple[str, str]] = set()
    todo: list[tuple[str, frozenset[str], Any, str]] = [
        (DISTRIBUTION, frozenset(extras), None, "the template"),
        *((package, frozenset(), None, "the template") for package in packages),
    ]
    while todo:
        name, wanted, requirement, needed_by = todo.pop()
        try:
            dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            raise InitError(
                f"{needed_by} needs {name}, which is not installed here: install it (pip install "
                f"{shlex.quote(str(requirement or name))}, or the aeon-core extra that brings it) and run "
                "aeon init again; the lock pins what is installed"
            ) from None
        key = canonical_name(dist.metadata["Name"] or name)
        if requirement is not None and not _satisfies(requirement, dist.version):
            raise InitError(
                f"{needed_by} requires {requirement}, but {key} {dist.version} is installed: fix the "
                "environment (pip check lists every conflict) and run aeon init again"
            )
        pins[key] = dist.version
        for extra in ("", *sorted(wanted)):
            if (key, extra) in walked:
                continue
            walked.add((key, extra))
            for raw in dist.requires or ():
                child = requirement_type(raw)
                if child.marker is None:
                    if extra:
                        continue  # followed once, without the extra
                elif not child.marker.evaluate({"extra": extra}) or (
                    extra and child.marker.evaluate({"extra": ""})
                ):
                    continue  # not needed here, or followed once, without the extra
                todo.append((child.name, frozenset(child.extras), child, f"{key} {dist.version}"))
    return pins


def lock_text(name: str, template: str, pins: dict[str, str]) -> str:
    """``requirements.txt``: a header saying where the pins come from, then ``name==version`` lines, sorted."""
    where = (
        f"{platform.python_implementation()} {platform.python_version()} on {platform.system()} "
        f"{platform.machine()}"
    )
    header = [
        f"# {name}: the lock of the {template} template, written by aeon init {__version__}.",
        f"# Every package pinned to the version installed where it ran ({where}).",
        "# aeon-core is not on PyPI: pip install --find-links wheels -r requirements.txt (wheels/README.md).",
        f"# {PROJECT_FILE} records this file's sha256: update lock_sha256 there when you change a pin.",
    ]
    return "\n".join([*header, *(f"{key}=={pins[key]}" for key in sorted(pins))]) + "\n"


def canonical_name(name: str) -> str:
    """The normalised form of a distribution name (PEP 503): lower case, runs of ``-_.`` as one hyphen."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirement_type() -> Any:
    """``packaging``'s Requirement, which reads the markers; pip's copy when ``packaging`` is not installed."""
    for module in ("packaging.requirements", "pip._vendor.packaging.requirements"):
        try:
            return importlib.import_module(module).Requirement
        except ImportError:
            continue
    raise InitError("aeon init reads the dependencies' markers with 'packaging': pip install packaging")


def _satisfies(requirement: Any, version: str) -> bool:
    try:
        return bool(requirement.specifier.contains(version, prereleases=True))
    except Exception:  # a version packaging cannot parse: pip would have said so at install time
        return True


def ray_executor_accepted() -> bool:
    """Whether this Aeon has the ``ray`` executor (``[executor] use = "ray"``): the ray template writes the section
    only then, else it leaves the settings as comments."""
    from importlib.metadata import entry_points

    return any(ep.name == "ray" for ep in entry_points(group="aeon"))


def _installed(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        raise InitError(f"{name} is not installed: pip install {name}, then run aeon init again") from None


def wheel_command(wheels: Path) -> str:
    """How to put the aeon-core wheel in ``wheels``: built from the checkout this aeon-core runs from (or was
    installed from) when there is one, else from a placeholder path."""
    return shlex.join(
        ["pip", "wheel", "--no-deps", "--wheel-dir", _shown(wheels), _checkout() or "/path/to/aeon"]
    )


def _checkout() -> str | None:
    """The source directory of the running aeon-core: the checkout its package sits in, or the directory pip
    installed it from (``direct_url.json``)."""
    here = Path(__file__).resolve().parents[3]
    if (here / "pyproject.toml").is_file() and (here / "aeon_kernel").is_dir():
        return str(here)
    try:
        raw = importlib.metadata.distribution(DISTRIBUTION).read_text("direct_url.json")
        url = json.loads(raw or "{}").get("url", "")
    except (ValueError, AttributeError):
        return None
    if isinstance(url, str) and url.startswith("file://"):
        from urllib.parse import unquote, urlsplit

        return unquote(urlsplit(url).path)
    return None


# --- rendering and writing ---------------------------------------------------------------------------------------


def _environment() -> jinja2.Environment:
    import jinja2

    env = jinja2.Environment(  # noqa: S701 - renders TOML, YAML, Dockerfiles and Markdown, never HTML
        loader=jinja2.FileSystemLoader(TEMPLATE_DIR),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["toml"] = lambda value: json.dumps(value, ensure_ascii=False)
    env.filters["shell"] = shlex.quote
    return env


def _render(env: jinja2.Environment, source: str, context: dict[str, Any]) -> str:
    import jinja2

    try:
        return env.get_template(source).render(**context)
    except jinja2.TemplateError as exc:
        raise InitError(f"the project template {source} cannot be rendered: {exc}") from None


def _write(path: Path, text: str) -> None:
    """Write ``path`` whole or not at all; an existing file (or a symlink) is replaced, never written through."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, staging = tempfile.mkstemp(prefix=f".{path.name}-", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as out:
            out.write(text)
        os.chmod(staging, 0o644)
        os.replace(staging, path)
    except BaseException:
        Path(staging).unlink(missing_ok=True)
        raise


def _shown(path: Path) -> str:
    """``path`` as the user would type it from here: relative when it is below the working directory."""
    absolute = path.resolve()
    try:
        return str(absolute.relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(absolute)


def report(created: Created) -> str:
    """What ``aeon init`` prints: the files and what each is for, then the bootstrap steps."""
    chosen = TEMPLATES[created.template]
    width = max(len(path) for path in created.files) + 2
    lines = [f"Created {created.name}, an Aeon {created.template} project, in {created.directory.resolve()}:"]
    lines += [f"  {path:<{width}}{NOTES.get(path, '')}".rstrip() for path in created.files]
    lines += [
        f"The lock pins {created.packages} packages. Next steps (README.md has them all):",
        f"  cd {shlex.quote(_shown(created.directory))}",
        f"  {created.smoke}",
        "      # the smoke test: offline, no model" + (", no Redis" if chosen.services else ""),
        f"  {wheel_command(Path('wheels'))}",
        "      # the aeon-core wheel the image installs (aeon-core is not on PyPI)",
        "  docker compose up --build",
    ]
    if created.template == "ray":
        lines.append("  ray up ray-cluster.yaml      # a cluster on AWS: edit provider and node_config first")
    return "\n".join(lines)
