#!/usr/bin/env bash
# The RAG appliance's one-command installer (see installer/README.md).
#
#   bash install.sh                      # detect the hardware, install, start, smoke-test
#   bash install.sh --upgrade            # back up, install the new version, restart
#   bash install.sh --uninstall [--purge]
#   bash install.sh bundle build OUT     # on a connected machine: the offline bundle
#
# It finds a Python >= 3.11 and runs the `installer` package: from the project wheel when this
# script sits in an offline bundle (wheelhouse/ beside it), else from the source checkout.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

PY=""
for cand in "${PYTHON:-}" python3.13 python3.12 python3.11 python3; do
    [[ -n "$cand" ]] || continue
    if command -v "$cand" >/dev/null 2>&1 \
        && "$cand" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' 2>/dev/null; then
        PY="$(command -v "$cand")"
        break
    fi
done
if [[ -z "$PY" ]]; then
    echo "install.sh: Python >= 3.11 is required (e.g. apt-get install python3.11 python3.11-venv," \
        "or set PYTHON=/path/to/python3.11)" >&2
    exit 2
fi
if ! "$PY" -c 'import venv, ensurepip' 2>/dev/null; then
    echo "install.sh: $PY lacks venv/ensurepip (apt-get install python3-venv)" >&2
    exit 2
fi

shopt -s nullglob
wheels=("$HERE"/wheelhouse/rag_appliance-*.whl)
if [[ ${#wheels[@]} -eq 1 ]]; then
    # an offline bundle: run the installer from the project wheel, install from the bundle
    export PYTHONPATH="${wheels[0]}"
    if [[ "${1:-}" != "bundle" ]]; then
        set -- --bundle "$HERE" "$@"
    fi
else
    export PYTHONPATH="$(cd "$HERE/.." && pwd)"
fi
exec "$PY" -m installer "$@"
