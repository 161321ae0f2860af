"""Scale-out for real, on loopback: two ``engine-server`` workers (real processes, the real
model, one thread each) behind the SGLang model gateway (``smg`` 1.13.0, cache-aware routing),
and the app's chat turns through it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy import func, select
from support.servers import free_port

from appliance.core.db.models import Message
from appliance.core.services.chat import ChatService
from appliance.core.services.chat_events import DeltaEvent, DoneEvent, ErrorEvent
from appliance.wiring.cluster import LocalCluster, running_state
from appliance.wiring.cluster_plan import plan_cluster
from engine.sglang.client import SGLangEngine
from engine.sglang.gateway_status import read_gateway
from rag.ordering import default_ordering
from rag.ordering.routed import RoutedPrefixOrdering


@pytest.fixture(scope="module")
def cluster(model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    plan = plan_cluster(
        workers=2,
        model_dir=model_dir,
        served_model_name="smollm2",
        cpus=2,
        gateway_port=free_port(),
        metrics_port=free_port(),
        worker_ports=(free_port(), free_port()),
    )
    running = LocalCluster(plan, tmp_path_factory.mktemp("cluster"))
    running.start(timeout_s=300)
    yield running
    running.stop()


@pytest.fixture(scope="module")
def gateway_chat(appliance, cluster: LocalCluster, model_dir: Path) -> Iterator[ChatService]:  # noqa: ANN001
    """The session appliance's chat service, its engine the SGLang client of the gateway and
    its ordering a shadow per worker, as the app wires it behind a gateway."""
    engine = SGLangEngine(cluster.gateway_url, tokenizer=str(model_dir), timeout_s=60)
    chat = appliance.chat
    ordering = default_ordering(32768, workers=cluster.plan.worker_urls)
    yield ChatService(appliance.db, appliance.knowledge, engine, chat.cfg, chat.settings, ordering)
    engine.close()


@pytest.fixture(scope="module")
def staff(appliance):  # noqa: ANN001, ANN201
    return appliance.auth.create_user("staff-cluster", "password-123", role="staff")


def worker_metrics(cluster: LocalCluster) -> dict[str, dict[str, float]]:
    state = read_gateway(cluster.gateway_url, cluster.plan.worker_urls)
    return {w.url: w.metrics for w in state.workers}


def stored_messages(appliance) -> int:  # noqa: ANN001
    with appliance.db.session() as s:
        return s.scalar(select(func.count(Message.id)))


def test_the_app_answers_a_chat_turn_through_the_gateway(
    gateway_chat: ChatService,
    staff,  # noqa: ANN001
) -> None:
    events = list(gateway_chat.ask(staff, "How many days of annual leave do I get?"))
    done = events[-1]
    assert isinstance(done, DoneEvent), events[-1]
    assert done.answer and done.stats.prompt_tokens > 100
    # the gateway named the worker, and only that worker's shadow follows the turn
    routed = gateway_chat.ordering.strategy("prefix")
    assert isinstance(routed, RoutedPrefixOrdering)
    assert done.stats.worker in routed.workers
    held = {url: o.shadow.total_tokens for url, o in routed.workers.items()}
    assert held[done.stats.worker] >= done.stats.prompt_tokens - 64
    assert sum(held.values()) == held[done.stats.worker]


def test_requests_sharing_a_prefix_land_on_one_worker(cluster: LocalCluster, engine) -> None:  # noqa: ANN001
    prefix = "Shared context for routing. " + "The gateway keeps prefixes on one worker. " * 125
    assert engine.count_tokens(prefix) >= 1000
    before = worker_metrics(cluster)
    served = set()
    with httpx.Client(base_url=cluster.gateway_url, timeout=120) as http:
        for i in range(8):
            body = {"text": f"{prefix}Question {i}:", "sampling_params": {"max_new_tokens": 1}}
            r = http.post("/generate", json=body)
            assert r.status_code == 200, r.text
            served.add(r.headers["x-smg-routed-worker-id"].rstrip("/"))
    assert len(served) == 1
    after = worker_metrics(cluster)
    [home] = served
    (other,) = [u for u in cluster.plan.worker_urls if u != home]
    gained = after[home]["cached_tokens_total"] - before[home]["cached_tokens_total"]
    assert gained >= 7 * 1000  # all but the first reuse the prefix
    assert after[other]["cached_tokens_total"] == before[other]["cached_tokens_total"]
    assert after[other]["num_requests_total"] == before[other]["num_requests_total"]


def _serving_worker(cluster: LocalCluster) -> int:
    """The index of the worker running a request now."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        for url, metrics in worker_metrics(cluster).items():
            if metrics.get("num_running_reqs", 0) > 0:
                return cluster.plan.worker_urls.index(url)
        time.sleep(0.05)
    raise AssertionError("no worker is running the request")


