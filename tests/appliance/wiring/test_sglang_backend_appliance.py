"""The whole appliance on the SGLang backend: the app talks to an SGLang-compatible server
(here the embedded engine's, with the real model) through the SGLang client."""

from __future__ import annotations

from pathlib import Path

from support.servers import serving

from appliance.core.services.chat import DoneEvent
from appliance.wiring.appliance import build_appliance, build_engine
from engine.server.app import build_server_app
from engine.sglang.client import SGLangEngine


def test_chat_turns_through_the_sglang_client(
    tmp_path: Path, model_dir, engine, embedder, config_for
) -> None:  # noqa: ANN001
    with serving(build_server_app(engine, "smollm2")) as url:
        config = config_for(
            tmp_path,
            model_dir,
            engine={"backend": "sglang", "sglang_url": url, "model_path": str(model_dir)},
        )
        client = build_engine(config)
        assert isinstance(client, SGLangEngine)
        app = build_appliance(config, engine=client, embedder=embedder)
        try:
            admin = app.auth.principal_for("admin")
            first = list(app.chat.ask(admin, "How do I reset my VPN password?"))[-1]
            assert isinstance(first, DoneEvent)
            assert first.stats.prompt_tokens > 0
            follow = list(app.chat.ask(admin, "And how long must it be?", first.conversation_id))
            second = follow[-1]
            assert isinstance(second, DoneEvent)
            # the follow-up's prompt starts with the whole first turn, cached by the server
            assert second.stats.cached_tokens >= first.stats.prompt_tokens
        finally:
            client.close()
            app.db.dispose()
