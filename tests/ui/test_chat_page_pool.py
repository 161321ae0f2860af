"""The chat page's four generating events (Send, Enter, Regenerate, Continue) share one pool
as big as the engine takes (its batch and its queue), instead of Gradio's default of one
event at a time; Gradio's worker count grows with a bigger engine."""

from __future__ import annotations

from appliance.core.config import EngineConfig
from ui.chat_page import TURNS, build_chat_page

GENERATING = {"respond", "regenerate", "continue_answer"}


def _pools(engine: EngineConfig) -> tuple[dict[str, set], int, int]:
    page = build_chat_page(None, None, engine)  # type: ignore[arg-type]  # only built, not run
    pools: dict[str, set] = {}
    for fn in page.fns.values():
        if fn.fn is not None:
            pools.setdefault(fn.fn.__name__, set()).add((fn.concurrency_id, fn.concurrency_limit))
    return pools, page.max_threads, page._queue.max_thread_count


def test_the_generating_events_share_a_pool_sized_by_the_engine() -> None:
    pools, threads, workers = _pools(EngineConfig(max_running_requests=8, max_queue=16))
    # Send and Enter (respond), Regenerate, Continue: one pool, the engine's 8 + 16
    assert {name: pools[name] for name in GENERATING} == {
        name: {(TURNS, 24)} for name in GENERATING
    }
    assert all(
        TURNS not in {cid for cid, _ in ids} for n, ids in pools.items() if n not in GENERATING
    )
    assert threads == workers == 40  # Gradio's default is room enough


def test_a_big_engine_gets_the_workers_it_needs() -> None:
    pools, threads, workers = _pools(EngineConfig(max_running_requests=64, max_queue=64))
    assert pools["respond"] == {(TURNS, 128)}
    assert threads == workers == 128 + 16
