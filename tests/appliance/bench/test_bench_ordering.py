"""``appliance bench ordering``: the --quick run prints its tables; the QA scoring runs on the
real engine over the sample corpus."""

from __future__ import annotations

from pathlib import Path

from support.cli import run_appliance

from appliance.bench.ordering.engine import qa_items, qa_run


def test_bench_ordering_quick_prints_its_tables(model_dir: Path, tmp_path: Path) -> None:
    out = run_appliance(["bench", "ordering", "--quick"], model_dir, tmp_path, 240)
    assert "| capacity | strategy" in out and "| 8,000    | prefix" in out
    for name in ("relevance", "doc_id", "prefix"):
        assert f"| {name} " in out
    assert "| strategy     | hit ratio | prefill tokens | TTFT p50" in out
    assert "| hit ratio >= 0.74 (prefix)" in out and "TTFT p50 <= 0.6 x relevance" in out
    # the per-turn layout: its rows (turns appended / re-laid, the shadow's prediction error)
    # and its targets
    rows = [line for line in out.splitlines() if line.startswith("| 8,000    | adaptive")]
    appended, relaid = rows[0].split("|")[-2].split(",")[0].split("/")
    assert int(appended) + int(relaid) > 0
    for target in ("adaptive prefill <= 1.01 x the better", "adaptive prompt tokens <= append"):
        assert f"| {target}" in out
    assert "adaptive TTFT p50 <= relevance's and contextpilot's" in out
    # the cache-granularity table: whole pages reuse about what every token does, or less (a
    # paged cache stores fewer tokens, so its LRU may keep a little more); the adaptive layout
    # also with its shared segments aligned to pages, which at page 1 changes nothing
    lines = out.splitlines()
    top = lines.index(next(line for line in lines if "| hit, page 1 | hit, page 16 |" in line))
    table = {
        cells[1]: cells[2:]
        for line in lines[top + 2 :]
        if line.startswith("| 8,000 ")
        for cells in [[c.strip() for c in line.strip("|").split("|")]]
    }
    assert set(table) == {
        "relevance",
        "prefix",
        "prefix+rider",
        "adaptive",
        "adaptive, aligned: system",
        "adaptive, aligned: block",
    }
    for name, cells in table.items():
        hits = [float(x) for x in cells[:3]]
        assert max(hits[1:]) <= hits[0] + 0.02, (name, hits)
    assert table["adaptive, aligned: block"][0] == table["adaptive"][0]  # page 1: no padding
    assert table["adaptive"][-1].startswith(">= 1.")  # the bound padding cannot beat


def test_qa_scoring_counts_citations_of_the_gold_chunk(appliance, engine) -> None:  # noqa: ANN001
    items = qa_items(2)
    retrieved = [appliance.knowledge.retrieve(i["question"], 4)[0] for i in items]
    system = appliance.config.chat.system_prompt
    quality = qa_run(engine, items, retrieved, system, ["relevance", "prefix"], 16384, 8)
    for q in quality.values():
        assert q.questions == 2 and q.retrieved == 2  # both gold chunks are retrieved
        assert 0 <= q.hits <= q.grounded <= q.retrieved and 0.0 <= q.grounded_score <= 100.0


def test_workload_candidates_rank_beyond_the_top_k_without_changing_it() -> None:
    from appliance.bench.ordering.workload import make_workload

    plain = make_workload(60, candidates=0, seed=3)
    riders = make_workload(60, candidates=4, seed=3)
    # the candidates have their own random stream: the rest of the workload is unchanged
    assert [t.retrieved for t in plain.turns] == [t.retrieved for t in riders.turns]
    assert all(not t.candidates for t in plain.turns)
    on_topic = total = 0
    for t in riders.turns:
        required = {c.chunk_id for c in t.retrieved}
        ranked = [c.chunk_id for c in t.candidates]
        assert len(ranked) == 4 and len(set(ranked)) == 4 and not required & set(ranked)
        scores = [c.score for c in (*t.retrieved, *t.candidates)]
        assert scores == sorted(scores, reverse=True)  # ranks continue after the top-k
        topic = t.retrieved[0].document_id
        on_topic += sum(c.document_id == topic for c in t.candidates)
        total += len(ranked)
    assert 0.7 < on_topic / total < 1.0  # mostly the same topic, a share from others


def test_replay_with_riders_keeps_conversations_append_only(engine) -> None:  # noqa: ANN001
    from appliance.bench.ordering.radix import RadixLRU
    from appliance.bench.ordering.replay import PieceTokenizer, Replayer, simulator_backend
    from appliance.bench.ordering.workload import make_workload
    from rag.ordering import default_ordering

    workload = make_workload(40, topics=4, chunk_words=20, system_words=40, answer_words=8)
    pieces = PieceTokenizer(engine.encode)
    serve = simulator_backend(RadixLRU(10**6), pieces)
    sent: list[list[int]] = []

    def backend(messages, answer):  # noqa: ANN001, ANN202
        sent.append(pieces.chat(messages) + list(pieces.piece(answer)))
        return serve(messages, answer)

    player = Replayer(workload, default_ordering(10**6), "prefix", backend, riders=2)
    last: dict[int, list[int]] = {}
    for turn in workload.turns:
        player.play(turn)
        ids = sent[-1]
        if turn.session in last:  # the turn extends the previous prompt and answer, verbatim
            assert ids[: len(last[turn.session])] == last[turn.session]
        last[turn.session] = ids
        present = player.conversations[turn.session].present
        assert all(c.chunk_id in present for c in turn.retrieved)  # required: always there
    assert 0 < player.outcome.riders <= 2 * player.outcome.requests


