"""``appliance bench load``: simulated staff sessions against a running app, on loopback.
(``--workers N``: the engine set-ups side by side instead, one worker against N behind the
model gateway: ``cluster_load.py``.)

    appliance --config CFG bench load --url http://127.0.0.1:7860 --sessions 32 --turns 2
    ... --kill-engine-after 20 --engine-pid PID [--restart-cmd "CMD"]

First a baseline: one session alone; then N concurrent sessions (bounded: ``--sessions`` at
most 64, ``--turns`` at most 8, and no new turn after ``--duration`` seconds). It prints p50/p95
TTFT and end-to-end latency against the baseline, the outcome of every turn by kind, and the
lost-message check (every acknowledged answer is read back from ``/api/conversations``).

With ``--kill-engine-after S`` the engine process (``--engine-pid``) is killed with SIGKILL S
seconds into the concurrent run (as soon as a turn is in flight); ``--restart-cmd`` restarts
it where no supervisor does (under systemd, ``Restart=on-failure`` does). It reports what the
requests in flight got, and how long the app took to be healthy again.

A session sends a question again (at most 3 times) after "busy" or "unavailable", as a person
would; every attempt is counted. Staff accounts: ``--username/--password`` for all sessions,
else the bench creates (or resets) ``loadbench-NN`` staff users in the configured database.

With ``--browsers N`` (at most 32), N real Chromium pages (``--chromium``, the system's) sign in
through ``/login`` and ask the same questions through the chat page, alongside the API sessions
(``--sessions 0``: browsers only); each signs in first, then all ask at once
(``appliance.bench.load_browser``). A browser turn is not sent again: its outcome is what the
person saw (answered, told the engine is busy or down, an unclear error, or nothing: hung). The
table gives every browser session's outcome and times, and whether the answers overlapped in
time (the most that were streaming at once).
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import signal
import statistics
import subprocess
import threading
import time

import httpx

from appliance.bench import cluster_load, load_browser
from appliance.bench.load_browser_report import browser_tables, browsers_rc
from appliance.bench.load_session import CLEAR, SessionPlan, Turn, lost_messages, run_session
from appliance.bench.table import render
from appliance.core.config import SAMPLE_CORPUS, AppConfig

MAX_SESSIONS = 64
MAX_BROWSERS = 32
MAX_TURNS = 8
MAX_DURATION_S = 900
QA_FILE = SAMPLE_CORPUS / "qa.json"


def _questions() -> list[str]:
    return [item["question"] for item in json.loads(QA_FILE.read_text(encoding="utf-8"))]


def _accounts(config: AppConfig, n: int, args: argparse.Namespace) -> list[tuple[str, str]]:
    if args.username:
        return [(args.username, args.password or "")] * n
    from appliance.core.auth.service import AuthError, AuthService
    from appliance.wiring.appliance import open_database

    db = open_database(config)
    auth = AuthService(db, config.security.session_ttl_hours)
    accounts = []
    try:
        for i in range(n):
            name, password = f"loadbench-{i:02d}", secrets.token_urlsafe(12)
            try:
                auth.create_user(name, password, role="staff")
            except AuthError:
                auth.set_password(name, password)
            accounts.append((name, password))
    finally:
        db.dispose()
    return accounts


def pct(values: list[float], q: float) -> float | None:
    """The q-quantile (0..1) by linear interpolation; None without values."""
    if not values:
        return None
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(sorted(values), n=100, method="inclusive")[round(q * 100) - 1]


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f} s"


def _ratio(a: float | None, b: float | None) -> str:
    return "-" if not a or b is None else f"{b / a:.1f}x"


def run_sessions(
    url: str,
    accounts: list[tuple[str, str]],
    questions: list[str],
    turns: int,
    duration_s: float,
    timeout_s: float,
    on_start=None,  # noqa: ANN001 - called with the plans once all sessions run (kill)
) -> tuple[list[SessionPlan], float]:
    """Run one session per account concurrently; return the plans and the wall time."""
    deadline = time.monotonic() + duration_s
    plans = []
    for i, (user, password) in enumerate(accounts):
        qs = tuple(questions[(i * turns + t) % len(questions)] for t in range(turns))
        plans.append(SessionPlan(i, user, password, qs, deadline))
    stop = threading.Event()
    threads = [
        threading.Thread(target=run_session, args=(url, p, timeout_s, stop), daemon=True)
        for p in plans
    ]
    started = time.monotonic()
    for t in threads:
        t.start()
    if on_start is not None:
        on_start(plans)
    for t in threads:
        t.join(timeout=max(1.0, deadline - time.monotonic()) + timeout_s + 30)
    stop.set()
    return plans, time.monotonic() - started


class EngineKiller:
    """Kill the engine S seconds in, once a turn is in flight; time until the app's /health
    is 200 again."""

    def __init__(self, url: str, pid: int, after_s: float, restart_cmd: str | None) -> None:
        self.url, self.pid, self.after_s, self.restart_cmd = url, pid, after_s, restart_cmd
        self.killed_at: float | None = None
        self.recovered_at: float | None = None
        self.down_seen = False
        self.plans: list[SessionPlan] = []
        self.thread = threading.Thread(target=self._run, daemon=True)

    def start(self, plans: list[SessionPlan]) -> None:
        self.plans = plans
        self.thread.start()

    def _in_flight(self) -> bool:
        return any(t.ended == 0.0 for p in self.plans for t in list(p.turns))

    def _run(self) -> None:
        time.sleep(self.after_s)
        wait_until = time.monotonic() + 120
        while not self._in_flight() and time.monotonic() < wait_until:
            time.sleep(0.05)
        os.kill(self.pid, signal.SIGKILL)
        self.killed_at = time.monotonic()
        if self.restart_cmd:
            subprocess.Popen(self.restart_cmd, shell=True, start_new_session=True)  # noqa: S602
        deadline = self.killed_at + 300
        with httpx.Client(base_url=self.url, timeout=5) as client:
            while time.monotonic() < deadline:
                try:
                    ok = client.get("/health").status_code == 200
                except httpx.HTTPError:
                    ok = False
                self.down_seen |= not ok
                if ok and self.down_seen:
                    self.recovered_at = time.monotonic()
                    return
                time.sleep(0.25)

    @property
    def recovery_s(self) -> float | None:
        if self.killed_at is None or self.recovered_at is None:
            return None
        return self.recovered_at - self.killed_at


def _turns(plans: list[SessionPlan]) -> list[Turn]:
    return [t for p in plans for t in p.turns]


def _summary_rows(base: list[Turn], load: list[Turn]) -> list[list[object]]:
    def series(turns: list[Turn], attr: str) -> list[float]:
        if attr == "ttft":
            return [t.ttft_s for t in turns if t.outcome == "ok" and t.ttft_s is not None]
        return [t.ended - t.started for t in turns if t.outcome == "ok"]

    rows: list[list[object]] = []
    for label, attr in (("TTFT", "ttft"), ("end-to-end", "e2e")):
        for q in (0.5, 0.95):
            b, lo = pct(series(base, attr), q), pct(series(load, attr), q)
            rows.append([f"{label} p{int(q * 100)}", _fmt(b), _fmt(lo), _ratio(b, lo)])
    return rows


def _outcome_rows(turns: list[Turn]) -> list[list[object]]:
    total = len(turns)
    counts = {k: sum(t.outcome == k for t in turns) for k in (*CLEAR, "unclear")}
    errors = total - counts["ok"] - counts["busy"]
    rows = [[k, counts[k], f"{counts[k] / total:.1%}" if total else "-"] for k in counts]
    rows.append(
        ["error rate (not ok, not busy)", errors, f"{errors / total:.1%}" if total else "-"]
    )
    return rows


def _parser(config: AppConfig) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="appliance bench load")
    p.add_argument("--url", default=f"http://127.0.0.1:{config.server.port}")
    p.add_argument("--sessions", type=int, default=32)
    p.add_argument("--turns", type=int, default=2, help="questions per session")
    p.add_argument("--duration", type=float, default=300, help="no new turn after this (s)")
    p.add_argument("--timeout", type=float, default=240, help="per request (s)")
    p.add_argument("--username")
    p.add_argument("--password")
    p.add_argument("--no-baseline", action="store_true")
    p.add_argument("--kill-engine-after", type=float, help="SIGKILL the engine after S seconds")
    p.add_argument("--engine-pid", type=int)
    p.add_argument("--restart-cmd", help="shell command that restarts the engine")
    p.add_argument("--browsers", type=int, default=0, help="Chromium chat pages alongside")
    p.add_argument("--chromium", default=load_browser.CHROMIUM, help="the Chromium to drive")
    p.add_argument(
        "--workers",
        type=int,
        default=0,
        help="instead: 1 worker direct, then N behind the gateway (cluster_load.py)",
    )
    cluster_load.add_arguments(p)
    return p


def _check_bounds(p: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """``p.error`` (exit 2) for an unbounded run, or one that targets another machine."""
    least = 0 if args.browsers else 1  # browsers only: no API session
    if not least <= args.sessions <= MAX_SESSIONS or not 1 <= args.turns <= MAX_TURNS:
        p.error(f"--sessions {least}..{MAX_SESSIONS} and --turns 1..{MAX_TURNS}")
    if not 0 <= args.browsers <= MAX_BROWSERS:
        p.error(f"--browsers 0..{MAX_BROWSERS}")
    if not 0 < args.duration <= MAX_DURATION_S:
        p.error(f"--duration must be in (0, {MAX_DURATION_S}]")
    if args.kill_engine_after is not None and args.engine_pid is None:
        p.error("--kill-engine-after needs --engine-pid")
    if args.kill_engine_after is not None and not args.sessions:
        p.error("--kill-engine-after needs API sessions (--sessions 1 or more)")
    host = args.url.split("://", 1)[-1].split("/", 1)[0].rsplit(":", 1)[0]
    if host not in ("127.0.0.1", "localhost", "[::1]") and not host.startswith("127."):
        p.error("the load bench only targets the app on this machine (loopback)")


def main(argv: list[str], config: AppConfig) -> int:
    """``appliance bench load``: see the module docstring."""
    p = _parser(config)
    args = p.parse_args(argv)
    if args.workers:
        if not 2 <= args.workers <= 8 or not 1 <= args.sessions <= MAX_SESSIONS:
            p.error(f"--workers 2..8 and --sessions 1..{MAX_SESSIONS}")
        return cluster_load.main(args, config)
    _check_bounds(p, args)
    try:
        httpx.get(f"{args.url}/health", timeout=10)
    except httpx.HTTPError as exc:
        print(f"the app at {args.url} does not answer ({exc}): start it first")
        return 2

    questions = _questions()
    accounts = _accounts(config, args.sessions + args.browsers, args)
    api_accounts, browser_accounts = accounts[: args.sessions], accounts[args.sessions :]
    base: list[SessionPlan] = []
    if api_accounts and not args.no_baseline:
        base, _ = run_sessions(
            args.url, api_accounts[:1], questions, args.turns, args.duration, args.timeout
        )
    browsers = _start_browsers(args, browser_accounts, questions) if browser_accounts else None
    if browsers is not None and browsers.failure:
        print(f"the browsers did not start: {browsers.failure}")
        return 2
    killer = None
    if args.kill_engine_after is not None:
        killer = EngineKiller(args.url, args.engine_pid, args.kill_engine_after, args.restart_cmd)
    started = time.monotonic()
    if browsers is not None:
        browsers.go.set()  # the pages ask as the API sessions start
    plans: list[SessionPlan] = []
    if api_accounts:
        plans, _ = run_sessions(
            args.url,
            api_accounts,
            questions,
            args.turns,
            args.duration,
            args.timeout,
            on_start=killer.start if killer else None,
        )
    if browsers is not None:
        browsers.join(timeout=args.timeout * args.turns + 60)
    wall = time.monotonic() - started
    if killer is not None:
        killer.thread.join(timeout=330)
    lost = lost_messages(args.url, base + plans)
    rc = _report(args, base, plans, wall, lost, killer) if api_accounts else 0
    if browsers is not None:
        print(browser_tables(browsers))
        rc = max(rc, browsers_rc(browsers))
    return rc


def _start_browsers(
    args: argparse.Namespace, accounts: list[tuple[str, str]], questions: list[str]
) -> load_browser.BrowserRun:
    """Chromium with every browser session signed in on the chat page, waiting for ``go``.
    Browser sessions ask the questions after the API sessions' (another part of the set)."""
    offset = args.sessions * args.turns
    plans = []
    for i, (user, password) in enumerate(accounts):
        qs = tuple(
            questions[(offset + i * args.turns + t) % len(questions)] for t in range(args.turns)
        )
        plans.append(load_browser.BrowserPlan(i, user, password, qs))
    run = load_browser.BrowserRun(args.url, plans, args.timeout, args.chromium)
    run.start()
    run.ready.wait(timeout=120 + 20 * len(plans))
    return run


