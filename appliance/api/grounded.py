"""The JSON of a turn's grounding, shared by ``/api`` and ``/v1``: the evidence card (verbatim
sentences with their citation numbers and character offsets into their chunk's text) and the
verdict on each answer sentence (offsets into the answer)."""

from dataclasses import asdict

from appliance.core.services.grounding import CardSentence
from rag.verify import AnswerCheck


def evidence_json(card: tuple[CardSentence, ...]) -> list[dict]:
    """``[{number, chunk_id, start, end, text, score}, ...]``, best first."""
    return [{**asdict(s), "score": round(s.score, 4)} for s in card]


def verification_json(result: AnswerCheck | None) -> dict | None:
    """``{supported, total, sentences: [{start, end, supported, cites, unsupported_facts,
    reason, claim}], bad_markers}``; None when the answer was not checked. ``total`` counts the
    claims (a sentence with ``claim`` false, such as a restated question, is not one) and
    ``supported`` those a source sentence says (``rag.support``)."""
    if result is None:
        return None
    return {
        "supported": result.supported,
        "total": result.total,
        "sentences": [asdict(v) for v in result.sentences],
        "bad_markers": list(result.bad_markers),
    }
