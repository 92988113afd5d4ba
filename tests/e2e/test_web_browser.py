"""The web view in a real browser (Debian's Chromium, headless, driven by Playwright), served
by the real `legion web` on a real project: log in with the printed link, the board filled
by pushes (no reload), a hostile title shown as text, a question answered from the inbox and
credited to the person, a viewer who cannot write, a cross-site form refused, the board on a
phone. Screenshots of each page go to `$LEGION_TEST_ARTIFACTS/web/` when it is set.

And `legion demo --web`: the board followed through a demo's whole run, pushed.

Cost: the first, one `legion web` and a browser, about 9 s and 8 CPU-s, no agent session; the
second, a one-issue demo on Codex beside it, about 25 s.
"""

from __future__ import annotations

import json
import os
import signal
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from legion.demo.swarm_script import swarm_script
from tests.support.browser import Served, chromium, save, served
from tests.support.cli import LegionRunner
from tests.support.codex_env import find_codex
from tests.support.swarm import Daemon, Swarm
from tests.support.waits import wait_until

HOSTILE = "<img src=x onerror=alert(1)> <script>alert(2)</script>"
# Read on import: each test's environment is cleared of LEGION_ variables (tests/conftest.py).
ARTIFACTS = os.environ.get("LEGION_TEST_ARTIFACTS")
PUSHED_WITHIN_MS = 20000  # a change reaches an open page in about a second; slack for load


@pytest.fixture
def web(project: Path, legion: LegionRunner) -> Iterator[Served]:
    assert legion("issue", "create", HOSTILE).returncode == 0
    assert legion("issue", "create", "Pick a config format").returncode == 0
    env = os.environ | {"LEGION_AUTHOR": "lead"}
    with served(["web", "--port", "0"], project, env) as web:
        yield web


def shot(page: Page, name: str, tmp_path: Path) -> None:
    data = page.screenshot(full_page=True)
    save(tmp_path / "screens" / f"{name}.png", data)
    if ARTIFACTS:
        save(Path(ARTIFACTS) / "web" / f"{name}.png", data)


def paste(page: Page, base: str, token: str) -> None:
    """Log in with a named token as a person does: pasted into the login form (never in an
    address, where the browser's history would keep it)."""
    page.goto(base + "/login")
    page.fill('input[name="token"]', token)
    page.click("text=Log in")
    page.wait_for_url(base + "/")


class CrossSite(BaseHTTPRequestHandler):
    """Another site on this machine: its page posts a form to the web view."""

    target = ""

    def do_GET(self) -> None:
        body = (
            f'<form id="f" method="post" action="{self.target}/inbox/answer">'
            '<input name="project" value="repo"><input name="issue" value="LEG-2">'
            '<input name="text" value="forged"><input name="csrf" value="guess"></form>'
            "<script>document.getElementById('f').submit()</script>"
        ).encode()
        self.send_response(200)
        self.send_header("content-type", "text/html")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        del format, args


