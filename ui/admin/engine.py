"""Engine tab: backend, model, profile, launch arguments and health; live charts of cache hit
rate, TTFT p50/p95, throughput, queue depth and KV usage, refreshed by a timer; cache flush."""

from __future__ import annotations

import math

import gradio as gr

from appliance.core.auth.service import AuthService
from appliance.core.services.admin import AdminConsole
from engine.base import EngineError
from ui.admin import charts
from ui.admin.common import Loader
from ui.session import require_admin

REFRESH_S = 5.0


def status_markdown(status: dict, sampler_error: str = "") -> str:
    health = "healthy" if status.get("healthy") else "**unhealthy**"
    lines = [
        f"**{status.get('backend', '?')}** · model `{status.get('model', '?')}` · "
        f"profile {status.get('profile', '?')} · context {status.get('context_length', '?')} · "
        f"dtype {status.get('dtype', '?')} · cache page {status.get('cache_page_tokens', '?')} "
        f"token(s) · {health}",
    ]
    if status.get("runtime"):
        lines.append(f"\n{status['runtime']}")
    if status.get("error"):
        lines.append(f"\n⚠️ {status['error']}")
    if sampler_error:
        lines.append(f"\n⚠️ metrics: {sampler_error}")
    if status.get("speculation"):
        spec = status["speculation"]
        lines.append(
            f"\nspeculative decoding: {_pct(spec['accept_rate'])} of drafts accepted · "
            f"{spec['accept_length']:.2f} tokens a verify step"
        )
    if status.get("cached_by_source"):
        lines.append(f"\ncached prompt tokens by source: {_sources(status['cached_by_source'])}")
    lines += ["", "| launch argument | value |", "|---|---|"]
    lines += [f"| `{k}` | {v} |" for k, v in status.get("launch", {}).items()]
    if status.get("gateway"):
        lines += gateway_lines(status["gateway"])
    return "\n".join(lines)


def _sources(counts: dict[str, float]) -> str:
    """``device 3,064 · host 1,000`` (GPU and HiCache host RAM); ``?`` when not reported."""
    return " · ".join(f"{k} {v:,.0f}" for k, v in counts.items()) if counts else "?"


def _pct(value: float | None) -> str:
    return "?" if value is None else f"{100 * value:.1f}%"


def _count(value: float | None) -> str:
    return "?" if value is None else f"{value:.0f}"


def gateway_lines(gateway: dict) -> list[str]:
    """The model gateway and its workers, as Markdown lines."""
    if not gateway["reachable"]:
        head = f"**Gateway** `{gateway['url']}` · **down**: {gateway['error']}"
    else:
        ready = "ready" if gateway["ready"] else "**not ready: no healthy worker**"
        healthy = sum(w["healthy"] for w in gateway["workers"])
        total = len(gateway["workers"])
        head = f"**Gateway** `{gateway['url']}` · {ready} · {healthy}/{total} workers healthy"
    lines = ["", head, "", "| worker | health | running | queue | KV usage | cache hit rate |"]
    lines[-1] += " cached tokens by source |"
    lines.append("|---|---|---|---|---|---|---|")
    for w in gateway["workers"]:
        health = "healthy" if w["healthy"] else f"**{w['status']}**"
        if w["error"]:
            health += f" (metrics: {w['error'][:80]})"
        lines.append(
            f"| `{w['url']}` | {health} | {_count(w['running'])} | {_count(w['queue'])} | "
            f"{_pct(w['kv_usage'])} | {_pct(w['cache_hit_rate'])} | "
            f"{_sources(w.get('cached_by_source', {}))} |"
        )
    if gateway["metrics"]:
        counters = " · ".join(f"{k} {v:.0f}" for k, v in gateway["metrics"].items())
        lines += ["", f"gateway counters: {counters}"]
    return lines


