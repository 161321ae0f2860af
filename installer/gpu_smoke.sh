#!/usr/bin/env bash
# GPU smoke test for an H100/H200 box with an offline model directory (target: < 8 minutes).
#
#   installer/gpu_smoke.sh /models/Llama-3.1-8B-Instruct      (or MODEL_DIR=... installer/gpu_smoke.sh)
#
# 1. install the `gpu` extra (SKIP_INSTALL=1 to skip; PIP_NO_INDEX/PIP_FIND_LINKS for a bundle)
# 2. print the tuned launch (python -m engine.sglang.plan) and start SGLang with it
# 3. wait for GET /health_generate, run tests/test_engine_conformance.py against it
# 4. run `appliance bench ordering --quick` if implemented, else a small shared-prefix warm-up
# 5. print cache hit rate (sglang:cached_tokens_total / sglang:prompt_tokens_total) and TTFT
# The server is stopped on every exit path (trap).
set -euo pipefail

MODEL_DIR="${1:-${MODEL_DIR:-}}"
if [[ -z "$MODEL_DIR" || ! -f "$MODEL_DIR/config.json" ]]; then
    echo "usage: $0 MODEL_DIR   (a local Hugging Face model directory with config.json)" >&2
    exit 2
fi
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
PY="${PYTHON:-python}"
PORT="${PORT:-30000}"
URL="http://127.0.0.1:${PORT}"
READY_TIMEOUT_S="${READY_TIMEOUT_S:-420}"
LOG_DIR="${LOG_DIR:-$REPO/.cache/gpu_smoke}"
LOG="$LOG_DIR/sglang.log"
mkdir -p "$LOG_DIR"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
SERVER_PID=""
FAILED=0

stop_server() {
    if [[ -n "$SERVER_PID" ]] && kill -0 "$SERVER_PID" 2>/dev/null; then
        echo "== stopping SGLang (pid $SERVER_PID)"
        kill -TERM -- "-$SERVER_PID" 2>/dev/null || kill -TERM "$SERVER_PID" 2>/dev/null || true
        for _ in $(seq 1 30); do
            kill -0 "$SERVER_PID" 2>/dev/null || break
            sleep 1
        done
        kill -KILL -- "-$SERVER_PID" 2>/dev/null || true
    fi
    SERVER_PID=""
}
trap stop_server EXIT INT TERM

echo "== [${SECONDS}s] install the gpu extra"
if [[ "${SKIP_INSTALL:-0}" != "1" ]]; then
    "$PY" -m pip install -q -e ".[gpu]"
fi
"$PY" -c "import sglang; print('sglang', sglang.__version__)"
nvidia-smi --query-gpu=name,memory.total,memory.used,driver_version --format=csv,noheader

echo "== [${SECONDS}s] tuned launch"
# PLAN_EXTRA: more plan flags, e.g. "--host-ram-gb 0" (no HiCache) or "--context-length 8192"
read -r -a PLAN_EXTRA_ARGS <<<"${PLAN_EXTRA:-}"
PLAN_ARGS=(--model-path "$MODEL_DIR" --python "$PY" --port "$PORT" "${PLAN_EXTRA_ARGS[@]}")
"$PY" -m engine.sglang.plan "${PLAN_ARGS[@]}"
CMD="$("$PY" -m engine.sglang.plan "${PLAN_ARGS[@]}" --print command)"

echo "== [${SECONDS}s] start SGLang (log: $LOG)"
# its own session/process group, so the trap stops the scheduler and detokenizer children too
setsid bash -c "exec $CMD" >"$LOG" 2>&1 &
SERVER_PID=$!
deadline=$((SECONDS + READY_TIMEOUT_S))
until curl -sf -o /dev/null --max-time 10 "$URL/health_generate"; do
    if ! kill -0 "$SERVER_PID" 2>/dev/null || ((SECONDS > deadline)); then
        echo "!! SGLang did not become ready (exited or > ${READY_TIMEOUT_S}s); last log lines:" >&2
        tail -n 40 "$LOG" >&2
        if grep -qiE "out of memory|OutOfMemoryError" "$LOG"; then
            echo "!! CUDA OOM: lower --mem-fraction-static or --chunked-prefill-size," \
                "cap --max-running-requests" >&2
        fi
        exit 1
    fi
    sleep 2
done
echo "== [${SECONDS}s] ready"

echo "== [${SECONDS}s] engine conformance suite"
if [[ -f tests/test_engine_conformance.py ]]; then
    SGLANG_URL="$URL" "$PY" -m pytest -p no:cacheprovider -q --tb=short tests/test_engine_conformance.py \
        || FAILED=1
else
    echo "-- tests/test_engine_conformance.py not present: skipped"
fi

echo "== [${SECONDS}s] RAG benchmark"
bench_out="$(SGLANG_URL="$URL" timeout 180 "$PY" -m appliance.cli bench ordering --quick 2>&1)" \
    && bench_rc=0 || bench_rc=$?
if [[ $bench_rc -eq 0 ]]; then
    echo "$bench_out"
else
    echo "-- appliance bench ordering unavailable (rc $bench_rc: ${bench_out##*$'\n'}): skipped;"
    echo "-- sending a small shared-prefix warm-up instead"
    SGLANG_URL="$URL" "$PY" - <<'PYEOF'
import os
import httpx
url = os.environ["SGLANG_URL"] + "/generate"
prefix = "Context document. " + " ".join(f"fact {i} is about item {i}." for i in range(300))
with httpx.Client(timeout=120) as client:
    for i in range(8):
        body = {"text": f"{prefix}\nQuestion {i}: what is fact {i}?\nAnswer:",
                "sampling_params": {"max_new_tokens": 16, "temperature": 0}}
        client.post(url, json=body).raise_for_status()
print("warm-up: 8 requests sharing a prefix")
PYEOF
fi

echo "== [${SECONDS}s] cache and latency (from $URL/metrics)"
SGLANG_URL="$URL" "$PY" - <<'PYEOF'
import os
import httpx
text = httpx.get(os.environ["SGLANG_URL"] + "/metrics", timeout=10).text
def total(name):
    vals = [float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
            if line.startswith(name + "{") or line.startswith(name + " ")]
    return sum(vals)
cached, prompt = total("sglang:cached_tokens_total"), total("sglang:prompt_tokens_total")
ttft_sum = total("sglang:time_to_first_token_seconds_sum")
ttft_n = total("sglang:time_to_first_token_seconds_count")
rows = [
    ("prompt tokens", f"{prompt:.0f}"),
    ("cached tokens", f"{cached:.0f}"),
    ("cache hit rate", f"{cached / prompt:.1%}" if prompt else "n/a"),
    ("requests (TTFT count)", f"{ttft_n:.0f}"),
    ("mean TTFT", f"{ttft_sum / ttft_n * 1000:.1f} ms" if ttft_n else "n/a"),
]
for key, value in rows:
    print(f"{key:<22} {value}")
PYEOF

stop_server
echo "== [${SECONDS}s] done ($([[ $FAILED -eq 0 ]] && echo ok || echo 'conformance FAILED'))"
exit "$FAILED"