def _report(
    args: argparse.Namespace,
    base: list[SessionPlan],
    plans: list[SessionPlan],
    wall: float,
    lost: list[str],
    killer: EngineKiller | None,
) -> int:
    """Print the tables; 0 when nothing was lost and every turn ended clearly, else 1."""
    load = _turns(plans)
    print(
        f"appliance bench load: {args.url}, {args.sessions} sessions x {args.turns} turns, "
        f"{wall:.0f} s wall, {os.cpu_count()} CPUs"
    )
    print(
        render(
            ["measure", "baseline (1 session)", f"{args.sessions} sessions", "ratio"],
            _summary_rows(_turns(base), load),
        )
    )
    print(render(["outcome", "turns", "share"], _outcome_rows(load)))
    print(
        render(
            ["check", "result"],
            [
                [
                    "acknowledged answers read back",
                    sum(t.outcome == "ok" for t in _turns(base + plans)),
                ],
                ["lost or altered", len(lost)],
            ],
        )
    )
    for line in lost[:10]:
        print(f"  LOST {line}")
    for t in [t for t in load if t.outcome == "unclear"][:5]:
        print(f"  unclear: session {t.session}: {t.detail}")
    if killer is not None:
        print(_kill_table(killer, load))
    return 0 if not lost and all(t.outcome in CLEAR for t in load) else 1


def _kill_table(killer: EngineKiller, turns: list[Turn]) -> str:
    k = killer.killed_at
    in_flight = [t for t in turns if k is not None and t.started <= k < (t.ended or k + 1)]
    counts = {o: sum(t.outcome == o for t in in_flight) for o in (*CLEAR, "unclear")}
    after = [t for t in turns if k is not None and t.started > k]
    rows = [
        ["requests in flight at the kill", len(in_flight)],
        ["  ... answered (finished first)", counts["ok"]],
        ["  ... clear error (unavailable/busy)", counts["unavailable"] + counts["busy"]],
        ["  ... unclear (500, broken stream)", counts["unclear"]],
        ["turns started after the kill", len(after)],
        ["  ... answered", sum(t.outcome == "ok" for t in after)],
        ["app healthy again after", _fmt(killer.recovery_s)],
    ]
    return render(["engine kill", "value"], rows)
