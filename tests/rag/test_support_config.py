"""The support thresholds come from the config's ``chat`` section, and the turn's check reads
the question and the embedder from its grounding (issue #32)."""

from __future__ import annotations

from appliance.core.config import ChatConfig
from appliance.core.services import grounding
from rag.support import SupportThresholds

SOURCE = "Hybrid employees work from the office 3 days per week. Tuesday is an office day."


def test_config_defaults_are_the_calibrated_thresholds() -> None:
    assert grounding.support_thresholds(ChatConfig()) == SupportThresholds()
    strict = grounding.support_thresholds(ChatConfig(support_min_similarity=0.9))
    assert strict.min_similarity == 0.9


def test_the_check_reads_the_question_from_the_grounding() -> None:
    answer = "Here is how many days hybrid employees work from the office:\n- 3 days per week [1]."
    plain = grounding.TurnGrounding("generative", (), {1: SOURCE}, (SOURCE,))
    asked = grounding.TurnGrounding(
        "generative",
        (),
        {1: SOURCE},
        (SOURCE,),
        question="How many days do hybrid employees work from the office?",
    )
    assert grounding.check(answer, asked).total == 1  # the restated question is not counted
    assert grounding.check(answer, plain).total == 2
