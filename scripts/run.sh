#!/usr/bin/env bash
# Install into .venv, prepare the models, ingest the sample corpus, create the first admin
# (password printed once) and serve on http://127.0.0.1:7860.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/_install.sh cpu
# scans and images are read by Tesseract (Korean and English): install it where we may; without
# it the appliance still runs and refuses image-only files, naming these packages
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null && ! command -v tesseract >/dev/null; then
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
        tesseract-ocr tesseract-ocr-kor tesseract-ocr-eng) >/dev/null 2>&1 \
        || echo "note: could not install Tesseract; scanned PDFs and images will be refused"
fi
. .venv/bin/activate
exec appliance serve "$@"
