"""Doctor check of the model gateway (multi-node, or ``appliance cluster up``): the gateway is
up and ready, lists every configured worker healthy, generates a token through itself, and
each worker generates a token when asked directly."""

from __future__ import annotations

from appliance.core.config import AppConfig
from appliance.ops.doctor_runtime import Check, one_token
from engine.base import EngineError
from engine.sglang.gateway_status import read_gateway

FIX = "start it (appliance cluster up, or systemctl start appliance-gateway)"


def gateway_check(config: AppConfig) -> Check:
    """Skipped (ok) unless the app runs against a gateway (``engine.sglang_worker_urls``)."""
    e = config.engine
    if e.backend != "sglang" or not e.sglang_worker_urls:
        return Check("gateway", True, "no model gateway configured (one engine)")
    from engine.sglang.client import SGLangEngine

    state = read_gateway(e.sglang_url, e.sglang_worker_urls)
    if not state.reachable:
        return Check("gateway", False, f"{e.sglang_url}: {state.error}; {FIX}")
    problems: list[str] = []
    lines: list[str] = []
    for worker in state.workers:
        client = SGLangEngine(worker.url, timeout_s=60, connect_retries=0, check_context=False)
        try:
            detail = one_token(client)
        except EngineError as exc:
            detail = f"cannot generate: {exc}"
            problems.append(worker.url)
        finally:
            client.close()
        seen = "healthy" if worker.healthy else f"NOT healthy in the gateway ({worker.status})"
        if not worker.healthy and worker.url not in problems:
            problems.append(worker.url)
        lines.append(f"{worker.url} {seen}, {detail}")
    through = SGLangEngine(e.sglang_url, timeout_s=60, connect_retries=0, check_context=False)
    try:
        lines.insert(0, f"through the gateway: {one_token(through)}")
    except EngineError as exc:
        lines.insert(0, f"through the gateway: cannot generate: {exc}")
        problems.append(e.sglang_url)
    finally:
        through.close()
    detail = f"{e.sglang_url} ({state.healthy_workers}/{len(state.workers)} workers healthy): "
    detail += "; ".join(lines)
    if problems:
        detail += f". Fix: {', '.join(problems)} (see each worker's log; appliance cluster up "
        detail += "restarts a local worker that died)"
    return Check("gateway", not problems, detail)
