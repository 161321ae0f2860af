"""Neighbour context through the real knowledge base: with ``use_neighbours(1)`` a retrieved
chunk is shown read on into the next chunk of its section, the evidence can quote from that
part verbatim, and the same chunk renders the same text on every retrieval."""

from __future__ import annotations

import pytest

# one long section: the chunker cuts it in two, and the value stated at the end of the section
# lands in the second chunk, while the question's words are all in the first
FILLER = " ".join(
    f"The walrus archive keeps ledger volume {n} on shelf {n} of the north wing." for n in range(14)
)
DOC = (
    "# Walrus archive\n\n## Reading room\n\n"
    "The walrus archive reading room lends rare ledgers to staff. " + FILLER + "\n\n"
    "The loan period for a rare ledger is 9 days.\n"
)


def test_a_chunk_is_read_on_into_the_next_of_its_section(appliance) -> None:  # noqa: ANN001
    kb = appliance.knowledge
    assert appliance.ingest.ingest_bytes("walrus.md", DOC.encode()).status == "indexed"
    question = "How long may staff borrow a rare ledger from the walrus archive reading room?"
    try:
        plain, _ = kb.retrieve(question, 8)
        plain = [c for c in plain if c.source == "walrus.md"]
        assert len(plain) >= 2, "the section must make two chunks"
        kb.use_neighbours(1)
        shown, _ = kb.retrieve(question, 8)
        again, _ = kb.retrieve(question, 8)
        by_id = {c.chunk_id: c for c in shown}
        first = min(plain, key=lambda c: c.chunk_id)
        joined = by_id[first.chunk_id].text
        assert joined.startswith(first.text) and len(joined) > len(first.text)
        assert "9 days" in joined and "9 days" not in first.text
        assert {c.chunk_id: c.text for c in again} == {c.chunk_id: c.text for c in shown}
        spans = kb.evidence(question, [by_id[first.chunk_id]], k=4)
        assert spans
        for span in spans:  # verbatim, with offsets into the text shown
            assert joined[span.start : span.end] == span.text
        assert any("9 days" in s.text for s in spans)
    finally:
        kb.use_neighbours(0)
        with pytest.raises(ValueError):
            kb.use_neighbours(-1)
