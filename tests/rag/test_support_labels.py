"""The shipped support labels are well formed: enough of them, both languages, both splits,
every sentence with its source texts (``appliance bench support`` reads them)."""

from __future__ import annotations

from collections import Counter

from appliance.bench.support_bench import SPLITS, load


def test_the_labels_load_and_cover_both_languages() -> None:
    data = {split: load(split) for split in SPLITS}
    assert sum(len(v) for v in data.values()) >= 300
    for examples in data.values():
        assert {e.language for e in examples} == {"en", "ko"}
        assert {e.label for e in examples} == {"supported", "unsupported", "no_claim"}
        assert all(e.sources and all(e.sources) for e in examples)
        assert len({e.id for e in examples}) == len(examples)
    origins = Counter(e.origin for v in data.values() for e in v)
    assert origins["model"] >= 100 and origins["copied"] >= 50
