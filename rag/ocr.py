"""OCR of page images with Tesseract: a small engine class behind the ``OcrEngine`` interface.

``TesseractOcr`` runs the ``tesseract`` command (Debian's tesseract-ocr, with the kor and eng
language packs) once per page image, given as PNG bytes on standard input, and reads its TSV
output, which has a confidence per word; ``parse_tsv`` (pure) turns that into the page's text
and its mean confidence. A page that takes longer than ``timeout_s`` is stopped
(``OcrTimeout``); a missing binary or language pack is an ``OcrUnavailable`` that names the
Debian package to install. Nothing runs at import.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

# the Debian packages that provide the binary and each language's data
PACKAGES = "tesseract-ocr tesseract-ocr-kor tesseract-ocr-eng"
_LANGUAGE_PACKAGES = {"kor": "tesseract-ocr-kor", "eng": "tesseract-ocr-eng"}


class OcrError(Exception):
    """OCR could not read a page; the message is shown to the admin."""


class OcrUnavailable(OcrError):
    """Tesseract (or one of its languages) is not installed: no page can be read."""


class OcrTimeout(OcrError):
    """One page took longer than the per-page time limit."""


@dataclass(frozen=True)
class OcrResult:
    """One page read by OCR: its text, the mean word confidence (0..1; None: no words) and
    how long it took."""

    text: str
    confidence: float | None
    seconds: float


class OcrEngine(Protocol):
    """What the parsers need of an OCR engine."""

    def read(self, png: bytes, dpi: int | None = None) -> OcrResult:
        """Read one page image (PNG bytes); ``dpi`` when the image's resolution is known."""
        ...


# one progress line per page ("OCR page 3/10: 812 chars, 91% confidence, 1.4 s")
Progress = Callable[[str], None]


@dataclass(frozen=True)
class OcrSettings:
    """What the parsers are given to OCR pages with no text: the engine, the DPI an image-only
    PDF page is rendered at, and the most pixels one image may have (decompression bombs)."""

    engine: OcrEngine
    dpi: int = 200
    max_pixels: int = 40_000_000


def parse_tsv(tsv: str) -> tuple[str, float | None]:
    """Tesseract's TSV output as (text, mean word confidence 0..1, weighted by characters).

    Words of one line are joined by spaces, lines by newlines, and blocks and paragraphs are
    separated by a blank line. Confidence is None when there are no words.
    """
    lines: dict[tuple[int, int, int, int], list[str]] = {}
    weighted = chars = 0.0
    for row in tsv.splitlines()[1:]:
        cols = row.split("\t")
        if len(cols) < 12 or cols[0] != "5":
            continue
        word = cols[11].strip()
        try:
            conf = float(cols[10])
            key = (int(cols[1]), int(cols[2]), int(cols[3]), int(cols[4]))
        except ValueError:
            continue
        if not word or conf < 0:
            continue
        lines.setdefault(key, []).append(word)
        weighted += conf * len(word)
        chars += len(word)
    out: list[str] = []
    previous: tuple[int, int, int] | None = None
    for key in sorted(lines):
        if previous is not None and key[:3] != previous:
            out.append("")  # a new paragraph or block
        out.append(" ".join(lines[key]))
        previous = key[:3]
    confidence = round(weighted / chars / 100, 4) if chars else None
    return "\n".join(out), confidence


def clean_text(txt: str) -> str:
    """Tesseract's text output without trailing spaces, form feeds or runs of blank lines."""
    lines = [ln.rstrip() for ln in txt.replace("\f", "\n").splitlines()]
    out: list[str] = []
    for line in lines:
        if line or (out and out[-1]):
            out.append(line)
    return "\n".join(out).strip()


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def _unavailable(binary: str, stderr: str) -> OcrUnavailable | None:
    """The install hint for a failed run that is a missing language pack, else None."""
    if "Failed loading language" not in stderr and "Error opening data file" not in stderr:
        return None
    missing = [p for lang, p in _LANGUAGE_PACKAGES.items() if f"'{lang}'" in stderr]
    package = " ".join(missing) or PACKAGES
    return OcrUnavailable(
        f"{binary} lacks a language pack ({stderr.strip().splitlines()[-1]}); "
        f"install the Debian package {package}"
    )


@dataclass(frozen=True)
class TesseractOcr:
    """The ``tesseract`` command: ``languages`` as Tesseract spells them ("kor+eng"), the page
    segmentation mode ``psm`` (3: automatic layout) and a per-page limit in seconds."""

    binary: str = "tesseract"
    languages: str = "kor+eng"
    timeout_s: float = 60.0
    psm: int = 3
    threads: int = 1  # OpenMP threads per page (OMP_THREAD_LIMIT); 1 was fastest here

    def read(self, png: bytes, dpi: int | None = None) -> OcrResult:
        """OCR one page; raises ``OcrUnavailable``, ``OcrTimeout`` or ``OcrError``."""
        options = ["-l", self.languages, "--psm", str(self.psm)]
        if dpi:
            options += ["--dpi", str(dpi)]
        env = {**os.environ, "OMP_THREAD_LIMIT": str(self.threads)}
        started = time.perf_counter()
        with tempfile.TemporaryDirectory(prefix="ocr-") as tmp:
            base = Path(tmp) / "page"
            done = self._run([self.binary, "stdin", str(base), *options, "txt", "tsv"], png, env)
            seconds = time.perf_counter() - started
            stderr = done.stderr.decode("utf-8", "replace")
            if done.returncode != 0:
                raise _unavailable(self.binary, stderr) or OcrError(
                    f"tesseract failed (exit {done.returncode}): {stderr.strip()[-300:]}"
                )
            tsv = _read(base.with_suffix(".tsv"))
            txt = _read(base.with_suffix(".txt"))
        words, confidence = parse_tsv(tsv)
        # the text output keeps Korean words whole (the TSV splits many into syllables)
        text = clean_text(txt) if txt.strip() else words
        return OcrResult(text, confidence, seconds)

    def _run(self, cmd: list[str], png: bytes, env: dict[str, str]) -> subprocess.CompletedProcess:
        try:
            return subprocess.run(
                cmd, input=png, capture_output=True, timeout=self.timeout_s, env=env
            )
        except FileNotFoundError as exc:
            raise OcrUnavailable(
                f"the OCR program {self.binary!r} is not installed; install the Debian "
                f"packages {PACKAGES} (or set rag.ocr_binary)"
            ) from exc
        except PermissionError as exc:
            raise OcrUnavailable(f"the OCR program {self.binary!r} cannot be run: {exc}") from exc
        except subprocess.TimeoutExpired as exc:
            raise OcrTimeout(f"over the {self.timeout_s:g} s per-page limit") from exc

    def languages_installed(self) -> list[str]:
        """``tesseract --list-langs``; raises ``OcrUnavailable`` when it cannot run."""
        try:
            done = subprocess.run(
                [self.binary, "--list-langs"], capture_output=True, text=True, timeout=30
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise OcrUnavailable(
                f"the OCR program {self.binary!r} cannot run ({exc}); install the Debian "
                f"packages {PACKAGES}"
            ) from exc
        if done.returncode != 0:
            raise OcrUnavailable(f"{self.binary} --list-langs failed: {done.stderr.strip()}")
        # the first line is "List of available languages in ...:"
        return [ln.strip() for ln in done.stdout.splitlines()[1:] if ln.strip()]
