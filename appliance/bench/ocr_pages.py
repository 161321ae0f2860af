"""Test pages for OCR: known text rendered to an image as a scanner would see it, and the
character accuracy of what OCR read back (used by ``appliance bench index`` and the tests).

Pages are drawn with Pillow in a TrueType font that has Hangul (NanumGothic, Debian's
fonts-nanum), at a given DPI with 12-point text on a white A4-width page.
"""

from __future__ import annotations

import io
from pathlib import Path

from PIL import Image, ImageChops, ImageDraw, ImageFilter, ImageFont

KOREAN_FONT = Path("/usr/share/fonts/truetype/nanum/NanumGothic.ttf")

ENGLISH_PAGE = (
    "Quarterly Maintenance Notice\n"
    "The east wing elevators will be serviced on Tuesday, 14 May.\n"
    "During the work, please use the stairs or the west wing lifts.\n"
    "The cafeteria stays open from 11:30 until 14:00 as usual.\n"
    "Questions about parking permits go to the facilities desk.\n"
    "Badge readers at the loading dock are replaced the same week."
)
KOREAN_PAGE = (
    "분기 시설 점검 안내\n"
    "동관 엘리베이터는 5월 14일 화요일에 점검합니다.\n"
    "점검 중에는 계단이나 서관 엘리베이터를 이용해 주십시오.\n"
    "구내식당은 평소와 같이 11시 30분부터 14시까지 운영합니다.\n"
    "주차 허가에 관한 문의는 시설 관리팀으로 해 주십시오.\n"
    "같은 주에 하역장 출입 카드 리더기를 교체합니다."
)


def render_page(
    text: str, dpi: int = 200, font_path: Path = KOREAN_FONT, points: float = 12.0
) -> Image.Image:
    """``text`` (lines) in black on a white page ``dpi`` dots per inch, A4 wide, as a
    grayscale image just tall enough for the lines."""
    px = round(points / 72 * dpi)
    font = ImageFont.truetype(str(font_path), px)
    margin, leading = dpi // 2, round(px * 1.5)
    lines = text.splitlines()
    width = round(8.27 * dpi)
    height = 2 * margin + leading * len(lines)
    page = Image.new("L", (width, height), 255)
    draw = ImageDraw.Draw(page)
    for i, line in enumerate(lines):
        draw.text((margin, margin + i * leading), line, font=font, fill=0)
    return page


def photographed(page: Image.Image) -> Image.Image:
    """A page as a phone photo of a notice: slightly rotated, blurred, grey paper, noise."""
    tilted = page.rotate(1.5, resample=Image.Resampling.BICUBIC, expand=True, fillcolor=235)
    soft = tilted.filter(ImageFilter.GaussianBlur(0.8))
    noise = Image.effect_noise(soft.size, 18)  # gaussian around 128
    return ImageChops.add(soft, noise, 1.0, -128 - 12)  # the paper a little grey


def png_bytes(image: Image.Image, dpi: int | None = None) -> bytes:
    """The image as PNG bytes (with its DPI recorded when given)."""
    out = io.BytesIO()
    image.save(out, format="PNG", **({"dpi": (dpi, dpi)} if dpi else {}))
    return out.getvalue()


def scanned_pdf(pages: list[Image.Image], dpi: int = 200) -> bytes:
    """An image-only PDF (no text layer), one page per image, as a scanner writes it."""
    out = io.BytesIO()
    pages[0].save(out, format="PDF", resolution=dpi, save_all=True, append_images=pages[1:])
    return out.getvalue()


def _normalise(text: str) -> str:
    return " ".join(text.split())


def levenshtein(a: str, b: str) -> int:
    """Edit distance (insertions, deletions, substitutions) between two strings."""
    if len(a) < len(b):
        a, b = b, a
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, start=1):
        current = [i]
        for j, cb in enumerate(b, start=1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb)))
        previous = current
    return previous[-1]


def char_accuracy(read: str, truth: str) -> float:
    """1 - edit distance / length of the truth, on whitespace-normalised text (floor 0)."""
    a, b = _normalise(read), _normalise(truth)
    if not b:
        return 1.0 if not a else 0.0
    return max(0.0, 1 - levenshtein(a, b) / len(b))