def summary_markdown(turns: list[dict], samples: list) -> str:
    if not turns and not samples:
        return "_No data yet: ask a question in the chat._"
    parts = []
    if turns:
        last = turns[-1]
        p50, p95 = last["ttft_p50_ms"], last["ttft_p95_ms"]
        if not math.isnan(p50):
            parts.append(f"TTFT p50 **{p50:.0f} ms**, p95 **{p95:.0f} ms** (last 20 turns)")
        parts.append(f"turn cache hit rate **{100 * last['turn_hit_rate']:.0f}%**")
        if last.get("shadow_error") is not None:
            # how far the ordering's cache shadow was from the engine's cached-token reports
            parts.append(
                f"shadow prediction off by **{100 * last['shadow_error']:.1f}%** of prompt"
            )
    if samples:
        s = samples[-1]
        parts.append(
            f"engine hit rate **{100 * s.hit_rate:.0f}%** · {s.throughput_tps:.1f} tok/s · "
            f"queue {s.queue:.0f} · KV {100 * s.kv_usage:.1f}%"
        )
    return " · ".join(parts)


def build_engine_tab(console: AdminConsole, auth: AuthService) -> tuple[Loader, gr.Timer]:
    sampler = console.sampler

    def load(request: gr.Request):  # noqa: ANN202
        require_admin(request, auth)
        return status_markdown(console.engine.status(), sampler.last_error)

    def refresh(request: gr.Request):  # noqa: ANN202
        require_admin(request, auth)
        samples, turns = sampler.samples(), sampler.turn_series()
        return (
            summary_markdown(turns, samples),
            charts.hit_rate_frame(samples, turns),
            charts.ttft_frame(turns),
            charts.throughput_frame(samples),
            charts.queue_frame(samples),
            charts.kv_frame(samples),
            charts.verified_frame(turns),
        )

    def flush(request: gr.Request) -> str:
        who = require_admin(request, auth)
        try:
            console.engine.flush_cache(who.username)
        except EngineError as exc:
            raise gr.Error(f"The engine refused: {exc}") from exc
        return "Prefix cache flushed: the next prompts are computed from scratch."

    def plot(title: str, y: str, key: str, y_format: str) -> gr.LinePlot:
        return gr.LinePlot(
            charts.frame([], key),
            x="time",
            y="value",
            color="series",
            color_map=charts.SERIES[key],
            title=title,
            y_title=y,
            x_title="time (UTC)",
            x_axis_format="%H:%M:%S",
            y_axis_format=y_format,
            height=240,
            elem_id=f"chart-{key}",
        )

    with gr.Tab("Engine", id="engine"):
        status = gr.Markdown(elem_id="engine-status")
        with gr.Row():
            flush_btn = gr.Button("Flush cache", variant="stop", size="sm", elem_id="flush")
            refresh_btn = gr.Button("Refresh", size="sm")
        note = gr.Markdown(elem_id="flush-note")
        summary = gr.Markdown(elem_id="engine-summary")
        with gr.Row():
            hit = plot("Cache hit rate", "%", "hit", ".0f")
            ttft = plot("TTFT", "ms", "ttft", ",.0f")
        with gr.Row():
            tput = plot("Throughput", "tokens/s", "throughput", ".1f")
            queue = plot("Queue depth", "requests", "queue", "~g")
            kv = plot("KV cache usage", "%", "kv", ".1f")
        with gr.Row():
            verified = plot("Verified answer sentences", "%", "verified", ".0f")
        # inside the tab: a bare component directly under gr.Tabs breaks the tab bar
        timer = gr.Timer(REFRESH_S, active=False)
    chart_outputs = [summary, hit, ttft, tput, queue, kv, verified]
    timer.tick(refresh, None, chart_outputs, show_progress="hidden")

    def load_all(request: gr.Request):  # noqa: ANN202
        return load(request), *refresh(request)

    refresh_btn.click(load_all, None, [status, *chart_outputs])
    flush_btn.click(flush, None, note)
    return Loader(load_all, [status, *chart_outputs]), timer
