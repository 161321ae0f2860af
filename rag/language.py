"""Which language a question is written in, by its letters' scripts (pure).

Hangul makes it Korean, kana Japanese, Han ideographs without kana Chinese, and Latin letters
English (the one Latin-script language the appliance tells apart; a French question reads as
"en", which every model here writes). A text with no letters is "und". Enough for choosing
the language to answer in; not a language identifier for prose in general.
"""

from __future__ import annotations

# the names the prompt uses for a language, in English and in that language
NAMES: dict[str, tuple[str, str]] = {
    "ko": ("Korean", "한국어"),
    "ja": ("Japanese", "日本語"),
    "zh": ("Chinese", "中文"),
}
# Hangul's share of a text's letters from which it is Korean (a Korean question may hold
# English product names: "VPN 비밀번호는 어떻게 바꾸나요?")
HANGUL_SHARE = 0.25


def _script(ch: str) -> str | None:
    code = ord(ch)
    if 0xAC00 <= code <= 0xD7A3 or 0x1100 <= code <= 0x11FF or 0x3130 <= code <= 0x318F:
        return "hangul"
    if 0x3040 <= code <= 0x30FF:
        return "kana"
    if 0x4E00 <= code <= 0x9FFF or 0x3400 <= code <= 0x4DBF:
        return "han"
    if ch.isalpha():
        return "latin" if code < 0x0250 else "other"
    return None


def script_language(text: str) -> str:
    """ "ko", "ja", "zh", "en" or "und" (no letters, or only letters of other scripts)."""
    counts = {"hangul": 0, "kana": 0, "han": 0, "latin": 0, "other": 0}
    for ch in text:
        script = _script(ch)
        if script is not None:
            counts[script] += 1
    letters = sum(counts.values())
    if not letters:
        return "und"
    if counts["hangul"] / letters >= HANGUL_SHARE:
        return "ko"
    if counts["kana"]:
        return "ja"
    if counts["han"] > counts["latin"]:
        return "zh"
    return "en" if counts["latin"] else "und"


def reply_instruction(language: str) -> str | None:
    """The line that asks for an answer in ``language`` (None for English and the unknown:
    the system prompt is English, and English prompts stay as they were)."""
    if language not in NAMES:
        return None
    english, own = NAMES[language]
    return f"Answer in {english} ({own})."
