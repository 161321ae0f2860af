"""Issue #31, item 2: ingestion keeps what a reader reads. Site chrome (DocBook navigation
tables, ARIA navigation, page headers and footers, lines repeated on most pages of a
collection) is dropped; inline markup joins text as a browser shows it; near-duplicate
chunks collapse at retrieval."""

from __future__ import annotations

import pytest

from rag.boilerplate import (
    RepeatRule,
    block_key,
    document_blocks,
    repeated_blocks,
    strip_blocks,
)
from rag.dedupe import collapse, near_duplicates
from rag.parsers.html import parse_html
from rag.types import Section


def _docbook(title: str, body: str, up: str = "Chapter 3. Setup") -> bytes:
    """A page as DocBook XSL writes it (PostgreSQL's, GIMP's and Debian's manuals)."""
    nav = (
        '<div class="navheader"><table summary="Navigation header"><tr><th colspan="5">'
        f'{title}</th></tr><tr><td><a accesskey="p" href="a.html">Prev</a> </td>'
        f'<td><a accesskey="u" href="u.html">Up</a></td><th>{up}</th>'
        '<td><a accesskey="h" href="index.html">Home</a></td>'
        '<td> <a accesskey="n" href="b.html">Next</a></td></tr></table><hr/></div>'
    )
    foot = (
        '<div class="navfooter"><hr/><table summary="Navigation footer"><tr>'
        '<td><a href="a.html"><img src="prev.png" alt="이전"/></a></td>'
        '<td><a href="u.html"><img src="up.png" alt="위로"/></a></td>'
        '<td><a href="b.html"><img src="next.png" alt="다음"/></a></td></tr>'
        '<tr><td>Install</td><td><a href="index.html">Home</a></td><td>Upgrade</td></tr>'
        "</table></div>"
    )
    return (
        f'<html><head><title>{title}</title></head><body>{nav}<div class="sect1">'
        f"<h2>{title}</h2>{body}</div>{foot}</body></html>"
    ).encode()


def _text(data: bytes) -> str:
    doc = parse_html(data, "page")
    return "\n".join(f"{s.heading}\n{s.text}" for s in doc.sections)


def test_docbook_navigation_is_dropped_and_the_text_kept() -> None:
    text = _text(_docbook("3.2. Ports", "<p>The server listens on port 5432.</p>"))
    assert "The server listens on port 5432." in text
    for chrome in ("Prev", "Next", "Home", "Up", "Chapter 3. Setup", "Upgrade"):
        assert chrome not in text.split(), chrome


def test_before_the_chrome_rules_the_navigation_was_text() -> None:
    old = parse_html(_docbook("3.2. Ports", "<p>Port 5432.</p>"), "p", drop_chrome=False)
    assert "Prev" in " ".join(s.text for s in old.sections)


@pytest.mark.parametrize(
    "chrome",
    [
        '<div role="navigation"><a href="i.html">index</a> | <a href="m.html">modules</a></div>',
        '<div class="related" role="navigation"><ul><li><a>next</a></li></ul></div>',
        "<header><p>LibreOffice 7.4 Help</p><button>Module</button></header>",
        '<aside class="leftside"><div>Index</div></aside>',
        '<div class="footer">&copy; Copyright 2001-2026.</div>'.replace("div", "footer"),
    ],
)
def test_marked_up_chrome_is_dropped(chrome: str) -> None:
    page = f"<html><body>{chrome}<h1>Guide</h1><p>Keep this sentence.</p></body></html>"
    text = _text(page.encode())
    assert "Keep this sentence." in text
    for word in ("index", "modules", "next", "LibreOffice", "Module", "Index", "Copyright"):
        assert word not in text.split(), word


def test_header_inside_an_article_is_text() -> None:
    page = (
        "<body><article><header><h1>Title</h1><p>Byline text</p></header>"
        "<p>Body.</p></article></body>"
    )
    text = _text(page.encode())
    assert "Byline text" in text and "Body." in text


def test_a_main_region_is_read_alone() -> None:
    page = (
        '<body><div class="sidebar">Quick search Go</div><div role="main"><h1>os</h1>'
        '<p>Miscellaneous interfaces.</p></div><div class="copy">Built with Sphinx</div></body>'
    )
    text = _text(page.encode())
    assert "Miscellaneous interfaces." in text
    assert "Sphinx" not in text and "Quick" not in text