def test_the_web_view_in_a_browser(web: Served, legion: LegionRunner, tmp_path: Path) -> None:
    dialogs: list[str] = []
    with chromium() as browser:
        context = browser.new_context(viewport={"width": 1280, "height": 800})
        page = context.new_page()
        page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))

        # The printed link logs in and leaves the address bar: the token is in no history.
        page.goto(web.link)
        assert page.url == web.base + "/"
        assert "token=" not in page.url
        expect(page.locator(".who")).to_have_text("lead · operator")

        # A hostile title is text: no element made of it, no script run.
        title = page.locator('[data-issue="LEG-1"] .title')
        expect(title).to_have_text(HOSTILE)
        assert page.locator("main img").count() == 0 and page.locator("main script").count() == 0
        shot(page, "board", tmp_path)

        # The board is pushed: a new issue and a move show up without a reload.
        page.evaluate("window.notReloaded = true")
        assert legion("issue", "create", "Added while watching").returncode == 0
        card = page.locator('.column[data-phase="Todo"] [data-issue="LEG-3"]')
        expect(card).to_be_visible(timeout=PUSHED_WITHIN_MS)
        assert legion("issue", "move", "LEG-3", "In Progress").returncode == 0
        moved = page.locator('.column[data-phase="In Progress"] [data-issue="LEG-3"]')
        expect(moved).to_be_visible(timeout=PUSHED_WITHIN_MS)
        assert page.evaluate("window.notReloaded") is True

        # A question waiting for a person shows in the inbox, pushed; the answer given there
        # goes the way `legion feedback` goes, credited to the person.
        page.click("text=Inbox")
        expect(page.locator(".question")).to_have_count(0)
        page.evaluate("window.notReloaded = true")
        asked = legion("escalate", "LEG-2", "--question", "JSON or <YAML>?", "--reason", "open")
        assert asked.returncode == 0, asked.stderr
        question = page.locator('.question[data-issue="LEG-2"]')
        expect(question).to_be_visible(timeout=PUSHED_WITHIN_MS)
        expect(question.locator(".asked")).to_contain_text("JSON or <YAML>?")
        assert page.evaluate("window.notReloaded") is True
        shot(page, "inbox", tmp_path)
        # A push is held while the person is in a field, and shown once they leave it.
        question.locator("textarea").focus()
        assert legion("escalate", "LEG-3", "--question", "And?", "--reason", "r").returncode == 0
        # Waits for the push itself (held, the page marks it), not for a fixed time.
        expect(page.locator("body[data-held]")).to_be_attached(timeout=PUSHED_WITHIN_MS)
        expect(page.locator('.question[data-issue="LEG-3"]')).to_have_count(0)
        page.locator("h1").click()
        expect(page.locator('.question[data-issue="LEG-3"]')).to_be_visible()
        question.locator("textarea").fill("JSON, always.")
        question.locator("button").click()
        expect(page.locator(".flash")).to_contain_text("LEG-2: answered")
        expect(page.locator('.question[data-issue="LEG-2"]')).to_have_count(0)
        shown = json.loads(legion("issue", "show", "LEG-2", "--json").stdout)
        assert shown["comments"][-1]["author"] == "lead"
        assert shown["comments"][-1]["body"] == "JSON, always."
        assert "user-feedback-given" in shown["labels"]

        # The log says who answered; spend and hosts are drawn (no usage, no host yet).
        page.click("nav >> text=Log")
        expect(page.locator("table.log")).to_contain_text("answered by lead")
        shot(page, "log", tmp_path)
        page.click("nav >> text=Spend")
        expect(page.locator("main")).to_contain_text("No model usage recorded yet")
        page.click("nav >> text=Hosts")
        expect(page.locator("main")).to_contain_text("No host has joined yet")

        # Another site's page that posts to the view gets nothing done: the browser does not
        # send the SameSite=Strict cookie with it, and without it nothing is written.
        CrossSite.target = web.base
        other = ThreadingHTTPServer(("127.0.0.1", 0), CrossSite)
        threading.Thread(target=other.serve_forever, daemon=True).start()
        try:
            attacked = context.new_page()
            with attacked.expect_navigation(url=web.base + "/inbox/answer"):
                attacked.goto(f"http://localhost:{other.server_address[1]}/")
            assert "refused" in attacked.content() or "not logged in" in attacked.content()
        finally:
            other.shutdown()
        comments = json.loads(legion("issue", "show", "LEG-2", "--json").stdout)["comments"]
        assert all(c["body"] != "forged" for c in comments)

        # A viewer's token reads the same and has nothing to write with.
        minted = legion("web", "token", "--name", "bo", "--read-only", "--json")
        viewer_token = json.loads(minted.stdout)["token"]
        assert legion("escalate", "LEG-1", "--question", "Which?", "--reason", "r").returncode == 0
        viewer = browser.new_context().new_page()
        paste(viewer, web.base, viewer_token)
        expect(viewer.locator(".who")).to_have_text("bo · viewer")
        viewer.click("text=Inbox")
        expect(viewer.locator('.question[data-issue="LEG-1"]')).to_be_visible()
        assert viewer.locator(".question form").count() == 0
        # Revoked, its open page stops getting the swarm.
        assert legion("web", "revoke", "bo").returncode == 0
        viewer.reload()
        expect(viewer.locator("main")).to_contain_text("not logged in")

        # On a phone the board is a list by phase: the columns one under the other.
        phone = browser.new_context(viewport={"width": 375, "height": 800})
        small = phone.new_page()
        small.goto(web.base + "/")  # the cookie is the first context's: log in again
        expect(small.locator("main")).to_contain_text("not logged in")
        token = json.loads(legion("web", "token", "--name", "cy", "--json").stdout)["token"]
        paste(small, web.base, token)
        expect(small.locator(".who")).to_have_text("cy · operator")
        expect(small.locator('.column[data-phase="In Progress"]')).to_be_visible()
        todo = small.locator('.column[data-phase="Todo"]').bounding_box()
        doing = small.locator('.column[data-phase="In Progress"]').bounding_box()
        assert todo and doing and doing["y"] > todo["y"] and abs(doing["x"] - todo["x"]) < 2
        width = small.evaluate("document.documentElement.scrollWidth")
        assert width <= 375, width  # nothing wider than the phone
        shot(small, "board-phone", tmp_path)
    assert dialogs == []


# Which columns the card of LEG-1 was seen in, as the page's pushes replaced the board.
RECORD_PHASES = """
window.seen = new Set();
const record = () => document.querySelectorAll('[data-issue="LEG-1"]')
  .forEach((card) => window.seen.add(card.closest('.column').dataset.phase));
new MutationObserver(record)
  .observe(document.querySelector('main'), {childList: true, subtree: true});
record();
"""

