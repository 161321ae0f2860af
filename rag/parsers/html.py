"""HTML to sections with BeautifulSoup (stdlib ``html.parser``): h1–h3 start sections.

What a reader reads is kept, the site's chrome is not:
- scripts, styles and forms' widgets are dropped, and so is navigation however it is marked:
  ``<nav>``, ARIA roles (navigation, banner, contentinfo, search), DocBook's
  navigation header and footer (``div.navheader``/``div.navfooter``: the Prev / Up / Home /
  Next tables of PostgreSQL's, GIMP's and Debian's manuals), and page-level ``<header>``,
  ``<footer>`` and ``<aside>`` (those inside an ``<article>``, ``<main>`` or ``<section>``
  belong to the text and stay);
- a page with one main region (``<main>`` or ``role="main"``, as Sphinx writes) is read
  from it alone;
- of the hidden per-platform variants of a phrase (LibreOffice's ``span.switchinline``),
  only the default one is kept, so "Tools - Options" does not read "LibreOffice -
  PreferencesTools - Options".

Block elements become lines and table rows ``cell | cell``; inline elements join their text
as written (``<b>foo</b>bar`` is one word, as a browser shows it). Blocks repeated across a
collection (a site banner no markup names) are dropped later, at ingest
(``rag.boilerplate``). Bytes are decoded by the page's declared charset when it has one, else
like a text file (UTF-8, then CP949/EUC-KR).
"""

from __future__ import annotations

import codecs
import re

from bs4 import BeautifulSoup, NavigableString, Tag
from bs4.dammit import EncodingDetector
from bs4.element import CData

from rag.parsers.encoding import decode_text
from rag.parsers.sections import SectionBuilder
from rag.types import ParsedDocument

MIME = "text/html"

_DROP = (
    "script", "style", "nav", "noscript", "template", "head", "svg", "iframe", "button",
    "select", "input", "textarea",
)  # fmt: skip
_LEGACY_DROP = ("script", "style", "nav", "footer", "noscript", "template", "head", "svg", "iframe")
# page chrome unless inside the text's own structure
_PAGE_CHROME = ("header", "footer", "aside")
_TEXT_PARENTS = ("article", "main", "section")
_CHROME_ROLES = frozenset({"navigation", "banner", "contentinfo", "search"})
_CHROME_CLASSES = frozenset({"navheader", "navfooter", "breadcrumb", "breadcrumbs"})
_HEADINGS = ("h1", "h2", "h3")
_BLOCKS = (
    "p", "div", "li", "ul", "ol", "dl", "dt", "dd", "tr", "table", "br", "hr", "h4", "h5",
    "h6", "section", "article", "main", "aside", "header", "blockquote", "pre", "figure",
    "figcaption", "form", "fieldset", "address", "details", "summary", "caption",
)  # fmt: skip
_MARK = "\x00H\x00"  # starts a line that is a section heading
_SPACE = re.compile(r"\s+")
# Declared charsets that Python spells differently or that a superset reads better.
_CHARSET_ALIASES = {"euc-kr": "cp949", "ks_c_5601-1987": "cp949", "x-windows-949": "cp949"}


def decode_html(data: bytes) -> str:
    """Decode by a BOM or a declared ``<meta charset>``, falling back to ``decode_text``."""
    declared = EncodingDetector.find_declared_encoding(data, is_html=True)
    if declared and not data.startswith((b"\xef\xbb\xbf", b"\xff\xfe", b"\xfe\xff")):
        encoding = _CHARSET_ALIASES.get(declared.lower(), declared)
        try:
            codecs.lookup(encoding)
            return data.decode(encoding)
        except (LookupError, UnicodeDecodeError):
            pass
    return decode_text(data)


def _text(tag: Tag) -> str:
    return _SPACE.sub(" ", tag.get_text(" ")).strip()


def _is_chrome(tag: Tag) -> bool:
    if (tag.get("role") or "").strip().lower() in _CHROME_ROLES:
        return True
    classes = tag.get("class") or ()
    return any(c.lower() in _CHROME_CLASSES for c in classes)


def _drop_chrome(soup: BeautifulSoup, chrome: bool) -> BeautifulSoup | Tag:
    """Remove the page's chrome in place; returns the part to read (the one main region, or
    the whole page). ``chrome`` False: only what the parser dropped before it knew chrome
    (the benchmark's "before")."""
    if not chrome:
        for tag in soup.find_all(_LEGACY_DROP):
            tag.decompose()
        return soup
    for tag in soup.find_all(_DROP):
        tag.decompose()
    for tag in soup.find_all(_is_chrome):
        if not tag.decomposed:
            tag.decompose()
    for tag in soup.find_all(_PAGE_CHROME):
        if not tag.decomposed and tag.find_parent(_TEXT_PARENTS) is None:
            tag.decompose()
    for switch in soup.find_all(class_="switchinline"):
        variants = switch.find_all(hidden=True, recursive=False)
        default = [v for v in variants if str(v.get("id", "")).startswith("default")]
        for v in variants:
            if default and v not in default:
                v.decompose()
    mains = soup.find_all(lambda t: t.name == "main" or t.get("role") == "main")
    return mains[0] if len(mains) == 1 else soup


def _flatten(soup: BeautifulSoup | Tag) -> list[str]:
    """Rewrite the tree in place into lines; heading lines start with ``_MARK``."""
    for node in soup.find_all(string=True):
        if type(node) not in (NavigableString, CData):  # comments, doctype, PIs
            node.extract()
        elif not node.find_parent("pre"):
            node.replace_with(_SPACE.sub(" ", str(node)))
    for tag in soup.find_all(_HEADINGS):
        tag.replace_with(f"\n{_MARK}{_text(tag)}\n")
    for tag in soup.find_all(["td", "th"]):
        tag.insert_after(" | ")
    for tag in soup.find_all(_BLOCKS):
        tag.insert_before("\n")
        tag.insert_after("\n")
    lines = [ln.strip().removesuffix("|").strip() for ln in soup.get_text().splitlines()]
    return [ln for ln in lines if ln and ln != _MARK]


def parse_html(data: bytes, fallback_title: str, drop_chrome: bool = True) -> ParsedDocument:
    """Parse an HTML page; the title is ``<title>``, else the first ``<h1>``."""
    soup = BeautifulSoup(decode_html(data), "html.parser")
    title_tag = soup.find("title")
    title = _text(title_tag) if isinstance(title_tag, Tag) else ""
    h1 = soup.find("h1")
    title = title or (_text(h1) if isinstance(h1, Tag) else "")
    sections = SectionBuilder()
    for line in _flatten(_drop_chrome(soup, drop_chrome)):
        if line.startswith(_MARK):
            sections.start(line.removeprefix(_MARK).strip())
        else:
            sections.add(line)
    return ParsedDocument(title=title or fallback_title, sections=sections.finish(), mime=MIME)
