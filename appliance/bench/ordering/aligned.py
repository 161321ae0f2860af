"""Page alignment in the simulator: the chat's token ids with shared segments padded to whole
pages, to measure what aligning them would give an engine that caches whole pages (SGLang
``--page-size``, vLLM's blocks).

A paged engine reuses a prefix in whole pages only, so a request that leaves a cached path
mid-page recomputes that page. Padding a segment that other requests share (filler tokens up
to the next page boundary) puts the points where requests part on page boundaries:

- ``system``: the system message ends on a page boundary (every request shares it);
- ``block``: so does each chunk of a document block right after the system prompt (a first
  turn's, or a re-laid turn's), the segments other conversations share.

The padding is token ids (a newline's), as an engine fed token ids would get it; what it costs
is its tokens, in every prompt and whenever a padded segment is not cached. The cache shadow
is not told of the padding (its segment weights are the unpadded estimates), so its error
column shows what a padded layout would have to teach it.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from appliance.bench.ordering.replay import Messages, PieceTokenizer

ALIGNMENTS = ("none", "system", "block")
_CHUNK = re.compile(r"\n\n(?=\[\d+\] )")  # where a document block's next chunk starts
_HINT = "\n\nMost relevant documents:"


class AlignedTokenizer(PieceTokenizer):
    """``PieceTokenizer`` whose chats pad shared segments to pages of ``page`` tokens."""

    def __init__(self, encode: Callable[[str], list[int]], page: int, align: str) -> None:
        if align not in ALIGNMENTS:
            raise ValueError(f"align: one of {', '.join(ALIGNMENTS)}")
        super().__init__(encode)
        self.page, self.align = page, align
        self.filler = self.piece("\n")[0]

    def chat(self, messages: Messages) -> list[int]:
        if self.align == "none" or self.page <= 1:
            return super().chat(messages)
        ids: list[int] = []
        for i, (role, text) in enumerate(messages):
            if i == 1 and self.align == "block" and text.startswith("Documents:\n\n"):
                ids += self._block(role, text)
                continue
            ids += self.message(role, text)
            if i == 0:
                self._pad(ids)
        return ids + list(self.piece("<|im_start|>assistant\n"))

    def _block(self, role: str, text: str) -> list[int]:
        """A document block's message, each chunk ending on a page boundary (the prompt so
        far ends on one: the system message is padded)."""
        docs, hint, rest = text.partition(_HINT)
        ids = list(self.piece(f"<|im_start|>{role}\n"))
        for n, chunk in enumerate(_CHUNK.split(docs)):
            ids += self._text(chunk if n == 0 else "\n\n" + chunk)
            self._pad(ids)
        if hint:
            ids += self._text(hint + rest)
        return ids + list(self.piece("<|im_end|>\n"))

    def _text(self, text: str) -> list[int]:
        """``text`` in the pieces ``message`` splits it into (at blank lines)."""
        out: list[int] = []
        for i, part in enumerate(text.split("\n\n")):
            if i:
                out += self.piece("\n\n")
            if part:
                out += self.piece(part)
        return out

    def _pad(self, ids: list[int]) -> None:
        ids += [self.filler] * (-len(ids) % self.page)
