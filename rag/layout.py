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
What a turn sent is kept as a ``SentTurn`` (``Layout.sent``), from which ``rebuild`` lays it
out again, message for message and key for key; ``Conversation.resume`` replays a stored
conversation that way. Which layout a turn sends is chosen in ``rag.layout_choice``.

Shadow keys (``rag.prompt_keys``): a rendered chunk is keyed by its id where its tokens are
fixed by the path to it: anywhere after a conversation's own history, and at position ``p``
of a document block right after the system prompt when its number is ``p`` (a first turn
numbers its chunks in prompt order). Elsewhere in such a block it is keyed ``(id, number)``:
the same chunk under another number is other tokens, and another conversation must not count
it as shared.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Hashable, Sequence
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
        self.numbers.update(layout.block)
        self.turns.append(PastTurn(layout.short, answer))

    @classmethod
    def resume(
        cls,
        system: str,
        turns: Sequence[tuple[SentTurn, str]],
        keep: int | None = None,
        left_out: Collection[int] = (),
    ) -> Conversation:
        """The conversation after ``turns`` (each as it was sent, with its answer), oldest
        first, under ``system``. With ``keep``, only the last ``keep`` turns stay in the prompt
        (0: none); the turns at the indexes ``left_out`` stay out wherever they are (say, the
        turns whose documents their reader may no longer read). A turn out of the prompt keeps
        its chunks' numbers, which are never given again, but nothing of it is sent: not its
        documents, question or answer (a later turn that retrieves one of its chunks renders it
        again, under its number). The turns kept are laid out after one another as ``rebuild``
        lays them: an appended turn then follows the turns kept before it."""
        conv = cls.start(system)
        kept = len(turns) if keep is None else max(0, min(keep, len(turns)))
        for at, (turn, answer) in enumerate(turns):
            if at < len(turns) - kept or at in left_out:
                conv.numbers.update(turn.chunks)
            else:
                conv.record(rebuild(conv, turn), answer)
        return conv


@dataclass(frozen=True)
class SentTurn:
    """A turn as it was sent, all a later turn needs to rebuild its prompt (what the chat
    stores per question): its layout, its last user message as sent (append: its new
    documents, the hint and the question; re-lay: the hint and the question), that hint and
    question alone (``short``), the document block's message of a re-lay (``docs``), and the
    chunks this turn rendered, (chunk id, number) in prompt order."""

    kind: str
    user: str
    short: str
    docs: str = ""
    chunks: tuple[tuple[int, int], ...] = ()


@dataclass(frozen=True)
class Layout:
    """One candidate prompt: its messages, its shadow keys in three parts (``prefix``, this
    turn's document keys ``chunk_keys``, then ``after``: the keys between the documents and
    the last user message's ``tail``), the chunks it renders (``block``: (chunk id, number)
    in prompt order) and what it cites. A layout rebuilt from a stored turn (``rebuild``)
    carries no chunk texts or citations (``new_chunks``, ``citations`` are empty)."""

    kind: str
    messages: Messages
    prefix: tuple[Hashable, ...]
    chunk_keys: tuple[Hashable, ...]
    after: tuple[Hashable, ...]
    tail: Hashable
    block: tuple[tuple[int, int], ...]
    present: frozenset[int]
    short: str  # this turn's hint and question (how a later re-lay renders it)
    docs: str = ""  # a re-lay's document block message
    new_chunks: tuple[tuple[int, RetrievedChunk], ...] = ()
    citations: tuple[Citation, ...] = ()

    @property
    def keys(self) -> tuple[Hashable, ...]:
        """Every key of the prompt, in order."""
        return (*self.prefix, *self.chunk_keys, *self.after, self.tail)

    @property
    def user(self) -> str:
        """The last user message (hint and question; appended: after the new documents)."""
        return self.messages[-1][1]

    @property
    def sent(self) -> SentTurn:
        """This layout as a later turn rebuilds it (``rebuild``)."""
        return SentTurn(self.kind, self.user, self.short, self.docs, self.block)


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
    fresh = [c for c in retrieved if c.chunk_id not in conv.present]
    offered = [c for c in candidates if c.chunk_id not in conv.present]
    # a chunk shown before but no longer in the prompt (a re-lay left it out) is rendered
    # again, under its number
    new, citations = _numbered(order(fresh, prefix, offered, tally), conv, retrieved, offered)
    short = render_user_turn(question, [], citations)
    user = render_user_turn(question, new, citations)
    return _appended(conv, user, short, _ids(new), tuple(new), tuple(citations))


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
    ordered = order(list(retrieved), (conv.system_key,), candidates, tally)
    block, citations = _numbered(ordered, conv, retrieved, candidates)
    docs = "Documents:\n\n" + "\n\n".join(render_chunk(n, c) for n, c in block) if block else ""
    short = render_user_turn(question, [], citations)
    return _relaid(conv, docs, short, _ids(block), tuple(block), tuple(citations))


def rebuild(conv: Conversation, turn: SentTurn) -> Layout:
    """``turn`` (stored as it was sent) laid out again after ``conv``: the same messages and
    keys as when it was sent, where ``conv`` is the conversation it was sent after."""
    if turn.kind == RELAY:
        return _relaid(conv, turn.docs, turn.user, turn.chunks)
    if turn.kind == APPEND:
        return _appended(conv, turn.user, turn.short, turn.chunks)
    raise ValueError(f"a stored turn's layout is {turn.kind!r}; one of {APPEND}, {RELAY}")


def _appended(
    conv: Conversation,
    user: str,
    short: str,
    block: tuple[tuple[int, int], ...],
    new: tuple[tuple[int, RetrievedChunk], ...] = (),
    citations: tuple[Citation, ...] = (),
) -> Layout:
    """An appended turn: the last prompt and answer, then ``user`` (rendering ``block``)."""
    prefix = conv.keys or (conv.system_key,)
    history = conv.sent or (("system", conv.system),)
    first = not conv.sent  # a first turn's block follows the system prompt
    keys = tuple(block_key(cid, n, p) if first else cid for p, (cid, n) in enumerate(block, 1))
    return Layout(
        APPEND,
        (*history, ("user", user)),
        tuple(prefix),
        keys,
        (),
        tail_key(user),
        block,
        conv.present | {cid for cid, _n in block},
        short,
        "",
        new,
        citations,
    )


def _relaid(
    conv: Conversation,
    docs: str,
    short: str,
    block: tuple[tuple[int, int], ...],
    new: tuple[tuple[int, RetrievedChunk], ...] = (),
    citations: tuple[Citation, ...] = (),
) -> Layout:
    """A re-laid turn: system | ``docs`` (rendering ``block``) | each earlier turn's hint and
    question with its answer | ``short``."""
    history: list[tuple[str, str]] = []
    after: list[Hashable] = []
    for past in conv.turns:
        history += [("user", past.short), ("assistant", past.answer)]
        after += [tail_key(past.short), answer_key(past.answer)]
    head = (("system", conv.system), ("user", docs)) if docs else (("system", conv.system),)
    return Layout(
        RELAY,
        (*head, *history, ("user", short)),
        (conv.system_key,),
        tuple(block_key(cid, n, p) for p, (cid, n) in enumerate(block, 1)),
        tuple(after),
        tail_key(short),
        block,
        frozenset(cid for cid, _n in block),
        short,
        docs,
        new,
        citations,
    )


def _ids(numbered: Sequence[tuple[int, RetrievedChunk]]) -> tuple[tuple[int, int], ...]:
    """(number, chunk) pairs as (chunk id, number)."""
    return tuple((c.chunk_id, n) for n, c in numbered)


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
