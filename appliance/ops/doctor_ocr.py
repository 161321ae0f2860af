"""Doctor check of OCR: Tesseract runs and has every language ``rag.ocr_languages`` names."""

from __future__ import annotations

from appliance.core.config import AppConfig
from appliance.core.services.ocr import tesseract
from appliance.ops.doctor_runtime import Check
from rag.ocr import OcrUnavailable


def ocr_check(config: AppConfig) -> Check:
    """``tesseract --list-langs`` against the configured languages, with the fix-it line."""
    rag = config.rag
    if not rag.ocr:
        return Check("ocr", True, "off (rag.ocr = false): images and scanned PDF pages are refused")
    engine = tesseract(rag)
    try:
        installed = engine.languages_installed()
    except OcrUnavailable as exc:
        return Check("ocr", False, str(exc))
    wanted = rag.ocr_languages.split("+")
    missing = [lang for lang in wanted if lang not in installed]
    if missing:
        packages = " ".join(f"tesseract-ocr-{lang.lower().replace('_', '-')}" for lang in missing)
        return Check(
            "ocr",
            False,
            f"{engine.binary} lacks the language(s) {', '.join(missing)} of rag.ocr_languages: "
            f"apt-get install {packages}",
        )
    return Check("ocr", True, f"{engine.binary} with {', '.join(wanted)}")
