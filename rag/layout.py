"""A turn's prompt layout (pure): append to what the conversation sent last time, or re-lay.

- **append**: the conversation's last prompt as sent, its answer, then a user message with
  the documents not already in that prompt, the relevance hint and the question. Every earlier
  token is reused while the engine still holds the conversation.
- **re-lay**: system prompt | this turn's documents (every retrieved chunk, ordered against
  the cache shadow, so that they can share the cache with other conversations) | the history
  without its documents (each earlier turn's hint and question, and its answer) | this turn's
  hint and question. It sends fewer tokens, and it wins when the conversation's history was
  evicted anyway.

A chunk keeps its number for the whole conversation, whichever layout is sent: the answers cite
the same ``[n]``. The next turn continues from what was actually sent (``Conversation.sent``).

Shadow keys (``rag.prompt_keys``): a rendered chunk is keyed by its id where its tokens are
fixed by the path to it: anywhere after a conversation's own history, and at position ``p``
of a document block right after the system prompt when its number is ``p`` (a first turn
numbers its chunks in prompt order). Elsewhere in such a block it is keyed ``(id, number)``:
the same chunk under another number is other tokens, and another conversation must not count
it as shared.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field

from rag.ordering.base import riders_in
from rag.prompt import Citation, number_chunks, render_chunk, render_user_turn, segment_key
from rag.prompt_keys import answer_key, tail_key
from rag.types import RetrievedChunk

APPEND, RELAY, ADAPTIVE = "append", "relay", "adaptive"
LAYOUTS = (ADAPTIVE, APPEND, RELAY)

Messages = tuple[tuple[str, str], ...]
# a strategy that orders chunks against the cache shadow: (required chunks, keys before them,
# cache-rider candidates, whether to count them as retrieved: False for a turn's second
# layout) -> the required chunks and any riders taken, in prompt order
Order = Callable[
    [Sequence[RetrievedChunk], Sequence[Hashable], Sequence[RetrievedChunk], bool],
    list[RetrievedChunk],
]


@dataclass(frozen=True)
class PastTurn:
    """An earlier turn, as re-lay renders it: hint and question, then the answer."""

    short: str
    answer: str


@dataclass
class Conversation:
    """What a conversation has sent: the last prompt with its answer (messages and shadow
    keys), the chunks in it, every chunk's number so far, and the turns for re-lay."""

    system: str
    system_key: Hashable
    sent: Messages = ()
    keys: tuple[Hashable, ...] = ()
    present: frozenset[int] = frozenset()
    numbers: dict[int, int] = field(default_factory=dict)
    turns: list[PastTurn] = field(default_factory=list)

    @classmethod
    def start(cls, system: str) -> Conversation:
        """A new conversation under ``system``."""
        return cls(system, segment_key("system", system))

    @property
    def next_number(self) -> int:
        return max(self.numbers.values(), default=0) + 1

    def record(self, layout: Layout, answer: str) -> None:
        """``layout`` was sent and answered with ``answer``: the next turn continues from it."""
        self.sent = (*layout.messages, ("assistant", answer))
        self.keys = (*layout.keys, answer_key(answer))
        self.present = layout.present
        self.numbers.update((c.chunk_id, c.number) for c in layout.citations)
        self.turns.append(PastTurn(layout.short, answer))


@dataclass(frozen=True)
class Layout:
    """One candidate prompt: its messages, its shadow keys in three parts (``prefix``, this
    turn's document keys ``chunk_keys``, then ``after``: the keys between the documents and
    the last user message's ``tail``), what it renders and cites."""

    kind: str
    messages: Messages
    prefix: tuple[Hashable, ...]
    chunk_keys: tuple[Hashable, ...]
    after: tuple[Hashable, ...]
    tail: Hashable
    new_chunks: tuple[tuple[int, RetrievedChunk], ...]
    citations: tuple[Citation, ...]
    present: frozenset[int]
    short: str  # this turn's hint and question (how a later re-lay renders it)

    @property
    def keys(self) -> tuple[Hashable, ...]:
        """Every key of the prompt, in order."""
        return (*self.prefix, *self.chunk_keys, *self.after, self.tail)


def block_key(chunk_id: int, number: int, position: int) -> Hashable:
    """The key of a chunk at ``position`` (1-based) of a document block right after the system
    prompt (see the module docstring)."""
    return chunk_id if number == position else (chunk_id, number)


def append_layout(
    conv: Conversation,
    question: str,
    retrieved: Sequence[RetrievedChunk],
    order: Order,
    candidates: Sequence[RetrievedChunk] = (),
    tally: bool = True,
) -> Layout:
    """The conversation's last prompt, its answer, then the chunks not in it (and any cache
    riders from ``candidates``), ordered after it."""
    prefix = conv.keys or (conv.system_key,)
    history = conv.sent or (("system", conv.system),)
    fresh = [c for c in retrieved if c.chunk_id not in conv.present]
    offered = [c for c in candidates if c.chunk_id not in conv.present]
    # a chunk shown before but no longer in the prompt (a re-lay left it out) is rendered
    # again, under its number
    new, citations = _numbered(order(fresh, prefix, offered, tally), conv, retrieved, offered)
    user = render_user_turn(question, new, citations)
    first = not conv.sent  # a first turn's block follows the system prompt
    keys = tuple(
        block_key(c.chunk_id, n, p) if first else c.chunk_id for p, (n, c) in enumerate(new, 1)
    )
    return Layout(
        APPEND,
        (*history, ("user", user)),
        tuple(prefix),
        keys,
        (),
        tail_key(user),
        tuple(new),
        tuple(citations),
        conv.present | {c.chunk_id for _n, c in new},
        render_user_turn(question, [], citations),
    )


