#!/usr/bin/env bash
# Install the dev extras into .venv and run the whole test suite (lint included).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/_install.sh cpu,dev
. .venv/bin/activate
# the browser tests drive Debian's chromium (playwright's own browser download cannot work
# air-gapped); install it where we may, else those tests skip and say why
if [ ! -x /usr/bin/chromium ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium) \
        >/dev/null 2>&1 || echo "note: could not install chromium; browser tests will skip"
fi
ruff check .
ruff format --check .
python -m pytest -p no:cacheprovider "$@"
