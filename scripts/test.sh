#!/usr/bin/env bash
# Install the dev extras into .venv and run the whole test suite (lint included).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/_install.sh cpu,dev
. .venv/bin/activate
# the browser tests drive Debian's chromium (playwright's own browser download cannot work
# air-gapped), the Korean PDF and OCR tests need a Korean TTF font, and the OCR tests need
# Tesseract with Korean and English; install them where we may, else those tests skip and say why
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    wanted=""
    [ -x /usr/bin/chromium ] || wanted="$wanted chromium"
    [ -f /usr/share/fonts/truetype/nanum/NanumGothic.ttf ] || wanted="$wanted fonts-nanum"
    for pkg in tesseract-ocr tesseract-ocr-kor tesseract-ocr-eng; do
        dpkg-query -W -f '${db:Status-Status}' "$pkg" 2>/dev/null | grep -qx installed \
            || wanted="$wanted $pkg"
    done
    if [ -n "$wanted" ]; then
        # shellcheck disable=SC2086
        (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $wanted) \
            >/dev/null 2>&1 || echo "note: could not install$wanted; the tests that need it skip"
    fi
fi
# the real identity servers of the sign-in tests: slapd (apt) and an OpenID Provider (npm);
# best effort, those tests skip and say why without them
bash scripts/directory_test_servers.sh
# SGLang's own argument parser, in a scratch venv, checks the tuned GPU launches; best effort:
# without it (no network on a first run) that test skips and says why
bash scripts/sglang_args_env.sh >/dev/null 2>&1 \
    || echo "note: could not build .cache/sglang-args; the SGLang launch-args test skips"
ruff check .
ruff format --check .
python -m pytest -p no:cacheprovider "$@"
