"""``appliance bench chunks``: what ingestion indexes from real HTML, before and after.

For each corpus (the real sets of ``appliance bench quality``, built from their installed
Debian packages, and any ``--corpus DIR``): documents, chunks, navigation-only chunks, chunks
under 30 LLM tokens, mean characters per chunk by language (a chunk's Hangul share decides),
and the share of each page's main text (``<p>``, ``<pre>``, ``<td>``, ``<li>``, ``<dd>``
outside marked navigation, without LibreOffice's hidden macOS wording) kept in its chunks,
as words (a particle the page writes on its word, "표시줄의", counts as lost: the measure is
a floor). Rows:
- ``before``: the parser without chrome rules, chunks of 256 LLM tokens (32 overlap);
- ``after``: chrome rules, repeated blocks dropped (``rag.boilerplate``), chunks by characters
  per language with small ones merged (``rag.chunking.chunk_document``);
- ``trafilatura``: its main-content extraction (Markdown) instead of our parser, then as
  ``after`` (only where trafilatura is installed).
A chunk is navigation-only when it has a navigation line (every word a navigation word, a
navigation word as a table cell, or a row of short cells with an empty one) and at most 60
other characters; "with a nav line" counts the chunks that hold any such line.
Then the repeated-block table (lines by share of documents) and the Korean/English character
ratio of the Debian FAQ (``--faq-en DIR``: the English pages of the ``debian-faq`` package).
"""

from __future__ import annotations

import argparse
import re
import statistics
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path

from bs4 import BeautifulSoup

from appliance.bench.table import render
from rag.boilerplate import document_blocks, repeated_blocks, strip_blocks
from rag.chunking import chunk_document, chunk_sections
from rag.language import script_language
from rag.parsers.html import decode_html, parse_html
from rag.parsers.markdown import parse_markdown
from rag.types import ChunkDraft, ParsedDocument

NAV_WORDS = frozenset(
    [
        "prev",
        "previous",
        "next",
        "up",
        "home",
        "index",
        "modules",
        "contents",
        "module",
        "top",
        "back",
        "navigation",
        "download",
        "이전",
        "다음",
        "위로",
        "처음",
        "처음으로",
        "목차",
        "홈",
        "색인",
    ]
)
SMALL_TOKENS = 30
_WORD = re.compile(r"\w+")
_MAIN = ("p", "pre", "td", "li", "dd")
_CHROME_CLASSES = {"navheader", "navfooter"}
_CHROME_ROLES = {"navigation", "banner", "contentinfo", "search"}


def nav_line(line: str) -> bool:
    """Every word a navigation word, a navigation word as a table cell, or a row of short
    cells with an empty one (a navigation table whose links are images)."""
    words = [w.casefold() for w in _WORD.findall(line)]
    cells = [c.strip() for c in line.split("|")]
    return bool(
        (words and all(w in NAV_WORDS for w in words))
        or any(c.casefold() in NAV_WORDS for c in cells)
        or (len(cells) > 1 and not any(len(c) > 30 for c in cells) and "" in cells)
    )


def nav_only(text: str) -> bool:
    lines = [ln for ln in text.splitlines() if ln.strip()]
    nav = [ln for ln in lines if nav_line(ln)]
    return bool(nav) and sum(len(ln) for ln in lines if not nav_line(ln)) <= 60


def main_words(data: bytes) -> Counter[str]:
    """The words of a page's main text (block elements outside marked navigation)."""
    soup = BeautifulSoup(decode_html(data), "html.parser")
    for tag in soup.find_all(["nav", "header", "footer", "aside", "script", "style"]):
        tag.decompose()
    for tag in soup.find_all(
        lambda t: t.get("role") in _CHROME_ROLES or set(t.get("class") or ()) & _CHROME_CLASSES
    ):
        if not tag.decomposed:
            tag.decompose()
    for tag in soup.find_all(class_="MAC", hidden=True):  # LibreOffice's macOS wording
        tag.decompose()
    words: Counter[str] = Counter()
    for tag in soup.find_all(_MAIN):
        if tag.find_parent(_MAIN) is None:
            words.update(w.casefold() for w in _WORD.findall(tag.get_text(" ")))
    return words


def _trafilatura(data: bytes, title: str) -> ParsedDocument:
    import trafilatura

    md = trafilatura.extract(
        data,
        output_format="markdown",
        include_tables=True,
        include_formatting=True,
        include_links=False,
        include_comments=False,
        favor_recall=True,
    )
    return parse_markdown(md or "", title)


def _chunks(
    variant: str, pages: list[tuple[str, bytes]], count: Callable[[str], int]
) -> list[list[ChunkDraft]]:
    if variant == "before":
        docs = [parse_html(data, name, drop_chrome=False) for name, data in pages]
        return [chunk_sections(d.sections, count, 256, 32) for d in docs]
    parse = _trafilatura if variant == "trafilatura" else parse_html
    docs = [parse(data, name) for name, data in pages]
    repeated = repeated_blocks({str(i): document_blocks(d.sections) for i, d in enumerate(docs)})
    return [chunk_document(strip_blocks(d.sections, repeated), count) for d in docs]


def _norm(text: str) -> str:
    return " ".join(text.split()).casefold()


def gold_in_a_chunk(
    pages: list[tuple[str, bytes]], per_doc: list[list[ChunkDraft]], gold: list[tuple[str, str]]
) -> str:
    """How many questions' gold phrases lie whole in one chunk of their gold page."""
    by_page = {n: [_norm(c.text) for c in cs] for (n, _), cs in zip(pages, per_doc, strict=True)}
    found = sum(any(_norm(p) in t for t in by_page.get(f, [])) for f, p in gold)
    return f"{found}/{len(gold)}" if gold else "-"