# --- inline markup --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "html,expected",
    [
        ("<p><b>foo</b>bar</p>", "foobar"),  # one word, as a browser shows it
        ("<p>Press <kbd>Ctrl</kbd>+<kbd>C</kbd> now</p>", "Press Ctrl+C now"),
        ("<p><b>김프</b>의 도구</p>", "김프의 도구"),  # a particle stays on its word
        ("<ul><li>alpha</li><li>beta</li></ul>", "alpha\nbeta"),
        ("<p>one<br/>two</p>", "one\ntwo"),
        ("<table><tr><td>key</td><td>value</td></tr></table>", "key | value"),
        ("<dl><dt>term</dt><dd>meaning</dd></dl>", "term\nmeaning"),
        ("<p>Run <code>ls</code>to list</p>", "Run lsto list"),  # as written
    ],
)
def test_inline_and_block_markup_spacing(html: str, expected: str) -> None:
    doc = parse_html(f"<html><body>{html}</body></html>".encode(), "t")
    assert doc.sections[0].text == expected


def test_platform_variants_keep_the_default_one() -> None:
    # LibreOffice help: each platform's wording is a hidden span; a script shows one
    html = (
        '<p>Choose <span class="switchinline"><span hidden="true" class="MAC" id="MACx">'
        'LibreOffice - Preferences</span><span hidden="true" id="defaultx">Tools - Options'
        "</span></span> to set it.</p>"
    )
    doc = parse_html(f"<html><body>{html}</body></html>".encode(), "t")
    assert doc.sections[0].text == "Choose Tools - Options to set it."


# --- blocks repeated across a collection ------------------------------------------------------


def _collection(n: int, banner: str = "Report a Bug") -> dict[str, frozenset[str]]:
    docs = {}
    for i in range(n):
        sections = [Section("S", f"{banner}\nPage {i} explains topic {i}.\nSee also")]
        docs[f"p{i}.html"] = document_blocks(sections)
    return docs


def test_a_line_on_most_pages_is_repeated_and_page_text_is_not() -> None:
    docs = _collection(8)
    # "See also" too is on every page here: both are repeated, the page's own line is not
    assert repeated_blocks(docs) == {block_key("Report a Bug"), block_key("See also")}
    stripped = strip_blocks(
        [Section("S", "Report a  bug\nPage 1 explains topic 1.")], repeated_blocks(docs)
    )
    assert stripped == (Section("S", "Page 1 explains topic 1."),)


def test_a_small_collection_shares_nothing_by_chance() -> None:
    assert repeated_blocks(_collection(4)) == frozenset()  # under min_docs
    assert repeated_blocks(_collection(4), RepeatRule(min_docs=2)) != frozenset()


def test_a_line_on_under_half_of_the_pages_stays() -> None:
    docs = _collection(10)
    for i in range(6):  # the banner now on 4 of 10 pages
        docs[f"p{i}.html"] = document_blocks([Section("S", f"Page {i} text.")])
    assert block_key("Report a Bug") not in repeated_blocks(docs)


def test_a_section_left_empty_is_dropped() -> None:
    repeated = frozenset({block_key("Prev | Up | Next")})
    out = strip_blocks([Section("Nav", "Prev | Up | Next"), Section("Body", "Text.")], repeated)
    assert out == (Section("Body", "Text."),)


def test_block_keys_ignore_case_and_spacing() -> None:
    assert block_key("  Show   Source ") == block_key("show source")
    assert block_key("   ") == ""


# --- near duplicates at retrieval ------------------------------------------------------------


def test_near_duplicate_chunks_collapse_to_the_best_ranked() -> None:
    notice = "Backups run nightly at 02:00; restore requests go to the service desk."
    hits = [
        ("a", notice),
        ("b", "The VPN client needs version 5.2 or later."),
        ("c", notice.replace("nightly", "nightly ")),  # the same text in another document
        ("d", "Restore requests: " + notice),  # nearly the same
    ]
    kept = collapse(hits, lambda h: h[1])
    assert [k for k, _ in kept] == ["a", "b"]


def test_different_chunks_sharing_words_are_kept() -> None:
    a = "Port 5432 is the default port of the server."
    b = "Port 5433 is used by the standby server in this setup, not the default."
    assert not near_duplicates(a, b)
