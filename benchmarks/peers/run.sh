#!/usr/bin/env bash
# Celestial Memory beside Chroma, LangChain + Qdrant and mem0 (bench.py says how).
# Sets up benchmarks/peers/.venv on first use (or when requirements.txt changes), then runs
# bench.py with the service's own .venv, which must exist (make install). Arguments go to
# bench.py: --memories N, --queries N, --systems a,b, --quick, --help.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(git -C "$here" rev-parse --show-toplevel 2>/dev/null || (cd "$here/../.." && pwd))"
service_python="$root/.venv/bin/python"
if [ ! -x "$service_python" ]; then
    echo "no $root/.venv: run 'make install' first" >&2
    exit 1
fi

venv="$here/.venv"
stamp="$venv/.installed-$(cksum < "$here/requirements.txt" | cut -d' ' -f1)"
if [ ! -f "$stamp" ]; then
    python="${PYTHON:-$(command -v python3.11 || command -v python3)}"
    [ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --upgrade pip
    # torch first, and exactly 2.13.0: the CPU build is on these machines, while letting
    # sentence-transformers pick a torch pulls gigabytes of CUDA packages.
    "$venv/bin/python" -m pip install --quiet torch==2.13.0
    "$venv/bin/python" -m pip install --quiet -r "$here/requirements.txt"
    rm -f "$venv"/.installed-* && touch "$stamp"
fi

export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
exec "$service_python" "$here/bench.py" --peers-python "$venv/bin/python" "$@"