def measure(
    variant: str,
    pages: list[tuple[str, bytes]],
    count: Callable[[str], int],
    gold: Sequence[tuple[str, str]] = (),
) -> list:
    per_doc = _chunks(variant, pages, count)
    chunks = [c for cs in per_doc for c in cs]
    by_lang: dict[str, list[int]] = {"en": [], "ko": []}
    for c in chunks:
        by_lang["ko" if script_language(c.text) == "ko" else "en"].append(len(c.text))
    kept = []
    for (_, data), cs in zip(pages, per_doc, strict=True):
        main = main_words(data)
        if sum(main.values()) >= 20:
            got = Counter(w.casefold() for c in cs for w in _WORD.findall(f"{c.section} {c.text}"))
            kept.append(sum((main & got).values()) / sum(main.values()))
    mean = lambda xs: f"{statistics.mean(xs):.0f}" if xs else "-"  # noqa: E731
    return [
        variant,
        len(chunks),
        sum(nav_only(c.text) for c in chunks),
        sum(any(nav_line(ln) for ln in c.text.splitlines()) for c in chunks),
        sum(c.token_count < SMALL_TOKENS for c in chunks),
        f"{mean(by_lang['en'])} ({len(by_lang['en'])})",
        f"{mean(by_lang['ko'])} ({len(by_lang['ko'])})",
        f"{100 * statistics.mean(kept):.1f}%" if kept else "-",
        f"{100 * min(kept):.0f}%" if kept else "-",
        gold_in_a_chunk(pages, per_doc, list(gold)),
    ]


def repeat_table(pages: list[tuple[str, bytes]]) -> list[list[object]]:
    """Lines (after the chrome rules) by the share of documents holding them."""
    docs = [parse_html(data, name) for name, data in pages]
    counts: Counter[str] = Counter()
    for d in docs:
        counts.update({" ".join(ln.split()) for s in d.sections for ln in s.text.splitlines()})
    n = len(docs)
    top = [(line, k) for line, k in counts.most_common(6) if k > 1]
    return [[f"{100 * k / n:.0f}%", k, line[:60]] for line, k in top]


def faq_ratio(en_dir: Path, ko_dir: Path) -> str:
    pairs = []
    for ko in sorted(ko_dir.glob("*.ko.html")):
        stem = ko.name.removesuffix(".ko.html")
        en = next(
            (p for p in (en_dir / f"{stem}.html", en_dir / f"{stem}.en.html") if p.exists()), None
        )
        if en is None:
            continue
        tk = " ".join(s.text for s in parse_html(ko.read_bytes(), stem).sections)
        te = " ".join(s.text for s in parse_html(en.read_bytes(), stem).sections)
        if script_language(tk) == "ko":
            pairs.append((len(tk), len(te)))
    if not pairs:
        return "no translated pages found"
    ratio = sum(k for k, _ in pairs) / sum(e for _, e in pairs)
    return f"Korean/English characters of the same text: {ratio:.2f} ({len(pairs)} FAQ pages)"


Corpus = tuple[str, list[tuple[str, bytes]], list[tuple[str, str]]]  # name, pages, gold


def _corpora(args: argparse.Namespace) -> list[Corpus]:
    out: list[Corpus] = []
    if not args.no_sets:
        from appliance.bench.real_corpus import MissingPackage, all_sets, pages

        for real in all_sets():
            try:
                chosen = pages(real)
            except MissingPackage as exc:
                print(f"skipped: {exc}")
                continue
            gold = [(q["gold_file"], q["gold_phrase"]) for q in real.every_question()]
            out.append((real.name, [(p, (real.source / p).read_bytes()) for p in chosen], gold))
    for folder in args.corpus:
        files = sorted(p for p in folder.rglob("*") if p.suffix.lower() in (".html", ".htm"))
        files = files[:: max(1, len(files) // args.limit)][: args.limit]
        pages = [(p.relative_to(folder).as_posix(), p.read_bytes()) for p in files]
        out.append((str(folder), pages, []))
    return out


def _token_counter() -> Callable[[str], int]:
    """The bundled LLM's tokenizer (the one that sized chunks before)."""
    from transformers import AutoTokenizer

    from engine.embedded.model_store import bundled_gguf

    gguf = bundled_gguf()
    tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    return lambda text: len(tok(text, add_special_tokens=False).input_ids)


def main(argv: list[str], config: object = None) -> int:
    parser = argparse.ArgumentParser(
        prog="appliance bench chunks", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--corpus", type=Path, action="append", default=[], help="an HTML folder")
    parser.add_argument("--limit", type=int, default=200, help="pages per --corpus (evenly spread)")
    parser.add_argument("--no-sets", action="store_true", help="only the --corpus folders")
    parser.add_argument("--faq-en", type=Path, help="the English Debian FAQ pages (debian-faq)")
    args = parser.parse_args(argv)
    count = _token_counter()
    try:
        import trafilatura  # noqa: F401

        variants = ("before", "after", "trafilatura")
    except ImportError:
        print("trafilatura is not installed: its row is left out")
        variants = ("before", "after")
    headers = ["", "chunks", "nav-only", "with a nav line", f"< {SMALL_TOKENS} tokens",
               "chars/chunk en (n)", "chars/chunk ko (n)", "main text kept", "worst page",
               "gold in a chunk"]  # fmt: skip
    for name, pages, gold in _corpora(args):
        print(f"\n{name}: {len(pages)} pages")
        print(render(headers, [measure(v, pages, count, gold) for v in variants]))
        print(
            render(
                ["docs", "n", "most repeated line (after the chrome rules)"], repeat_table(pages)
            )
        )
    if args.faq_en:
        print("\n" + faq_ratio(args.faq_en, Path("/usr/share/doc/debian/FAQ/ko")))
    return 0
