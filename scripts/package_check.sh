#!/usr/bin/env bash
# Packaging check: Aeon works as a user gets it, not only as this editable checkout.
#
# Builds the sdist and the wheel from a clean copy of the working tree, installs the wheel (no extras) into a fresh
# venv without system site packages, and checks there: the wheel ships every package file; a bare install brings
# only the core dependencies; the README's embedding runs on the scripted model; a third-party plugin installed
# from its own package is found by its entry point, runs, and is listed with its distribution; `aeon` without the
# [cli] extra says how to get it; with [cli], `aeon run` completes a scripted run. The Python half of the checks is
# scripts/package_smoke.py. One line per check; on a failure, which check and why, and exit status 1.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"
PYTHON="${PYTHON:-python3}"
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1

check="setting up"
work="$(mktemp -d "${TMPDIR:-/tmp}/aeon-package-check.XXXXXX")"
finish() {
    local status=$?
    rm -rf "$work"
    if ((status != 0)); then
        echo "package check FAILED: $check (exit status $status)" >&2
    fi
}
trap finish EXIT
started=$SECONDS

begin() { check="$1"; }
ok() { echo "ok   $check${1:+ ($1)}"; }
# Run a command with its output kept aside, shown only when it fails.
quiet() {
    local status=0
    "$@" >"$work/output.log" 2>&1 || status=$?
    if ((status != 0)); then
        tail -n 60 "$work/output.log" >&2
    fi
    return "$status"
}

venv="$work/venv"
mkdir -p "$work/run" "$work/smoke"
smoke="$work/smoke/package_smoke.py"  # a copy, so that nothing of the checkout is on the venv's sys.path
cp "$ROOT/scripts/package_smoke.py" "$smoke"
# The venv's commands run from outside the checkout, with the venv first on PATH and none of this shell's Python
# or Aeon settings; Aeon's data directory is a temporary one.
clean_env=(env -u PYTHONPATH -u PYTHONHOME -u PYTHONSTARTUP -u PYTHONSAFEPATH -u PYTHONUSERBASE)
while IFS= read -r name; do
    clean_env+=(-u "$name")
done < <(compgen -e | grep '^AEON_' || true)
clean_env+=(VIRTUAL_ENV="$venv" PATH="$venv/bin:$PATH" AEON_DATA_DIR="$work/data")
in_venv() { (cd "$work/run" && "${clean_env[@]}" "$@"); }

# --- 1. build --------------------------------------------------------------------------------------------------
begin "build the sdist and the wheel"
# From a copy of what git would commit (tracked and untracked-but-not-ignored files), so that neither build
# outputs nor leftovers of the editable install reach the build, and the checkout is left untouched.
mkdir -p "$work/src" "$work/dist"
if git -C "$ROOT" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    (cd "$ROOT" && git ls-files -z --cached --others --exclude-standard) |
        while IFS= read -r -d '' file; do
            if [[ -e "$ROOT/$file" || -L "$ROOT/$file" ]]; then printf '%s\0' "$file"; fi
        done |
        tar -C "$ROOT" --null --no-recursion -T - -cf - | tar -C "$work/src" -xf -
else
    cp -a "$ROOT/." "$work/src/"
    rm -rf "$work/src"/{build,dist,.venv,.git} "$work/src"/*.egg-info
fi
if ! "$PYTHON" -c "import build" >/dev/null 2>&1; then
    quiet "$PYTHON" -m pip install --quiet build
fi
quiet "$PYTHON" -m build --outdir "$work/dist" "$work/src"
wheels=("$work"/dist/aeon_core-*.whl)
sdists=("$work"/dist/aeon_core-*.tar.gz)
if [[ ${#wheels[@]} != 1 || ! -f "${wheels[0]}" || ${#sdists[@]} != 1 || ! -f "${sdists[0]}" ]]; then
    echo "expected one wheel and one sdist in dist/, found: $(ls "$work/dist")" >&2
    false
fi
wheel="${wheels[0]}"
ok "$(basename "${sdists[0]}"), $(basename "$wheel")"

begin "the wheel ships every package file, the core dependencies and pyproject's entry points"
(cd "$work/src" && find aeon_kernel aeon_plugins aeon_cli \( -type f -o -type l \) \
    ! -path '*/__pycache__/*' ! -name '*.pyc' | LC_ALL=C sort) >"$work/package-files.txt"
"$PYTHON" "$smoke" contents "$wheel" "${sdists[0]}" "$work/src/pyproject.toml" "$work/package-files.txt"
ok "$(wc -l <"$work/package-files.txt" | tr -d ' ') files"

# --- 2. a bare install -----------------------------------------------------------------------------------------
begin "install the wheel without extras into a clean venv"
"$PYTHON" -m venv "$venv"
quiet in_venv python -m pip install --quiet "$wheel"
ok

begin "a bare install holds aeon-core's core dependencies only (no click, rich, jinja2, yaml, platformdirs, httpx, llama_cpp)"
in_venv python "$smoke" isolation
ok

# --- 3. embedding and a third-party plugin ---------------------------------------------------------------------
begin "embedding: a scripted run calls the calculator and completes"
in_venv python "$smoke" embed
ok

begin "aeon without the [cli] extra says how to install it and exits 2"
status=0
in_venv aeon --help >"$work/no-cli.out" 2>&1 || status=$?
if [[ $status != 2 ]] || ! grep -qF "pip install 'aeon-core[cli]'" "$work/no-cli.out"; then
    echo "exit status $status, output:" >&2
    cat "$work/no-cli.out" >&2
    false
fi
ok "$(head -n 1 "$work/no-cli.out")"

begin "a third-party plugin package installs (non-editable) next to aeon-core"
in_venv python "$smoke" write-plugin "$work/demo-tool"
quiet in_venv python -m pip install --quiet "$work/demo-tool"
in_venv python "$smoke" isolation --allow aeon-demo-tool
ok

begin "the plugin is found by its entry point: its tool runs and describe_plugins() lists it with its distribution"
in_venv python "$smoke" plugin
ok

# --- 4. the command line ---------------------------------------------------------------------------------------
begin "install the [cli] extra from the wheel"
quiet in_venv python -m pip install --quiet "$wheel[cli]"
in_venv python "$smoke" isolation --extras cli --allow aeon-demo-tool
ok "click, rich, jinja2, yaml, platformdirs; still no httpx, llama_cpp"

begin "aeon run --json on the scripted model completes with the answer"
cli="$work/cli"
mkdir -p "$cli"
in_venv python "$smoke" write-script "$cli/script.json"
printf '[llm]\nuse = "scripted"\nresponses = "script.json"\n' >"$cli/aeon.toml"
(cd "$cli" && "${clean_env[@]}" aeon run --config aeon.toml --no-log --json "add 5 and 10") >"$work/run.json"
in_venv python "$smoke" cli-result "$work/run.json"
ok

begin "aeon run (the live view) exits 0 and shows the answer, and --no-log records nothing"
(cd "$cli" && "${clean_env[@]}" aeon run --config aeon.toml --no-log "add 5 and 10") >"$work/run.out" 2>&1 || {
    cat "$work/run.out" >&2
    false
}
if ! grep -q "COMPLETED  answer: 15" "$work/run.out"; then
    cat "$work/run.out" >&2
    false
fi
if [[ -e "$work/data" ]]; then
    echo "--no-log wrote to the data directory: $(find "$work/data")" >&2
    false
fi
ok

check="done"
echo "package check passed in $((SECONDS - started))s"
