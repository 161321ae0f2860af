#!/usr/bin/env bash
# Install into .venv, prepare the models, ingest the sample corpus, create the first admin
# (password printed once) and serve on http://127.0.0.1:7860.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/_install.sh cpu
. .venv/bin/activate
exec appliance serve "$@"
