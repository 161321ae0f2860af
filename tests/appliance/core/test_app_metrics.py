"""The app's own Prometheus metrics: retrieval latency, turns and errors by kind, rendered
together with the embedded engine's ``sglang:`` metrics."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from appliance.core.errors import ALL_ERROR_KINDS
from appliance.core.metrics import ERROR_KINDS, AppMetrics
from appliance.core.services.chat import DoneEvent


def samples(text: str) -> dict[tuple[str, tuple], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_a_turn_moves_the_app_and_engine_metrics(appliance) -> None:  # noqa: ANN001
    metrics = appliance.chat.metrics
    assert isinstance(metrics, AppMetrics)  # wired by build_appliance
    before = samples(metrics.render().decode())
    who = appliance.auth.create_user("metrics-user", "password-123")
    events = list(appliance.chat.ask(who, "How many days of annual leave do I get?"))
    assert isinstance(events[-1], DoneEvent)
    after = samples(metrics.render().decode())

    def moved(name: str, **labels: str) -> float:
        key = (name, tuple(sorted(labels.items())))
        return after[key] - before.get(key, 0.0)

    assert moved("appliance_retrieval_latency_seconds_count") == 1
    assert moved("appliance_retrieval_latency_seconds_sum") > 0
    assert moved("appliance_chat_turns_total", outcome="done") == 1
    assert moved("appliance_chat_turns_total", outcome="error") == 0
    model = appliance.engine.info().model
    assert moved("sglang:time_to_first_token_seconds_count", model_name=model) == 1
    assert after[("sglang:prompt_tokens_total", (("model_name", model),))] > 0


def test_errors_are_counted_by_kind(engine) -> None:  # noqa: ANN001
    metrics = AppMetrics(engine)
    metrics.turn_failed("busy")
    metrics.turn_failed("busy")
    metrics.error("prompt_too_long")
    got = samples(metrics.render().decode())
    assert got[("appliance_errors_total", (("kind", "busy"),))] == 2
    assert got[("appliance_errors_total", (("kind", "prompt_too_long"),))] == 1
    assert got[("appliance_errors_total", (("kind", "unavailable"),))] == 0
    assert got[("appliance_chat_turns_total", (("outcome", "error"),))] == 2


def test_without_an_engine_only_the_app_metrics_are_rendered() -> None:
    text = AppMetrics().render().decode()
    assert "appliance_chat_turns_total" in text and "sglang:" not in text


def test_error_series_are_error_kinds() -> None:
    """The series that exist from the start keep their label values, each an ``ErrorKind``."""
    assert ERROR_KINDS == ("busy", "unavailable", "prompt_too_long", "engine_error", "internal")
    assert set(ERROR_KINDS) <= set(ALL_ERROR_KINDS)