def relay_layout(
    conv: Conversation,
    question: str,
    retrieved: Sequence[RetrievedChunk],
    order: Order,
    candidates: Sequence[RetrievedChunk] = (),
    tally: bool = True,
) -> Layout:
    """System | every retrieved chunk (and any cache riders from ``candidates``), ordered
    against the shadow | the history without its documents | this turn's hint and question."""
    prefix = (conv.system_key,)
    ordered = order(list(retrieved), prefix, candidates, tally)
    block, citations = _numbered(ordered, conv, retrieved, candidates)
    docs = "Documents:\n\n" + "\n\n".join(render_chunk(n, c) for n, c in block)
    short = render_user_turn(question, [], citations)
    history: list[tuple[str, str]] = []
    after: list[Hashable] = []
    for past in conv.turns:
        history += [("user", past.short), ("assistant", past.answer)]
        after += [tail_key(past.short), answer_key(past.answer)]
    head = (("system", conv.system), ("user", docs)) if block else (("system", conv.system),)
    messages = (*head, *history, ("user", short))
    return Layout(
        RELAY,
        messages,
        prefix,
        tuple(block_key(c.chunk_id, n, p) for p, (n, c) in enumerate(block, 1)),
        tuple(after),
        tail_key(short),
        tuple(block),
        tuple(citations),
        frozenset(c.chunk_id for _n, c in block),
        short,
    )


def choose(
    candidates: Sequence[Layout],
    prompt_tokens: Callable[[Layout], int],
    cached_tokens: Callable[[Layout], int],
) -> tuple[Layout, dict[str, tuple[int, int]]]:
    """The candidate with the fewest predicted uncached tokens (prompt tokens minus what the
    shadow holds), ties to the fewest prompt tokens, then the first given; and per kind its
    (prompt tokens, predicted cached tokens). The first candidate is the baseline (append): a
    later one that would send more prompt tokens than it is not taken, so the chosen layout
    never sends more than appending would."""
    if not candidates:
        raise ValueError("no layout to choose from")
    scored: dict[str, tuple[int, int]] = {}
    best: tuple[tuple[int, int], Layout] | None = None
    for layout in candidates:
        tokens, held = prompt_tokens(layout), cached_tokens(layout)
        scored[layout.kind] = (tokens, held)
        if best is not None and tokens > scored[candidates[0].kind][0]:
            continue
        score = (tokens - min(held, tokens), tokens)
        if best is None or score < best[0]:
            best = (score, layout)
    assert best is not None
    return best[1], scored


def lay_out(
    kind: str,
    conv: Conversation,
    question: str,
    retrieved: Sequence[RetrievedChunk],
    order: Order,
    prompt_tokens: Callable[[Layout], int],
    cached_tokens: Callable[[Layout], int],
    candidates: Sequence[RetrievedChunk] = (),
) -> tuple[Layout, dict[str, tuple[int, int]]]:
    """This turn's layout under ``kind`` (``LAYOUTS``): ``adaptive`` predicts both and sends the
    cheaper; a first turn is always appended (there is no history to re-lay)."""
    if kind not in LAYOUTS:
        raise ValueError(f"unknown layout {kind!r}; one of {', '.join(LAYOUTS)}")
    if not conv.sent or kind == APPEND:
        kinds = (APPEND,)
    elif kind == RELAY:
        kinds = (RELAY,)
    else:
        kinds = (APPEND, RELAY)
    build = {APPEND: append_layout, RELAY: relay_layout}
    # the first layout counts the turn's chunks as retrieved, a second one does not
    layouts = [
        build[k](conv, question, retrieved, order, candidates, i == 0) for i, k in enumerate(kinds)
    ]
    return choose(layouts, prompt_tokens, cached_tokens)


def _numbered(
    ordered: Sequence[RetrievedChunk],
    conv: Conversation,
    retrieved: Sequence[RetrievedChunk],
    candidates: Sequence[RetrievedChunk] = (),
) -> tuple[list[tuple[int, RetrievedChunk]], list[Citation]]:
    """``ordered`` with their numbers (the conversation's, else the next ones in prompt order),
    and a citation per retrieved chunk, most relevant first, then one per cache rider."""
    numbers = dict(conv.numbers)
    next_number = conv.next_number
    out = []
    for chunk in ordered:
        if chunk.chunk_id not in numbers:
            numbers[chunk.chunk_id] = next_number
            next_number += 1
        out.append((numbers[chunk.chunk_id], chunk))
    riders = riders_in(ordered, candidates)
    _none, citations = number_chunks([], numbers, relevance=retrieved, riders=riders)
    return out, citations
