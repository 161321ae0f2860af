"""Browser sessions for ``appliance bench load``: real Chromium pages that sign in through
``/login`` and ask through the chat page, as staff do, all at once.

Each page gets a small watcher (``WATCH_JS``) that records, on the page's clock (this machine's
``Date.now()``), when a question was sent, when its answer first showed text, and when the turn
ended and how:

* ``answered``: the question box emptied (the chat page clears it once the answer is stored);
* ``busy`` / ``unavailable``: the chat's note for an engine that refused or is down
  (``.turn-note.busy`` / ``.turn-note.unavailable``); the question stays in its box;
* ``error``: any other failure note or error toast (a user could not tell what to do);
* ``hung``: nothing of the above within the turn's timeout.

While a question waits for a free slot the page shows where it is (``.turn-note.waiting``);
the watcher keeps the first and the last such note. Playwright's sync API is bound to the
thread that started it: ``BrowserRun`` owns one Chromium and drives every page from its own
thread, polling.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ("--no-sandbox", "--disable-gpu", "--disable-background-networking")
OUTCOMES = ("answered", "busy", "unavailable", "error", "hung")
CLEAR_OUTCOMES = ("answered", "busy", "unavailable")  # a user knows what happened
SIGN_IN_MS = 120_000
POLL_S = 0.25
# an answer's end is seen when its page has rendered the stored conversation (a bigger update
# than a token): answers taken strictly one after another can look as if they overlapped by
# that much, the next one's first text already showing on another page
GRACE_S = 1.0

# installed once per page after sign-in; ``window.__ask(question)`` starts a turn and
# ``window.__turn`` is its record (times in epoch milliseconds)
WATCH_JS = """
() => {
  const bots = () => [...document.querySelectorAll('#chatbot .message-row.bot-row')]
    .filter((row) => !row.querySelector('.pending'));
  const box = () => document.querySelector('#question textarea');
  window.__turn = null;
  window.__ask = (question) => {
    window.__turn = {sent: Date.now(), rows: bots().length, first: null, ended: null,
                     outcome: null, detail: '', waiting: '', waitingLast: ''};
    const input = box();
    input.value = question;
    input.dispatchEvent(new Event('input', {bubbles: true}));
    document.querySelector('#send').click();
  };
  const watch = () => {
    const t = window.__turn;
    if (!t || t.ended) return;
    const now = Date.now();
    const end = (outcome, detail) => {
      t.ended = now; t.outcome = outcome; t.detail = (detail || '').slice(0, 200);
    };
    const toast = document.querySelector('[data-testid="toast-body"].error');
    if (toast && toast.innerText.trim()) return end('error', toast.innerText.trim());
    const rows = bots();
    const last = rows.length > t.rows ? rows[rows.length - 1] : null;
    if (!last) return;
    const text = last.innerText.trim();
    const waiting = last.querySelector('.turn-note.waiting');
    if (waiting) {
      t.waitingLast = waiting.innerText.trim();
      t.waiting = t.waiting || t.waitingLast;
      return;
    }
    for (const kind of ['busy', 'unavailable']) {
      if (last.querySelector('.turn-note.' + kind)) return end(kind, text);
    }
    if (last.querySelector('.turn-note') || text.startsWith('\u26a0')) return end('error', text);
    if (text && text !== '\u2026' && t.first === null) t.first = now;
    if (t.first !== null && box() && box().value === '') end('answered', '');
  };
  setInterval(watch, 200);
}
"""


@dataclass
class BrowserTurn:
    """One question asked through the chat page; times in epoch seconds (page clock)."""

    session: int
    question: str
    sent: float = 0.0
    first: float | None = None  # the answer's first text
    ended: float | None = None
    outcome: str = "hung"
    detail: str = ""
    waiting: str = ""  # the first "where is my question" note the page showed
    waited_last: str = ""  # and the last one

    @property
    def done(self) -> bool:
        return self.ended is not None


@dataclass
class BrowserPlan:
    index: int
    username: str
    password: str
    questions: tuple[str, ...]
    turns: list[BrowserTurn] = field(default_factory=list)
    error: str = ""  # sign-in failed: no turn was asked


def launch(playwright: Any, executable: str = CHROMIUM) -> Any:
    """Headless Chromium (the system's: nothing is downloaded)."""
    return playwright.chromium.launch(executable_path=executable, args=list(CHROMIUM_ARGS))


def open_chat(browser: Any, base: str, username: str, password: str) -> Any:
    """A fresh browser context signed in through ``/login``, on the chat page, watched."""
    context = browser.new_context(locale="en-US", viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.goto(base + "/", timeout=SIGN_IN_MS)
    page.locator("#username").fill(username)
    page.locator("#password").fill(password)
    page.locator("#login").click()
    page.locator("#question textarea").wait_for(timeout=SIGN_IN_MS)
    page.evaluate(WATCH_JS)
    return page


def ask(page: Any, turn: BrowserTurn) -> None:
    """Send ``turn.question`` from ``page`` (returns at once; ``poll`` follows it)."""
    page.evaluate("(q) => window.__ask(q)", turn.question)


def poll(page: Any, turn: BrowserTurn, timeout_s: float) -> bool:
    """Copy the page's record into ``turn``; True once the turn has ended (or hung)."""
    record = page.evaluate("() => window.__turn") or {}
    turn.sent = (record.get("sent") or 0) / 1000
    turn.first = record["first"] / 1000 if record.get("first") else None
    turn.waiting = record.get("waiting") or turn.waiting
    turn.waited_last = record.get("waitingLast") or turn.waited_last
    if record.get("ended"):
        turn.ended, turn.outcome = record["ended"] / 1000, record["outcome"]
        turn.detail = record.get("detail") or ""
        return True
    if turn.sent and time.time() - turn.sent > timeout_s:
        turn.outcome, turn.detail = "hung", f"no answer within {timeout_s:.0f} s"
        return True
    return False


def drive(pages: list[tuple[BrowserPlan, Any]], timeout_s: float) -> None:
    """Ask every plan's questions in turn on its page, all pages at once; fill ``turns``."""
    active: dict[int, tuple[BrowserPlan, Any, int]] = {}

    def start(plan: BrowserPlan, page: Any, n: int) -> None:
        turn = BrowserTurn(plan.index, plan.questions[n])
        plan.turns.append(turn)
        try:
            ask(page, turn)
        except Exception as exc:  # noqa: BLE001 - a broken page is an outcome, not a crash
            turn.outcome, turn.detail, turn.ended = "error", f"ask: {exc}"[:200], time.time()
            return
        active[plan.index] = (plan, page, n)

    for plan, page in pages:
        if not plan.error and plan.questions:
            start(plan, page, 0)
    while active:
        time.sleep(POLL_S)
        for index, (plan, page, n) in list(active.items()):
            turn = plan.turns[-1]
            try:
                ended = poll(page, turn, timeout_s)
            except Exception as exc:  # noqa: BLE001
                turn.outcome, turn.detail, ended = "error", f"page: {exc}"[:200], True
            if not ended:
                continue
            del active[index]
            if turn.outcome != "hung" and n + 1 < len(plan.questions):
                start(plan, page, n + 1)


class BrowserRun(threading.Thread):
    """One Chromium, one signed-in page per plan. ``ready`` is set once every page is on the
    chat page (or failed to sign in); the questions go out when ``go`` is set."""

    def __init__(
        self, base: str, plans: list[BrowserPlan], timeout_s: float, executable: str = CHROMIUM
    ) -> None:
        super().__init__(name="bench-browsers", daemon=True)
        self.base, self.plans, self.timeout_s, self.executable = base, plans, timeout_s, executable
        self.ready, self.go = threading.Event(), threading.Event()
        self.failure = ""  # Chromium itself did not start

    def run(self) -> None:
        from playwright.sync_api import sync_playwright

        try:
            with sync_playwright() as pw:
                browser = launch(pw, self.executable)
                try:
                    pages = [(plan, self._open(browser, plan)) for plan in self.plans]
                    self.ready.set()
                    self.go.wait()
                    opened = [(plan, page) for plan, page in pages if page is not None]
                    drive(opened, self.timeout_s)
                finally:
                    browser.close()
        except Exception as exc:  # noqa: BLE001 - reported in the table, never a traceback
            self.failure = f"{type(exc).__name__}: {exc}"[:300]
        finally:
            self.ready.set()

    def _open(self, browser: Any, plan: BrowserPlan) -> Any:
        try:
            return open_chat(browser, self.base, plan.username, plan.password)
        except Exception as exc:  # noqa: BLE001
            plan.error = f"sign-in: {type(exc).__name__}: {exc}"[:200]
            return None


def at_once(turns: list[BrowserTurn], grace_s: float = GRACE_S) -> int:
    """The most answers that were streaming at the same moment (answered turns, from an
    answer's first text to its end less ``grace_s``). Answers taken one at a time give 1."""
    spans = [
        (t.first, max(t.first, t.ended - grace_s))
        for t in turns
        if t.outcome == "answered" and t.first is not None and t.ended is not None
    ]
    # at a tie the end (-1) sorts first: touching spans do not overlap
    edges = sorted(edge for a, b in spans for edge in ((a, 1), (b, -1)))
    most = now = 0
    for _moment, step in edges:
        now += step
        most = max(most, now)
    return most
