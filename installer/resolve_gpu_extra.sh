#!/usr/bin/env bash
# Check that the `gpu` extra resolves to a coherent wheel set for Linux x86_64 on Python 3.11
# and 3.12, WITHOUT installing anything (pip --dry-run --report). Needs the network (or a
# PIP_FIND_LINKS bundle), so it is not part of the default test run.
#
#   installer/resolve_gpu_extra.sh            # both Python versions
#   PY_VERSIONS="3.12" installer/resolve_gpu_extra.sh
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="${PYTHON:-python3}"
PY_VERSIONS="${PY_VERSIONS:-3.11 3.12}"
# sglang 0.5.23 publishes only cpXY manylinux_2_34_x86_64 wheels (no sdist): the box needs
# glibc >= 2.34 (Ubuntu 22.04+, RHEL 9+). pip does not widen a PEP 600 tag to older glibc tags,
# so every tag such a box accepts is listed (llguidance: 2_31; smg, faiss-gpu-cu12: 2_17).
GLIBC_MINOR="${GLIBC_MINOR:-34}"
PLATFORM_ARGS=(--platform manylinux2014_x86_64)
for minor in $(seq 17 "$GLIBC_MINOR"); do
    PLATFORM_ARGS+=(--platform "manylinux_2_${minor}_x86_64")
done
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

# the gpu extra, read from pyproject.toml (one requirement per line)
"$PY" - "$REPO/pyproject.toml" >"$WORK/gpu.txt" <<'PYEOF'
import sys, tomllib
with open(sys.argv[1], "rb") as fh:
    extra = tomllib.load(fh)["project"]["optional-dependencies"]["gpu"]
print("\n".join(extra))
PYEOF
echo "gpu extra: $(tr '\n' ' ' <"$WORK/gpu.txt")"

status=0
for ver in $PY_VERSIONS; do
    report="$WORK/report-$ver.json"
    echo "== Python $ver, manylinux x86_64 up to glibc 2.${GLIBC_MINOR}"
    if ! "$PY" -m pip install --dry-run --ignore-installed --quiet --report "$report" \
        --python-version "$ver" --implementation cp "${PLATFORM_ARGS[@]}" \
        --only-binary=:all: -r "$WORK/gpu.txt" 2>"$WORK/err-$ver.txt"; then
        echo "!! does not resolve for Python $ver:" >&2
        tail -n 20 "$WORK/err-$ver.txt" >&2
        status=1
        continue
    fi
    "$PY" - "$report" <<'PYEOF'
import json, sys
items = json.load(open(sys.argv[1]))["install"]
versions = {i["metadata"]["name"].lower(): i["metadata"]["version"] for i in items}
print(f"   packages: {len(versions)}")
for name in ("torch", "sglang", "smg", "flashinfer-python", "sgl-kernel", "xgrammar", "faiss-gpu-cu12"):
    print(f"   {name:<18} {versions.get(name, '-')}")
PYEOF
done
exit "$status"
