"""``bench load --workers``' arithmetic (goodput, cost per effective token) and its prompts;
the set-ups themselves run real processes (tests/appliance/ops/test_cluster.py covers them)."""

from __future__ import annotations

from appliance.bench.cluster_load import SetupResult, TurnResult, _row, _session_texts
from appliance.bench.ordering.workload import make_workload


def test_goodput_counts_only_turns_within_the_objective() -> None:
    turns = [
        TurnResult(True, 1000, 800, 10, 0.5, [0.1] * 9),  # good
        TurnResult(True, 1000, 0, 10, 2.5, [0.1] * 9),  # TTFT too slow
        TurnResult(True, 1000, 900, 10, 0.4, [0.3] * 9),  # decoding too slow
        TurnResult(False, error="HTTP 503"),
    ]
    row = _row(SetupResult("x", turns, wall_s=36.0), slo_ttft=2.0, slo_itl=0.2, price=2.0)
    assert row[1] == "56.7%"  # 1,700 of 3,000 prompt tokens cached
    assert row[2] == "1,300"
    assert row[5] == "25.0%"
    assert row[7].startswith("10 ")
    # $2 an hour for 36 s is $0.02, over 10 good tokens: $2,000 per million
    assert row[8] == "2000.00"


def test_each_turn_appends_to_its_session() -> None:
    workload = make_workload(3, seed=1)
    turns = [t for t in workload.turns if t.session == workload.turns[0].session]

    def render(messages: tuple[tuple[str, str], ...]) -> str:
        return "".join(f"<{role}>{text}" for role, text in messages)

    texts = _session_texts(turns, workload.system_prompt, render)
    assert len(texts) == len(turns)
    for earlier, later in zip(texts, texts[1:], strict=False):
        assert later.startswith(earlier)  # the history is sent as it was