def test_the_prefill_target_names_every_capacity_that_misses_it() -> None:
    from appliance.bench.ordering.replay import ADAPTIVE_ROW, RELAY_ROW, RIDERS, Outcome
    from appliance.bench.ordering.sim import simulator_targets

    def run(prefill: int, prompt: int = 10_000) -> Outcome:
        return Outcome(prompt_tokens=prompt, cached_tokens=prompt - prefill)

    per_cap = {
        16_000: {
            "contextpilot": run(1000),
            "prefix": run(970),
            RIDERS: run(960),
            RELAY_ROW: run(890, 8000),
            ADAPTIVE_ROW: run(900, 9000),
        },
        64_000: {
            "contextpilot": run(1000),
            "prefix": run(950),
            RIDERS: run(870),
            RELAY_ROW: run(2000, 8000),
            ADAPTIVE_ROW: run(880, 10_001),
        },
    }
    rows = {target: (measured, met) for target, measured, met in simulator_targets(per_cap)}
    assert rows["prefill <= 0.9 x contextpilot, every capacity"] == (
        "0.970 / 0.950",
        "NO (at 16,000, 64,000)",
    )
    assert rows[f"prefill <= 0.9 x contextpilot, every capacity ({RIDERS})"] == (
        "0.960 / 0.870",
        "NO (at 16,000)",
    )
    assert rows[f"hit ratio >= 0.74 ({RIDERS})"] == ("best 0.913", "yes")
    # the adaptive layout: 0.95 x below 32k, 0.90 x from there; against the better of append
    # (prefix+rider) and re-lay; and never more prompt tokens than appending
    assert rows["adaptive prefill <= 0.90 x contextpilot (>= 32k), 0.95 x (16k)"] == (
        "0.900 / 0.880",
        "yes",
    )
    assert rows["adaptive prefill <= 1.01 x the better of append and re-lay"] == (
        "1.011 / 1.011",
        "NO",
    )
    assert rows["adaptive prompt tokens <= append-only's"] == ("0.900 / 1.000", "NO (at 64,000)")
    # without ContextPilot installed there is nothing to compare with
    assert ("prefill <= 0.9 x contextpilot", "not installed", "-") in simulator_targets(
        {16_000: {"prefix": run(970)}}
    )


def test_the_engine_slice_holds_each_answer_as_if_it_had_generated_it(engine) -> None:  # noqa: ANN001
    import uuid

    from appliance.bench.ordering.engine import engine_backend

    serve = engine_backend(engine)
    system = f"Policy {uuid.uuid4().hex}: answer from the documents. " * 8
    first = (("system", system), ("user", "Documents: [1] VPN resets are self-service."))
    answer = "Reset it on the portal [1]."
    served = serve(first, answer)
    assert served.cached_tokens < served.prompt_tokens // 2  # a new prompt
    assert served.answer_tokens == engine.count_tokens(answer)
    # the next turn reuses the first prompt and the answer, as it would after a real answer
    follow = (*first, ("assistant", answer), ("user", "And on my phone?"))
    again = serve(follow, "The same way [1].")
    assert again.cached_tokens >= served.prompt_tokens + served.answer_tokens - 1


def test_layouts_on_the_simulator(engine) -> None:  # noqa: ANN001
    """Through the token-level radix simulator: the per-turn choice is no worse than the better
    of always appending and always re-laying, sends no more prompt tokens than appending, and
    the shadow's predictions of the layouts sent are close to the cache's."""
    from appliance.bench.ordering.radix import RadixLRU
    from appliance.bench.ordering.replay import PieceTokenizer, replay, simulator_backend
    from appliance.bench.ordering.workload import make_workload
    from rag.ordering import default_ordering

    workload = make_workload(60, seed=5, candidates=6, count_tokens=engine.count_tokens)
    pieces = PieceTokenizer(engine.encode)

    def count(messages: tuple[tuple[str, str], ...]) -> int:
        return len(pieces.chat(messages))

    for capacity in (8_000, 64_000):
        out = {
            layout: replay(
                workload,
                workload.turns,
                default_ordering(capacity),
                "prefix",
                simulator_backend(RadixLRU(capacity), pieces),
                riders=6,
                layout=layout,
                count=count if layout else None,
            )
            for layout in ("append", "relay", "adaptive")
        }
        append, relay, adaptive = out.values()
        assert relay.layouts["relay"] > 0 and adaptive.layouts["append"] > 0
        best = min(append.prefill_tokens, relay.prefill_tokens)
        assert adaptive.prefill_tokens <= 1.01 * best, capacity
        assert adaptive.prompt_tokens <= append.prompt_tokens
        error = abs(adaptive.predicted - adaptive.cached_tokens) / adaptive.prompt_tokens
        assert error < 0.05, (capacity, error)
