"""The chat page's generating events (Send, Enter, Regenerate, Continue, Write an answer)
share one pool as big as the engine takes (its batch and its queue) plus spare workers that
refuse what the line cannot take, instead of Gradio's default of one event at a time; Gradio's
worker count grows with a bigger engine, and its queue is bounded (issue #30: it had no size
limit)."""

from __future__ import annotations

import gradio as gr

from appliance.core.config import EngineConfig
from ui.chat_page import REFUSERS, TURNS, build_chat_page

GENERATING = {"respond", "regenerate", "continue_answer", "write_answer"}


def _pools(engine: EngineConfig) -> tuple[dict[str, set], gr.Blocks]:
    page = build_chat_page(None, None, engine)  # type: ignore[arg-type]  # only built, not run
    pools: dict[str, set] = {}
    for fn in page.fns.values():
        if fn.fn is not None:
            pools.setdefault(fn.fn.__name__, set()).add((fn.concurrency_id, fn.concurrency_limit))
    return pools, page


def test_the_generating_events_share_a_pool_sized_by_the_engine() -> None:
    pools, page = _pools(EngineConfig(max_running_requests=8, max_queue=16))
    # Send and Enter (respond), Regenerate, Continue, Write an answer: one pool, the engine's
    # 8 + 16 and the workers that refuse a turn beyond the line at once
    assert REFUSERS >= 1
    assert {name: pools[name] for name in GENERATING} == {
        name: {(TURNS, 24 + REFUSERS)} for name in GENERATING
    }
    assert all(
        TURNS not in {cid for cid, _ in ids} for n, ids in pools.items() if n not in GENERATING
    )
    assert page.max_threads == page._queue.max_thread_count >= 24 + REFUSERS
    # Gradio's own queue is bounded, in proportion to the engine
    assert page._queue.max_size is not None and page._queue.max_size <= 64


def test_a_big_engine_gets_the_workers_it_needs() -> None:
    pools, page = _pools(EngineConfig(max_running_requests=64, max_queue=64))
    assert pools["respond"] == {(TURNS, 128 + REFUSERS)}
    assert page.max_threads == page._queue.max_thread_count == 128 + REFUSERS + 16
    assert 128 <= page._queue.max_size <= 256
