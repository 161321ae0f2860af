"""``appliance bench load`` against a real app on loopback: the appliance's API with the real
model behind an ``appliance engine-server`` process, which the bench kills mid-run (SIGKILL)
and restarts; every turn must end clearly and every acknowledged answer must be stored."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from support.browser import need_chromium
from support.servers import free_port, serving

from appliance.api.chat import build_api
from appliance.bench import load_bench
from appliance.bench.load_browser import BrowserTurn, at_once
from appliance.wiring.appliance import SAMPLE_CORPUS, build_appliance, build_engine
from appliance.wiring.web import build_web_app


def _engine_cmd(port: int, model_dir: Path, pidfile: Path) -> str:
    return (
        f"APPLIANCE_ENGINE__MODEL_PATH={model_dir} HF_HUB_OFFLINE=1 "
        f"{sys.executable} -m appliance.cli engine-server --port {port} "
        f"> /dev/null 2>&1 & echo $! > {pidfile}"
    )


def _wait_health(url: str, timeout_s: float = 180) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/health", timeout=5).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise AssertionError(f"{url} did not become healthy")


@pytest.fixture()
def engine_process(tmp_path: Path, model_dir: Path):  # noqa: ANN201
    port, pidfile = free_port(), tmp_path / "engine.pid"
    cmd = _engine_cmd(port, model_dir, pidfile)
    env = {k: v for k, v in os.environ.items() if not k.startswith("APPLIANCE_")}
    subprocess.run(cmd, shell=True, check=True, env=env)  # noqa: S602
    url = f"http://127.0.0.1:{port}"
    _wait_health(url)
    yield url, pidfile, cmd
    pid = int(pidfile.read_text())  # the restarted one, after the kill
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, 15)


def test_load_with_an_engine_kill_mid_run(
    engine_process,
    tmp_path: Path,
    model_dir: Path,
    embedder,
    config_for,
    capsys,  # noqa: ANN001
) -> None:
    engine_url, pidfile, restart_cmd = engine_process
    config = config_for(
        tmp_path / "data",
        model_dir,
        engine={"backend": "sglang", "sglang_url": engine_url, "max_new_tokens": 8},
        bootstrap={"ingest_sample_corpus": False},
    )
    client = build_engine(config)
    app = build_appliance(config, engine=client, embedder=embedder)
    app.ingest.ingest_paths([SAMPLE_CORPUS / "it-vpn-access.md"], collection="default", actor="t")
    try:
        with serving(build_api(app.auth, app.chat, client)) as url:
            killed_pid = int(pidfile.read_text())
            # 4 turns a session and the kill 1 s in: turns still start after it however fast
            # the engine answers (with 2 turns and the kill 2 s in, a fast run had started
            # every turn before the kill)
            argv = ["--url", url, "--sessions", "2", "--turns", "4", "--duration", "120"]
            argv += ["--no-baseline", "--kill-engine-after", "1", "--engine-pid", str(killed_pid)]
            argv += ["--restart-cmd", restart_cmd]
            rc = load_bench.main(argv, config)
            out = capsys.readouterr().out
            assert int(pidfile.read_text()) != killed_pid  # it was restarted
            with httpx.Client(base_url=url, timeout=120) as http:
                assert http.get("/health").status_code == 200  # the app is back
    finally:
        client.close()
        app.db.dispose()
    print(out)
    assert "TTFT p50" in out and "2 sessions" in out
    assert "| lost or altered                | 0" in out
    flight = next(x for x in out.splitlines() if "requests in flight at the kill" in x)
    assert int(flight.split("|")[2]) >= 1, out  # the kill waits for a turn in flight
    recovery = next(x for x in out.splitlines() if "app healthy again after" in x)
    assert recovery.split("|")[2].strip().endswith(" s"), recovery
    assert float(recovery.split("|")[2].split()[0]) < 30
    # sessions that asked again after the outage got answers from the restarted engine
    after = out[out.index("turns started after the kill") :].splitlines()[1]
    assert "answered" in after and int(after.split("|")[2]) >= 1, out
    assert rc == 0, out  # every turn ended clearly (ok, busy or unavailable)


def test_load_bench_refuses_unbounded_or_remote_runs(config_for, model_dir, tmp_path) -> None:  # noqa: ANN001
    config = config_for(tmp_path, model_dir)
    for argv in (
        ["--sessions", "500"],
        ["--turns", "0"],
        ["--duration", "5000"],
        ["--url", "http://10.1.2.3:7860"],
        ["--kill-engine-after", "3"],
        ["--browsers", "33"],
        ["--sessions", "0"],  # nothing to run
        ["--sessions", "0", "--browsers", "2", "--kill-engine-after", "3", "--engine-pid", "1"],
    ):
        with pytest.raises(SystemExit) as exc:
            load_bench.main(argv, config)
        assert exc.value.code == 2, argv


def _row(out: str, label: str) -> str:
    """The value cell of the table row that starts with ``label``."""
    line = next(x for x in out.splitlines() if x.startswith(f"| {label} "))
    return line.split("|")[2].strip()


@pytest.mark.browser
def test_browser_sessions_ask_through_the_chat_page_at_once(
    tmp_path: Path,
    model_dir: Path,
    engine,
    embedder,
    config_for,
    capsys,  # noqa: ANN001
) -> None:
    """``--browsers 3`` alongside one API session, against the whole web app: three Chromium
    pages sign in and ask at once; the table gives each one's outcome and the overlap."""
    need_chromium()
    config = config_for(
        tmp_path / "data",
        model_dir,
        engine={"max_new_tokens": 32},
        bootstrap={"ingest_sample_corpus": False},
    )
    app = build_appliance(config, engine=engine, embedder=embedder)
    app.ingest.ingest_folder(SAMPLE_CORPUS)
    web = build_web_app(app)
    try:
        with serving(web) as url:
            argv = ["--url", url, "--sessions", "1", "--browsers", "3", "--turns", "1"]
            rc = load_bench.main([*argv, "--no-baseline", "--duration", "120"], config)
    finally:
        web.state.admin_console.sampler.stop()
        app.db.dispose()
    out = capsys.readouterr().out
    print(out)
    assert "browser sessions: 3 Chromium pages" in out
    assert "1 sessions x 1 turns" in out  # the API session ran alongside
    for n in range(3):
        assert f"| {n:<7} | loadbench-{n + 1:02d} | 1    | answered " in out, out
    assert _row(out, "browser turns answered") == "3", out
    for kind in ("busy", "unavailable", "error", "hung"):
        assert _row(out, f"browser turns {kind}") == "0", out
    assert _row(out, "answers overlapped in time") == "yes", out
    assert rc == 0, out


def test_overlap_counts_answers_streaming_together() -> None:
    def turn(first: float, ended: float, outcome: str = "answered") -> BrowserTurn:
        return BrowserTurn(0, "q", sent=0.0, first=first, ended=ended, outcome=outcome)

    assert at_once([turn(1, 10), turn(2, 11), turn(3, 12)]) == 3
    # one after another: the next one's first text may show as the last one's end renders
    assert at_once([turn(1.2, 7.8), turn(7.6, 10.3), turn(9.6, 14.6)]) == 1
    assert at_once([turn(1, 10), turn(2, 11, "busy")]) == 1  # only answers count
    assert at_once([]) == 0