# Each screen the issue page's tail showed, and whose it was.
RECORD_TAILS = """
window.tails = new Set(); window.tailOf = new Set();
const look = () => {
  const tail = document.querySelector('pre.tail');
  if (tail && tail.textContent.trim()) window.tails.add(tail.textContent);
  const of = document.querySelector('.workers h3');
  if (of) window.tailOf.add(of.textContent);
};
new MutationObserver(look)
  .observe(document.querySelector('main'), {childList: true, subtree: true});
look();
"""


def test_legion_demo_web_shows_the_swarm_work_live(tmp_path: Path) -> None:
    env = os.environ | {"LEGION_CODEX_BIN": str(find_codex())}
    args = ["demo", "--web", "--runtime", "codex", "--issues", "1", "--dir", str(tmp_path / "d")]
    with served(args, tmp_path, env, timeout=120) as demo:
        with chromium() as browser:
            page = browser.new_context().new_page()
            page.goto(demo.link)
            page.evaluate(RECORD_PHASES)
            page.evaluate("window.notReloaded = true")
            # Its issue's page beside it: the worker's screen, pushed as it moves.
            issue = page.context.new_page()
            issue.goto(demo.base + "/issue/repo/LEG-1")
            issue.evaluate(RECORD_TAILS)
            done = page.locator('.column[data-phase="Done"] [data-issue="LEG-1"]')
            expect(done).to_be_visible(timeout=180_000)
            assert page.evaluate("window.notReloaded") is True
            seen = set(page.evaluate("[...window.seen]"))
            assert {"In Progress", "Needs Review", "Done"} <= seen, seen
            shot(page, "demo-board", tmp_path)
            expect(issue.locator(".facts .status")).to_have_text("Done", timeout=10_000)
            tails = issue.evaluate("[...window.tails]")
            assert len(tails) >= 3, tails  # the screens of several sessions, as they moved
            modes = set(issue.evaluate("[...window.tailOf]"))
            assert len(modes) >= 2, modes
            timeline = issue.locator(".timeline").inner_text()
            assert "dispatch" in timeline, timeline
            shot(issue, "demo-issue", tmp_path)
            # What the demo's sessions spent, metered by the daemon's proxy, drawn by day.
            page.click("nav >> text=Spend")
            expect(page.locator(".chart rect")).to_have_count(14)
            expect(page.locator("main")).to_contain_text("LEG-1")
            shot(page, "demo-spend", tmp_path)
            # The bus's channels: the issue's, with the agent of each mode it went through.
            page.click("nav >> text=Channels")
            page.click('.channel-list a[href$="leg-1" i]')
            for mode in ("plan", "implement", "review", "finish"):
                expect(page.locator("table.agents")).to_contain_text(f"@{mode}")
            shot(page, "demo-channel", tmp_path)
        demo.wait_for("stays up", timeout=60)
        assert "1 of 1 issue Done" in "\n".join(demo.printed), demo.printed
        demo.process.send_signal(signal.SIGINT)
        assert demo.process.wait(timeout=30) == 0, demo.printed
        demo.wait_for("Web view stopped", timeout=5)


def test_a_question_answered_in_the_browser_goes_on_in_the_workers_own_session(
    swarm: Swarm, tmp_path: Path
) -> None:
    """The real Claude Code planner asks (AskUserQuestion), its question goes to a person
    (no controller: manual mode), who answers in the web view's inbox; the answer is typed
    into the planner's own session, which goes on with its plan."""
    from tests.e2e.test_oracle import QUESTION, answer_given, plan_posted

    swarm.legion("issue", "create", "Greeter")
    script = swarm_script(["LEG-1"], review_rounds=1, ask=("LEG-1",)).scenarios
    swarm.server.script.scenarios.extend(script)
    env = swarm.env | {"LEGION_AUTHOR": "lead"}
    with served(["web", "--port", "0"], swarm.repo, env) as web:
        with Daemon(swarm, mode="manual"), chromium() as browser:
            swarm.legion("dispatch", "LEG-1", "plan")
            wait_until("blocked", lambda: (swarm.worker("LEG-1") or {}).get("state") == "blocked")
            swarm.legion("reconcile")  # no controller: the question goes to a person
            page = browser.new_context().new_page()
            page.goto(web.link)
            page.click("nav >> text=Inbox")
            question = page.locator('.question[data-issue="LEG-1"]')
            expect(question.locator(".asked")).to_contain_text(QUESTION)
            question.locator("textarea").fill("Hi")
            question.locator("button").click()
            # `legion feedback`'s path: it may wait its turn at the tracker behind the daemon.
            expect(page.locator(".flash")).to_contain_text("LEG-1: answered", timeout=30_000)
            swarm.legion("reconcile")  # relays the answer into the planner's session
            wait_until("the plan posted", lambda: plan_posted(swarm), timeout=90)
        assert answer_given(swarm) == "Hi"
        answered = [
            c for c in swarm.json("issue", "show", "LEG-1")["comments"] if c["body"] == "Hi"
        ]
        assert [c["author"] for c in answered] == ["lead"]
