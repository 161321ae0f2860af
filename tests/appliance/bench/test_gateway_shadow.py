"""The gateway section of ``bench ordering``: the shadows' predictions against what two real
``engine-server`` workers behind smg report, for real, on loopback."""

from __future__ import annotations

from pathlib import Path

from support.servers import free_port

from appliance.bench.ordering import gateway_shadow as gs
from appliance.bench.ordering.workload import make_workload
from appliance.wiring.cluster_plan import plan_cluster

SMALL = {"topics": 12, "chunk_words": 20, "system_words": 40, "answer_words": 8}


def test_waves_never_hold_two_turns_of_a_session_and_keep_their_order() -> None:
    workload = make_workload(6, seed=2, **SMALL)
    waves = gs.waves(workload.turns, 3)
    assert sorted(t for w in waves for t in map(id, w)) == sorted(map(id, workload.turns))
    seen: dict[int, int] = {}
    for wave in waves:
        assert len(wave) <= 3 and len({t.session for t in wave}) == len(wave)
        for turn in wave:
            assert turn.turn == seen.get(turn.session, -1) + 1  # the session's next turn
            seen[turn.session] = turn.turn


def test_every_answer_names_its_worker_and_each_shadow_is_scored(
    engine,  # noqa: ANN001
    model_dir: Path,
    tmp_path: Path,
) -> None:
    workload = make_workload(8, seed=4, count_tokens=engine.count_tokens, **SMALL)
    turns = workload.turns[:12]
    kv = 1024
    plan = plan_cluster(
        workers=2,
        model_dir=model_dir,
        served_model_name=model_dir.name,
        cpus=2,
        gateway_port=free_port(),
        metrics_port=free_port(),
        worker_ports=(free_port(), free_port()),
        worker_env={"APPLIANCE_ENGINE__KV_BUDGET_TOKENS": str(kv)},
    )
    result = gs.measure(
        workload,
        turns,
        engine.render_chat,
        plan=plan,
        kv_per_worker=kv,
        data_dir=tmp_path,
        concurrency=2,
    )
    # every answer came back with the worker that served it, and each is one of the plan's
    assert set(result.requests_per_worker) <= set(plan.worker_urls)
    assert sum(result.requests_per_worker.values()) == len(turns)
    one, guessed, told = result.predictions
    for p in result.predictions:
        assert p.requests == len(turns)
        assert (p.prompt_tokens, p.reported) == (result.prompt_tokens, result.cached_tokens)
        assert 0.0 <= p.error_share <= 1.0
    assert result.cached_tokens > 0  # the system prompt at least is reused
    assert told.routed_right == len(turns) and guessed.names_route and not told.names_route
    rows = gs.render_result(result)
    assert [r[2] for r in rows] == [one.label, guessed.label, told.label]
    assert len(rows[0]) == len(gs.HEADERS)
