#!/usr/bin/env bash
# A scratch venv (.cache/sglang-args) holding SGLang's own argument parser: the sglang wheel
# and what `sglang.srt.server_args` imports, pinned, --no-deps. The tests check the tuned
# launches with it; SGLang itself is never installed into .venv (it is the GPU extra's).
# Kept while its requirements are unchanged. Exit 1 if it cannot be built: the test skips.
set -euo pipefail
cd "$(dirname "$0")/.."
req=tests/support/sglang_args_requirements.txt
dest=.cache/sglang-args
stamp="$dest/.built-$(sha256sum "$req" | cut -c1-16)"
[ -f "$stamp" ] && exit 0
rm -rf "$dest"
python3 -m venv "$dest"
"$dest/bin/pip" install -q --disable-pip-version-check --no-input --no-deps -r "$req"
"$dest/bin/python" -c "from sglang.srt.server_args import prepare_server_args"
touch "$stamp"