def test_a_killed_worker_fails_its_turn_clearly_and_the_other_answers(
    appliance,  # noqa: ANN001
    cluster: LocalCluster,
    gateway_chat: ChatService,
    staff,  # noqa: ANN001
) -> None:
    settings = appliance.settings
    previous = settings.current().max_new_tokens
    settings.update("admin", {"max_new_tokens": 200})
    try:
        before = stored_messages(appliance)
        stream = gateway_chat.ask(staff, "Describe the whole travel policy in detail.")
        for event in stream:
            if isinstance(event, DeltaEvent):
                break  # the answer is streaming
        victim = _serving_worker(cluster)
        cluster.kill_worker(victim)
        rest = list(stream)
        assert isinstance(rest[-1], ErrorEvent), rest[-1]
        assert rest[-1].kind == "unavailable", rest[-1].message
        assert stored_messages(appliance) == before  # nothing half-done was stored
        # the next question is answered by the live worker
        done = list(gateway_chat.ask(staff, "Who approves travel expenses?"))[-1]
        assert isinstance(done, DoneEvent), done
        assert stored_messages(appliance) == before + 2
    finally:
        settings.update("admin", {"max_new_tokens": previous})
    started = time.monotonic()
    cluster.restart_worker(victim)
    url = cluster.plan.worker_urls[victim]
    while True:
        state = read_gateway(cluster.gateway_url, cluster.plan.worker_urls)
        if next(w for w in state.workers if w.url == url).healthy:
            break
        assert time.monotonic() - started < 30, "the restarted worker did not rejoin in 30 s"
        time.sleep(0.5)


def test_cluster_up_and_down_leave_no_process(model_dir: Path, tmp_path: Path) -> None:
    env = {
        **os.environ,
        "APPLIANCE_PATHS__DATA_DIR": str(tmp_path),
        "APPLIANCE_ENGINE__MODEL_PATH": str(model_dir),
    }
    gateway = free_port()
    up = subprocess.Popen(
        [sys.executable, "-m", "appliance.cli", "cluster", "up", "--workers", "2", "--no-serve",
         "--gateway-port", str(gateway), "--base-port", str(free_port()), "--threads", "2"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        lines = []
        for line in up.stdout:  # type: ignore[union-attr]
            lines.append(line)
            if "gateway ready" in line or "failed" in line:
                break
        assert any("gateway ready" in line for line in lines), "".join(lines)
        pids = json.loads((tmp_path / "cluster.json").read_text())["pids"]
        assert set(pids) == {"worker-0", "worker-1", "gateway"}
        assert running_state(tmp_path) == pids
        down = subprocess.run(
            [sys.executable, "-m", "appliance.cli", "cluster", "down"],
            env=env, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert down.returncode == 0 and "stopped" in down.stdout, down.stdout + down.stderr
        assert up.wait(30) == 0  # the foreground ``cluster up`` ended too
        for pid in [*pids.values(), up.pid]:
            assert not Path(f"/proc/{pid}").exists() or _zombie(pid), f"pid {pid} is still running"
        assert not (tmp_path / "cluster.json").exists()
    finally:
        if up.poll() is None:
            up.kill()


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0] == "Z"
    except OSError:
        return True


def _gateway_config(config_for, model_dir: Path, tmp_path: Path, url: str, workers, metrics: str):  # noqa: ANN001, ANN202
    return config_for(
        tmp_path,
        model_dir,
        engine={
            "backend": "sglang",
            "sglang_url": url,
            "sglang_worker_urls": list(workers),
            "gateway_metrics_url": metrics,
        },
    )


def _status(url: str, config, model_dir: Path, appliance) -> tuple[dict, bool]:  # noqa: ANN001
    """The admin console's engine status, and the app's engine health, for a gateway at
    ``url`` (the app's client: readiness is its health)."""
    from appliance.core.services.admin.engine_status import EngineStatus

    client = SGLangEngine(url, tokenizer=str(model_dir), health_path="/readiness")
    try:
        return EngineStatus(client, config, appliance.db).status(), client.health()
    finally:
        client.close()


def test_admin_status_and_doctor_see_every_worker(
    cluster: LocalCluster,
    config_for,  # noqa: ANN001
    model_dir: Path,
    tmp_path: Path,
    appliance,  # noqa: ANN001
) -> None:
    from appliance.ops.doctor_gateway import gateway_check
    from ui.admin.engine import status_markdown

    plan = cluster.plan
    config = _gateway_config(
        config_for, model_dir, tmp_path, cluster.gateway_url, plan.worker_urls,
        plan.gateway.metrics_url,
    )  # fmt: skip
    status, healthy = _status(cluster.gateway_url, config, model_dir, appliance)
    assert status["healthy"] is True and healthy
    gateway = status["gateway"]
    assert gateway["ready"] and [w["url"] for w in gateway["workers"]] == list(plan.worker_urls)
    for worker in gateway["workers"]:
        assert worker["healthy"] and worker["queue"] == 0 and 0 <= worker["kv_usage"] <= 1
        assert worker["cache_hit_rate"] is not None
    assert gateway["metrics"]["router_requests_total"] > 0  # the earlier tests' requests
    text = status_markdown(status)
    assert "2/2 workers healthy" in text and all(u in text for u in plan.worker_urls)
    check = gateway_check(config)
    assert check.ok, check.detail
    assert "through the gateway: 1-token generation" in check.detail
    assert check.detail.count("healthy, 1-token generation") == 2


def test_a_gateway_that_is_down_is_reported(
    cluster: LocalCluster,
    config_for,  # noqa: ANN001
    model_dir: Path,
    tmp_path: Path,
    appliance,  # noqa: ANN001
) -> None:
    from appliance.ops.doctor_gateway import gateway_check

    dead = f"http://127.0.0.1:{free_port()}"
    config = _gateway_config(
        config_for, model_dir, tmp_path, dead, cluster.plan.worker_urls, f"{dead}/metrics"
    )
    status, healthy = _status(dead, config, model_dir, appliance)
    assert healthy is False  # the app's /health says degraded (503)
    assert status["healthy"] is False
    assert status["gateway"]["reachable"] is False and "unreachable" in status["gateway"]["error"]
    check = gateway_check(config)
    assert not check.ok and "cluster up" in check.detail
