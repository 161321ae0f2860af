"""Text from a document as Markdown that shows exactly that text (pure).

The chat bubble is Markdown (Gradio's Chatbot: marked with GitHub's extensions, raw HTML
sanitised, ``$$`` LaTeX), so a quoted sentence that holds ``[x](http://…)``, ``![x](…)``, an
HTML tag, ``**bold**``, a heading mark, a code span, an autolink (``<https://…>``, a bare
``https://…``, ``www.…``, an e-mail address), a reference link, an entity or a ``$$`` formula
would become that markup. Every ASCII punctuation character that can open or close such a
construct is backslash-escaped (CommonMark lets any ASCII punctuation be escaped; marked shows
the character itself, ``<`` and ``&`` as ``&lt;`` and ``&amp;``): nothing of the text is
markup, and what the reader sees is the text, character for character.

Left as they are, since no construct can start with them inside a line whose start is not
theirs: ``, ; ? ' " / - ( )`` and the full stop (except in ``www.``, GitHub's autolink).
"""

from __future__ import annotations

import re

# ASCII punctuation that never starts or ends Markdown, HTML or LaTeX in the middle of a line
# once its neighbours below are escaped: links need ``[``, autolinks ``<``, ``:`` or ``@``,
# entities ``&``, lists and headings a line of their own
_INERT = frozenset(",;?'\"/-().")
_SIGNIFICANT = "".join(
    c for c in map(chr, range(0x21, 0x7F)) if not c.isalnum() and c not in _INERT
)
_ESCAPE = re.compile(f"[{re.escape(_SIGNIFICANT)}]|(?<=www)\\.", re.IGNORECASE)


def literal(text: str) -> str:
    """``text`` on one line (its runs of whitespace, line breaks included, made one space),
    escaped so that Markdown shows it verbatim and as text only."""
    return _ESCAPE.sub(lambda m: "\\" + m.group(0), " ".join(text.split()))
