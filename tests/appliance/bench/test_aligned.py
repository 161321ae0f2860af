"""Page alignment in the simulator (``appliance.bench.ordering.aligned``): the shared segments
end on page boundaries, nothing else changes, and at page 1 it is the plain tokenizer."""

from __future__ import annotations

from appliance.bench.ordering.aligned import AlignedTokenizer
from appliance.bench.ordering.replay import PieceTokenizer

SYSTEM = ("system", "You answer from the numbered documents. Cite them as [1].")
BLOCK = (
    "user",
    "Documents:\n\n[1] Leave > Annual\nStaff get 15 days.\n\nCarry over 5.\n\n"
    "[2] Leave > Sick\nSick leave is paid.\n\nMost relevant documents: [2], [1]\n\n"
    "Question: How many days?",
)
LATER = ("user", "Question: And sick leave?")


def test_shared_segments_end_on_page_boundaries(engine) -> None:  # noqa: ANN001
    plain = PieceTokenizer(engine.encode)
    for page in (1, 16, 128):
        assert AlignedTokenizer(engine.encode, page, "none").chat((SYSTEM, BLOCK)) == plain.chat(
            (SYSTEM, BLOCK)
        )
    assert AlignedTokenizer(engine.encode, 1, "block").chat((SYSTEM, BLOCK)) == plain.chat(
        (SYSTEM, BLOCK)
    )
    aligned = AlignedTokenizer(engine.encode, 16, "block")
    filler = aligned.filler
    ids = aligned.chat((SYSTEM, BLOCK, ("assistant", "15 days [1]."), LATER))
    system = plain.message(*SYSTEM)
    # the system message, then filler to the page
    assert ids[: len(system)] == system and len(system) % 16
    cut = len(system) + (-len(system) % 16)
    assert set(ids[len(system) : cut]) == {filler} and cut % 16 == 0
    # each chunk of the block ends on a page boundary: the next chunk starts after filler
    second = plain.piece("[2] Leave > Sick\nSick leave is paid.")
    start = next(i for i in range(cut, len(ids)) if tuple(ids[i : i + len(second)]) == second)
    newline_pair = len(plain.piece("\n\n"))
    assert (start - newline_pair) % 16 == 0
    # without the filler the tokens are the plain ones
    system_only = AlignedTokenizer(engine.encode, 16, "system")
    unpadded = [
        t for i, t in enumerate(system_only.chat((SYSTEM, BLOCK))) if not len(system) <= i < cut
    ]
    assert unpadded == plain.chat((SYSTEM, BLOCK))
    # a later message is not padded: only the block right after the system prompt is
    tail = plain.message(*LATER) + list(plain.piece("<|im_start|>assistant\n"))
    assert ids[-len(tail) :] == tail
