"""The web view's gate and pages on a real project (embedded tracker, SQLite), through
Starlette's test client: who may read, who may write, and what every response carries. The
same server in a real browser: tests/e2e/test_web_browser.py."""

from __future__ import annotations

import json
import os
import re
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from legion.core.web_access import FAILED_LOGINS_ALLOWED, Role, served_hosts
from legion.tui.sources import Board, Unavailable
from legion.web.app import SECURITY_HEADERS, WebSettings, create_app
from legion.web.gate import COOKIE, Gate
from legion.web.reads import MachineReads
from legion.web.tokens import TokenStore, tokens_path
from tests.support.cli import LegionRunner, git

BASE = "http://127.0.0.1:8787"
HOSTILE = "<script>alert('x')</script> & <b>bold</b>"


@pytest.fixture
def served(project: Path, legion: LegionRunner) -> Iterator[tuple[TestClient, Gate]]:
    """The web view of a project with a hostile title and a question waiting for a person."""
    assert legion("issue", "create", HOSTILE).returncode == 0
    assert legion("issue", "create", "Pick a format").returncode == 0
    asked = legion("escalate", "LEG-2", "--question", "JSON or <YAML>?", "--reason", "open")
    assert asked.returncode == 0, asked.stderr
    env = dict(os.environ)
    gate = Gate(TokenStore(tokens_path(env)), "owner", read_only=False)
    settings = WebSettings(served_hosts("127.0.0.1", 8787), "http", secure_cookie=False)
    app = create_app(MachineReads(env, project), gate, settings)
    with TestClient(app, base_url=BASE, follow_redirects=False) as client:
        yield client, gate


def log_in(client: TestClient, token: str) -> None:
    """The printed link's token by its address; a named token pasted into the login form."""
    response = client.get(f"/login?token={token}")
    if response.status_code == 403:
        response = client.post("/login", data={"token": token}, headers={"origin": BASE})
    assert response.status_code == 303, response.text
    assert response.headers["location"] == "/"


def csrf_of(html: str) -> str:
    found = re.search(r'name="csrf-token" content="([^"]+)"', html)
    assert found
    return found.group(1)


def test_nothing_is_shown_before_a_login_and_the_printed_link_logs_in_once(
    served: tuple[TestClient, Gate],
) -> None:
    client, gate = served
    for path in ("/", "/inbox", "/events/board"):
        assert client.get(path).status_code == 401, path
    link = gate.link_token
    assert link
    response = client.get(f"/login?token={link}")
    assert response.status_code == 303
    cookie = response.headers["set-cookie"]
    assert f"{COOKIE}=" in cookie and "HttpOnly" in cookie and "SameSite=strict" in cookie
    assert "Secure" not in cookie  # plain HTTP on 127.0.0.1
    assert link not in cookie
    page = client.get("/")
    assert page.status_code == 200 and "owner · operator" in page.text
    client.cookies.clear()
    again = client.get(f"/login?token={link}")
    assert again.status_code == 403 and "a used link" in again.text


def test_hostile_text_is_shown_as_text(served: tuple[TestClient, Gate]) -> None:
    client, gate = served
    assert gate.link_token
    log_in(client, gate.link_token)
    board = client.get("/").text
    assert "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &lt;b&gt;bold&lt;/b&gt;" in board
    assert "<script>alert" not in board and "<b>bold" not in board
    inbox = client.get("/inbox").text
    assert "JSON or &lt;YAML&gt;?" in inbox and "<YAML>" not in inbox


def test_every_response_carries_the_security_headers(served: tuple[TestClient, Gate]) -> None:
    client, _ = served
    for response in (
        client.get("/"),
        client.get("/login?token=wrong"),
        client.get("/static/web.js"),
        client.get("/", headers={"host": "evil.example:8787"}),
    ):
        for name, value in SECURITY_HEADERS.items():
            assert response.headers.get(name) == value, (response.url, name)
    csp = SECURITY_HEADERS["content-security-policy"]
    assert "script-src 'self'" in csp and "unsafe-inline" not in csp
    assert "frame-ancestors 'none'" in csp


def test_a_foreign_host_name_is_refused_even_logged_in(served: tuple[TestClient, Gate]) -> None:
    """DNS rebinding: a hostile site's name pointed at 127.0.0.1 reaches the server with its
    own name as Host; nothing is served to it."""
    client, gate = served
    assert gate.link_token
    log_in(client, gate.link_token)
    for host in ("evil.example:8787", "127.0.0.1:9999", "localhost.evil.example:8787", ""):
        for path in ("/", "/inbox", "/static/web.css", "/events/board"):
            response = client.get(path, headers={"host": host})
            assert response.status_code == 421, (host, path)
            assert "LEG-" not in response.text
    assert client.get("/", headers={"host": "localhost:8787"}).status_code == 200


def test_an_operators_answer_is_credited_to_them_and_goes_the_feedback_path(
    served: tuple[TestClient, Gate], legion: LegionRunner
) -> None:
    client, _ = served
    token = TokenStore(tokens_path(os.environ)).mint("ana", Role.OPERATOR)
    log_in(client, token)
    inbox = client.get("/inbox").text
    assert 'action="/inbox/answer"' in inbox
    csrf = csrf_of(inbox)
    form = {"csrf": csrf, "project": "repo", "issue": "LEG-2", "text": "JSON, always"}
    response = client.post("/inbox/answer", data=form, headers={"origin": BASE})
    assert response.status_code == 303, response.text
    assert "LEG-2: answered" in client.get("/inbox").text
    shown = json.loads(legion("issue", "show", "LEG-2", "--json").stdout)
    comments = shown["comments"]
    assert comments[-1]["author"] == "ana" and comments[-1]["body"] == "JSON, always"
    assert "user-feedback-given" in shown["labels"]
    log = json.loads(legion("log", "--json").stdout)
    assert any(e["action"] == "feedback" and e["author"] == "ana" for e in log)


def test_a_write_needs_its_csrf_token_this_servers_origin_and_an_operator(
    served: tuple[TestClient, Gate], legion: LegionRunner
) -> None:
    client, _ = served
    store = TokenStore(tokens_path(os.environ))
    log_in(client, store.mint("ana", Role.OPERATOR))
    csrf = csrf_of(client.get("/inbox").text)
    form = {"csrf": csrf, "project": "repo", "issue": "LEG-2", "text": "yes"}
    refused = [
        ({**form, "csrf": ""}, {"origin": BASE}),  # no token
        ({**form, "csrf": csrf[:-1] + "x"}, {"origin": BASE}),  # another token
        (form, {"origin": "http://evil.example"}),  # another site's page
        (form, {"origin": "null"}),
        (form, {}),  # a write with no Origin: not a browser on our page
    ]
    for data, headers in refused:
        response = client.post("/inbox/answer", data=data, headers=headers)
        assert response.status_code == 403, (data, headers)
    # A viewer sees no form and cannot post one.
    client.cookies.clear()
    log_in(client, store.mint("bo", Role.VIEWER))
    inbox = client.get("/inbox").text
    assert "JSON or &lt;YAML&gt;?" in inbox and 'action="/inbox/answer"' not in inbox
    viewer_form = {**form, "csrf": csrf_of(inbox)}
    response = client.post("/inbox/answer", data=viewer_form, headers={"origin": BASE})
    assert response.status_code == 403 and "viewer" in response.text
    shown = json.loads(legion("issue", "show", "LEG-2", "--json").stdout)
    assert "user-feedback-given" not in shown["labels"]


def test_failed_logins_lock_the_address_out_and_a_revoked_token_ends_its_session(
    served: tuple[TestClient, Gate],
) -> None:
    client, _ = served
    store = TokenStore(tokens_path(os.environ))
    token = store.mint("ana", Role.OPERATOR)
    log_in(client, token)
    assert client.get("/").status_code == 200
    store.revoke("ana")
    assert client.get("/").status_code == 401  # at its next request
    client.cookies.clear()
    good = store.mint("cy", Role.OPERATOR)
    for n in range(FAILED_LOGINS_ALLOWED):
        guess = {"token": f"guess{n:020d}"}
        assert client.post("/login", data=guess, headers={"origin": BASE}).status_code == 403
    locked = client.post("/login", data={"token": good}, headers={"origin": BASE})
    assert locked.status_code == 403 and "too many failed logins" in locked.text


def test_a_token_revoked_and_made_again_under_its_name_opens_no_old_session(
    served: tuple[TestClient, Gate],
) -> None:
    """A leaked token's answer is to revoke it and give its owner a new one: the thief's
    session ends, and the new token's role is the one that counts."""
    client, _ = served
    store = TokenStore(tokens_path(os.environ))
    log_in(client, store.mint("ana", Role.OPERATOR))
    store.revoke("ana")
    fresh = store.mint("ana", Role.VIEWER)
    assert client.get("/inbox").status_code == 401
    client.cookies.clear()
    log_in(client, fresh)
    assert "ana · viewer" in client.get("/").text


def test_a_named_token_is_pasted_never_put_in_an_address(served: tuple[TestClient, Gate]) -> None:
    """In an address it would stay in the browser's history; the one-time link may."""
    client, _ = served
    token = TokenStore(tokens_path(os.environ)).mint("ana", Role.OPERATOR)
    refused = client.get(f"/login?token={token}")
    assert refused.status_code == 403 and "paste it at /login" in refused.text
    form = client.get("/login")
    assert (
        form.status_code == 200 and 'name="token"' in form.text and 'type="password"' in form.text
    )
    other_site = client.post("/login", data={"token": token}, headers={"origin": "http://e.x"})
    assert other_site.status_code == 403
    log_in(client, token)


def test_logins_that_are_no_attempt_count_as_no_failure(served: tuple[TestClient, Gate]) -> None:
    """Another site's images pointing at /login could lock the owner out; odd bytes in a
    token are a refusal, never a server error."""
    client, gate = served
    parts = [("cross-site", "image"), ("cross-site", "empty"), ("same-site", "image")]
    for n in range(FAILED_LOGINS_ALLOWED + 2):
        for site, dest in parts:  # an image, a fetch; another local port's page too
            part = client.get(
                f"/login?token=bad{n:020d}",
                headers={"sec-fetch-site": site, "sec-fetch-dest": dest},
            )
            assert part.status_code == 403
    for odd in ("%C3%A9", "%FF", "a" * 5000, "x%00y"):
        response = client.get(f"/login?token={odd}")
        assert response.status_code == 403, odd
        assert response.headers["content-security-policy"]
    # Four odd tokens and no more: the owner's link still logs in.
    assert gate.link_token
    log_in(client, gate.link_token)


def test_one_token_logging_in_without_end_logs_nobody_else_out() -> None:
    from legion.web.gate import MAX_SESSIONS_PER_TOKEN

    tokens = TokenStore(tokens_path(os.environ))
    gate = Gate(tokens, "owner", read_only=False)
    assert gate.link_token
    owners = gate.login(gate.link_token, "127.0.0.1", link_only=True)
    ana = gate.login(tokens.mint("ana", Role.OPERATOR), "127.0.0.1")
    bo = tokens.mint("bo", Role.VIEWER)
    first = gate.login(bo, "127.0.0.1")
    for _ in range(MAX_SESSIONS_PER_TOKEN * 3):
        gate.login(bo, "127.0.0.1")
    assert gate.session(owners) is not None and gate.session(ana) is not None
    assert gate.session(first) is None  # bo's own oldest went


def test_sessions_expire_and_loopback_addresses_are_one_for_the_lockout() -> None:
    from legion.core.web_access import IDLE_S, MAX_AGE_S
    from legion.web.gate import LoginRefused

    now = [1000.0]
    tokens = TokenStore(tokens_path(os.environ))
    gate = Gate(tokens, "owner", read_only=False, clock=lambda: now[0])
    assert gate.link_token
    cookie = gate.login(gate.link_token, "127.0.0.1", link_only=True)
    now[0] += IDLE_S - 1
    assert gate.session(cookie) is not None
    now[0] += IDLE_S - 1
    assert gate.session(cookie) is not None  # used within the idle time each time
    now[0] += MAX_AGE_S
    assert gate.session(cookie) is None  # older than a session may be
    token = tokens.mint("ana", Role.OPERATOR)
    for n in range(FAILED_LOGINS_ALLOWED):
        with pytest.raises(LoginRefused):
            gate.login(f"wrong{n:020d}", f"127.0.0.{n + 2}")
    with pytest.raises(LoginRefused, match="too many"):
        gate.login(token, "::1")
    assert gate.login(token, "192.0.2.7")  # another address: its own count


def test_a_read_only_server_makes_everyone_a_viewer(project: Path) -> None:
    env = dict(os.environ)
    gate = Gate(TokenStore(tokens_path(env)), "owner", read_only=True)
    settings = WebSettings(served_hosts("127.0.0.1", 8787), "http", secure_cookie=False)
    with TestClient(create_app(MachineReads(env, project), gate, settings), base_url=BASE) as c:
        assert gate.link_token
        page = c.get(f"/login?token={gate.link_token}")
        assert page.status_code == 200 and "owner · viewer" in page.text


def test_web_tokens_are_minted_listed_and_revoked_by_name_and_kept_hashed(
    legion: LegionRunner,
) -> None:
    minted = legion("web", "token", "--name", "ana", "--json")
    assert minted.returncode == 0, minted.stderr
    token = json.loads(minted.stdout)["token"]
    assert json.loads(minted.stdout)["role"] == "operator"
    assert legion("web", "token", "--name", "bo", "--read-only").returncode == 0
    listed = json.loads(legion("web", "tokens", "--json").stdout)
    assert [(t["name"], t["role"]) for t in listed] == [("ana", "operator"), ("bo", "viewer")]
    stored = tokens_path(os.environ)
    assert token not in stored.read_text() and oct(stored.stat().st_mode & 0o777) == "0o600"
    again = legion("web", "token", "--name", "ana")
    assert again.returncode != 0 and "has a token already" in again.stderr
    mine = legion("web", "token", "--name", "Lead", env={"LEGION_AUTHOR": "lead"})
    assert mine.returncode == 2 and "whoever runs `legion web`" in mine.stderr
    bad = legion("web", "token", "--name", "ana smith")
    assert bad.returncode == 2 and "cannot name a token" in bad.stderr
    assert "Traceback" not in bad.stderr
    assert legion("web", "revoke", "ana").returncode == 0
    gone = legion("web", "revoke", "ana")
    assert gone.returncode != 0 and "no web token is named ana" in gone.stderr
    assert [t["name"] for t in json.loads(legion("web", "tokens", "--json").stdout)] == ["bo"]


def test_serving_beyond_this_machine_needs_tls_and_a_taken_port_is_said(
    legion: LegionRunner, tmp_path: Path
) -> None:
    for args, said in (
        (["--host", "0.0.0.0"], "without TLS"),
        (["--tls-cert", str(tmp_path / "c.pem")], "go together"),
        (["--tls-cert", str(tmp_path / "c.pem"), "--tls-key", str(tmp_path / "k.pem")], "no such"),
        (["--port", "70000"], "0 to 65535"),
    ):
        result = legion("web", *args)
        assert result.returncode == 2, (args, result.stdout, result.stderr)
        assert said in result.stderr and len(result.stderr.strip().splitlines()) == 1
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        result = legion("web", "--port", str(port))
        assert result.returncode == 2 and f"port {port} is in use" in result.stderr


def test_an_issue_page_shows_its_timeline_escaped_and_a_bad_name_is_said(
    served: tuple[TestClient, Gate], legion: LegionRunner
) -> None:
    client, gate = served
    assert gate.link_token
    log_in(client, gate.link_token)
    board = client.get("/").text
    assert 'href="/issue/repo/LEG-1"' in board
    said = legion("issue", "comment", "LEG-1", "--body", "<b>look</b> at this")
    assert said.returncode == 0, said.stderr
    assert legion("reconcile").returncode == 0  # its action, with the table's reason
    from legion.bus import actions, open_bus
    from legion.bus.model import AgentRole, Channel

    bus = open_bus(os.environ)
    try:
        channel = Channel("repo", "legion/leg-1")  # the issue's branch, its channel
        plan = bus.register_agent(
            channel, "plan", role=AgentRole.PLAN, runtime="test", session_id="s-p"
        )
        actions.say(bus, plan, channel, "planned <u>it</u>")
    finally:
        bus.close()
    page = client.get("/issue/repo/LEG-1")
    assert page.status_code == 200
    text = page.text
    assert "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;" in text and "<script>alert" not in text
    assert "&lt;b&gt;look&lt;/b&gt; at this" in text and "<b>look" not in text
    assert "@repo/legion/leg-1/plan" in text and "planned &lt;u&gt;it&lt;/u&gt;" in text
    assert 'data-stream="/events/issue?project=repo&amp;issue=LEG-1"' in text
    assert "no session yet" in text and "none yet" in text  # no worker, no pull request
    assert "dispatch planner: deferred" in text
    assert "why: no worker has finished in Todo: the planner starts (row 24)" in text
    assert "given status Todo; labels none; live worker no" in text
    missing = client.get("/issue/repo/LEG-99").text
    assert "LEG-99" in missing and 'class="trouble"' in missing
    other = client.get("/issue/elsewhere/LEG-1").text
    assert "project elsewhere" in other and 'class="trouble"' in other
    # A live view only of a project and an issue that can be: each is read every half second.
    for query in ("project=elsewhere&issue=LEG-1", "project=repo&issue=nonsense", "project=repo"):
        response = client.get(f"/events/issue?{query}", headers={"origin": BASE})
        assert response.status_code == 404, query


def test_a_failure_inside_is_a_500_in_a_line_with_the_headers(project: Path) -> None:
    class Broken(MachineReads):
        def boards(self) -> list[Board | Unavailable]:
            raise RuntimeError("something deep broke: /secret/path")

    env = dict(os.environ)
    gate = Gate(TokenStore(tokens_path(env)), "owner", read_only=False)
    settings = WebSettings(served_hosts("127.0.0.1", 8787), "http", secure_cookie=False)
    app = create_app(Broken(env, project), gate, settings)
    with TestClient(
        app, base_url=BASE, raise_server_exceptions=False, follow_redirects=False
    ) as client:
        assert gate.link_token
        log_in(client, gate.link_token)
        response = client.get("/")
    assert response.status_code == 500
    assert response.text == "the web view failed to answer that request"
    for name, value in SECURITY_HEADERS.items():
        assert response.headers.get(name) == value


def test_the_log_shows_each_projects_actions_and_filters_by_issue(
    served: tuple[TestClient, Gate],
) -> None:
    client, _ = served
    token = TokenStore(tokens_path(os.environ)).mint("ana", Role.OPERATOR)
    log_in(client, token)
    csrf = csrf_of(client.get("/inbox").text)
    form = {"csrf": csrf, "project": "repo", "issue": "LEG-2", "text": "<i>JSON</i>"}
    assert client.post("/inbox/answer", data=form, headers={"origin": BASE}).status_code == 303
    log = client.get("/log").text
    assert "answered by ana" in log and 'data-stream="/events/log?issue="' in log
    only = client.get("/log?issue=leg-1").text  # any case: one issue, one view
    assert "Log of LEG-1" in only and "answered by ana" not in only
    assert 'data-stream="/events/log?issue=LEG-1"' in only
    assert client.get("/log?issue=nonsense").status_code == 400
    stream = client.get("/events/log?issue=nonsense", headers={"origin": BASE})
    assert stream.status_code == 404


def test_spend_draws_the_ledger_by_day_issue_and_model_with_its_budgets(
    served: tuple[TestClient, Gate], project: Path, legion: LegionRunner
) -> None:
    from legion.backends import open_backends
    from legion.config import load_project
    from legion.proxy.ledger import Spender, UsageLedger
    from legion.proxy.metering import Metered

    assert legion("config", "set", "daily_token_budget", "5000").returncode == 0
    assert legion("config", "set", "token_budget", "3000").returncode == 0
    db = open_backends(load_project(project)).db
    ledger = UsageLedger(db)
    ledger.record(Spender("s1", "LEG-1", "implement", "claude-code"), Metered("m<b>x", 1000, 500))
    ledger.record(Spender("s2", "LEG-2", "plan", "codex"), Metered("gpt", 3000, 200))
    client, gate = served
    assert gate.link_token
    log_in(client, gate.link_token)
    page = client.get("/spend").text
    assert "4,700 tokens" in page  # everything counted once
    assert "m&lt;b&gt;x" in page and "<b>x" not in page  # a model's name is the API's text
    assert "<svg" in page and 'stroke-dasharray="4 3"' in page  # the day's budget line
    assert 'progress value="4700" max="5000"' in page  # today, of the day's budget
    assert '<tr class="over"><td><a href="/issue/repo/LEG-2">' in page  # 3,200 of 3,000
    assert 'progress value="1500" max="3000"' in page


def test_hosts_are_shown_and_an_operator_drains_one_in_the_log_by_name(
    served: tuple[TestClient, Gate], project: Path, legion: LegionRunner
) -> None:
    from legion.backends import open_backends
    from legion.config import load_project
    from legion.fleet.hosts import Fleet

    Fleet(open_backends(load_project(project)).db).join("build-1", 4, 60.0)
    client, _ = served
    store = TokenStore(tokens_path(os.environ))
    log_in(client, store.mint("ana", Role.OPERATOR))
    page = client.get("/hosts").text
    assert 'data-host="build-1"' in page and "0/4" in page
    form = {"csrf": csrf_of(page), "project": "repo", "host": "build-1", "undo": "0"}
    assert client.post("/hosts/drain", data=form, headers={"origin": BASE}).status_code == 303
    assert "build-1: draining" in client.get("/hosts").text
    hosts = json.loads(legion("hosts", "--json").stdout)
    assert hosts[0]["draining"] is True
    log = json.loads(legion("log", "--json").stdout)
    assert any(e["detail"] == "build-1 draining" and e["author"] == "ana" for e in log)
    client.cookies.clear()
    log_in(client, store.mint("bo", Role.VIEWER))
    viewer = client.get("/hosts").text
    assert 'action="/hosts/drain"' not in viewer
    refused = client.post(
        "/hosts/drain", data={**form, "csrf": csrf_of(viewer)}, headers={"origin": BASE}
    )
    assert refused.status_code == 403


def test_a_question_on_the_bus_is_answered_from_the_inbox_credited_to_the_person(
    served: tuple[TestClient, Gate],
) -> None:
    """One inbox: the bus's `@human` questions beside the trackers'; the answer goes the way
    `legion reply` goes, to every asker down the chain."""
    from legion.bus import actions, open_bus
    from legion.bus.model import AgentRole, Channel

    client, _ = served
    log_in(client, TokenStore(tokens_path(os.environ)).mint("ana", Role.OPERATOR))
    client.get("/")  # the board names the project on the bus
    bus = open_bus(os.environ)
    try:
        main, leg7 = Channel("repo", "main"), Channel("repo", "legion/LEG-7")
        legion = bus.register_agent(
            main, "legion", role=AgentRole.CONTROLLER, runtime="test", session_id="s-l"
        )
        implement = bus.register_agent(
            leg7, "implement", role=AgentRole.IMPLEMENT, runtime="test", session_id="s-i"
        )
        asked = actions.ask(bus, implement, "Which <date> format?").message
        passed = actions.ask(bus, legion, "Which format, human?", about=asked.id).message
    finally:
        bus.close()
    inbox = client.get("/inbox").text
    assert f'data-message="{passed.id}"' in inbox and "Which format, human?" in inbox
    form = {"csrf": csrf_of(inbox), "question": passed.id, "text": "ISO 8601"}
    for _ in range(2):  # the same answer sent twice posts once
        sent = client.post("/inbox/reply", data=form, headers={"origin": BASE})
        assert sent.status_code == 303
    shown = client.get("/inbox").text  # every asker down the chain
    assert "answered @repo/main/legion, @repo/legion/LEG-7/implement" in shown
    bus = open_bus(os.environ)
    try:
        replies = bus.replies(passed.id)
        assert [(m.body, m.sender) for m in replies] == [("ISO 8601", "human")]
        assert actions.human_inbox(bus) == []
    finally:
        bus.close()
    log = client.get("/log").text
    assert "answered by ana" in log


def test_channels_are_read_and_an_operator_posts_archives_and_kills_in_them(
    served: tuple[TestClient, Gate], legion: LegionRunner
) -> None:
    from legion.bus import actions, open_bus
    from legion.bus.model import AgentRole, AgentStatus, Channel

    client, _ = served
    store = TokenStore(tokens_path(os.environ))
    log_in(client, store.mint("ana", Role.OPERATOR))
    client.get("/")  # the board names the project on the bus
    leg7 = Channel("repo", "legion/LEG-7")
    bus = open_bus(os.environ)
    try:
        implement = bus.register_agent(
            leg7, "implement", role=AgentRole.IMPLEMENT, runtime="test", session_id="s-i"
        )
        review = bus.register_agent(
            leg7, "review", role=AgentRole.REVIEW, runtime="test", session_id="s-r"
        )
        actions.say(bus, implement, leg7, "done <script>alert(1)</script>")
    finally:
        bus.close()
    listed = client.get("/channels").text
    assert 'href="/channels?c=repo/legion/LEG-7"' in listed
    page = client.get("/channels?c=repo/legion/LEG-7").text
    assert "done &lt;script&gt;alert(1)&lt;/script&gt;" in page and "<script>alert" not in page
    assert 'data-agent="repo/legion/LEG-7/implement"' in page
    csrf = csrf_of(page)
    said = {"csrf": csrf, "c": "repo/legion/LEG-7", "text": "@review look at it"}
    assert client.post("/channels/say", data=said, headers={"origin": BASE}).status_code == 303
    client.post("/channels/say", data=said, headers={"origin": BASE})  # a double click
    assert "posted already" in client.get("/channels").text
    for made_up in ("x/0", "repo/nowhere"):  # a live view only of a channel there is
        stream = client.get(f"/events/channels?c={made_up}", headers={"origin": BASE})
        assert stream.status_code == 404
    huge = {"csrf": csrf, "agent": "9" * 25, "do": "archive", "c": "repo/legion/LEG-7"}
    assert client.post("/channels/agent", data=huge, headers={"origin": BASE}).status_code == 303
    assert "not done: no agent named" in client.get("/channels").text
    nowhere = {**said, "c": "repo/nowhere"}
    client.post("/channels/say", data=nowhere, headers={"origin": BASE})
    assert "not done: no channel repo/nowhere" in client.get("/channels").text
    archive = {"csrf": csrf, "agent": str(review.id), "do": "archive", "c": "repo/legion/LEG-7"}
    assert client.post("/channels/agent", data=archive, headers={"origin": BASE}).status_code == 303
    kill = {**archive, "agent": str(implement.id), "do": "kill"}
    assert client.post("/channels/agent", data=kill, headers={"origin": BASE}).status_code == 303
    assert "is busy (in the middle of a turn)" in client.get("/channels").text  # as the CLI
    kill["do"] = "force-kill"
    assert client.post("/channels/agent", data=kill, headers={"origin": BASE}).status_code == 303
    # Killing it again does nothing, and the log does not say it did.
    assert client.post("/channels/agent", data=kill, headers={"origin": BASE}).status_code == 303
    bus = open_bus(os.environ)
    try:
        posted = bus.messages(channel=leg7)[-1]
        assert (posted.body, posted.sender, posted.mentions) == (
            "@review look at it",
            "human",
            ("repo/legion/LEG-7/review",),
        )
        assert bus.agent(review.id).status is AgentStatus.ARCHIVED
        assert bus.agent(implement.id).status is AgentStatus.FAILED
    finally:
        bus.close()
    log = json.loads(legion("log", "--json").stdout)
    details = {f"{e['detail']} by {e['author']}" for e in log}
    assert {"in repo/legion/LEG-7 by ana", "@repo/legion/LEG-7/review by ana"} <= details
    assert [e["detail"] for e in log].count("@repo/legion/LEG-7/implement") == 1
    client.cookies.clear()
    log_in(client, store.mint("bo", Role.VIEWER))
    viewer = client.get("/channels?c=repo/legion/LEG-7").text
    assert 'action="/channels/say"' not in viewer and 'action="/channels/agent"' not in viewer
    refused = client.post(
        "/channels/say", data={**said, "csrf": csrf_of(viewer)}, headers={"origin": BASE}
    )
    assert refused.status_code == 403


def test_a_card_says_what_a_person_needs_and_never_looks_ready_when_review_said_no(
    served: tuple[TestClient, Gate], project: Path, legion: LegionRunner
) -> None:
    from legion.backends import open_backends
    from legion.config import load_project
    from legion.proxy.ledger import Spender, UsageLedger
    from legion.proxy.metering import Metered

    assert legion("issue", "create", "After the first", "--blocked-by", "LEG-1").returncode == 0
    backends = open_backends(load_project(project))
    git(project, "branch", "legion/leg-1")
    backends.forge.create_pr("LEG-1", "legion/leg-1")
    backends.forge.add_review("LEG-1", "changes_requested", body="no", author="rev")
    assert legion("issue", "move", "LEG-1", "Needs Review").returncode == 0
    UsageLedger(backends.db).record(Spender("s", "LEG-1", "implement", "x"), Metered("m", 1200, 34))
    client, gate = served
    assert gate.link_token
    log_in(client, gate.link_token)
    board = client.get("/").text

    def card(issue: str) -> str:
        start = board.index(f'data-issue="{issue}"')
        return board[board.rindex("<article", 0, start) : board.index("</article>", start)]

    first = card("LEG-1")
    assert 'class="card bad"' in first and "changes requested" in first
    assert "1,234 tokens" in first
    asking = card("LEG-2")
    assert 'class="card wait"' in asking and "a person&#39;s answer (the inbox)" in asking
    blocked = card("LEG-3")
    assert "waits for: blocked by LEG-1" in blocked


def test_an_issue_on_a_service_is_asked_of_it_at_most_every_slow_period(
    project: Path, legion: LegionRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An open issue page must not spend the rate limit the swarm needs: where the tracker
    is Linear's or GitHub's, its part is read again only after `SLOW_S`."""
    import legion.services.issue_view as issue_view
    import legion.tui.sources as sources

    assert legion("issue", "create", "On a service").returncode == 0
    asked: list[str] = []
    real = issue_view.read_issue

    def counted(*args: object) -> object:
        asked.append(str(args[2]))
        return real(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(issue_view, "read_issue", counted)
    monkeypatch.setattr(sources, "announced", lambda project: False)
    reads = MachineReads(dict(os.environ), project)
    pages = [reads.issue("repo", "LEG-1") for _ in range(5)]
    assert all(not isinstance(page, Unavailable) for page in pages), pages
    assert asked == ["LEG-1"]
    missing = [reads.issue("repo", "LEG-9") for _ in range(3)]
    assert all(isinstance(page, Unavailable) for page in missing)
    assert asked == ["LEG-1", "LEG-9"]  # a missing issue is not asked again at once either


def test_on_a_postgresql_store_a_write_from_anywhere_moves_the_views_stamps_at_once(
    git_repo: Path, postgres_url: str
) -> None:
    """A fleet's project (the embedded tracker on PostgreSQL): no file here shows its changes,
    but each write NOTIFYs as it commits, so the board, the inbox and the log are read again
    within a second of a change made by any host or command (here, another process), and not
    at all while nothing changes."""
    import time

    from tests.support.cli import run_legion
    from tests.support.waits import wait_until

    env = dict(os.environ) | {"LEGION_STORE": postgres_url}
    assert run_legion("init", cwd=git_repo, env=env).returncode == 0
    reads = MachineReads(env, git_repo)
    reads.boards(), reads.inbox(), reads.logs(None)
    stamp = wait_until("listening", reads.board_stamp)  # None until it listens
    before = (reads.inbox_stamp(), reads.log_stamp())
    assert None not in before
    time.sleep(0.3)
    assert reads.board_stamp() == stamp  # nothing written: nothing to read again
    made = run_legion("issue", "create", "From another host", cwd=git_repo, env=env)
    assert made.returncode == 0, made.stderr
    # Waited on, not timed (a loaded machine is slower): bench/web.py measures the push.
    wait_until("the change is announced", lambda: reads.board_stamp() != stamp, timeout=30)
    assert reads.inbox_stamp() != before[0] and reads.log_stamp() != before[1]
    [board] = reads.boards()
    assert isinstance(board, Board) and [i.identifier for i in board.issues] == ["LEG-1"]
    # The fleet's bus is there too: a post moves the channels' stamp as it commits.
    bus = wait_until("the bus listened to", reads.bus_stamp)
    said = run_legion("say", "hello from another host", cwd=git_repo, env=env)
    assert said.returncode == 0, said.stderr
    wait_until("the post is announced", lambda: reads.bus_stamp() != bus, timeout=30)


def test_stopping_the_server_ends_its_open_pages_streams_rather_than_cancelling_them(
    project: Path, caplog: pytest.LogCaptureFixture
) -> None:
    import threading

    import httpx

    from legion.web.serve import ServeOptions, WebServer

    server = WebServer(ServeOptions(port=0), dict(os.environ), project)
    base = server.link.split("/login")[0]
    got: list[str] = []
    ended = threading.Event()

    def page() -> None:
        with httpx.Client(base_url=base, timeout=30) as client:
            client.get(server.link.removeprefix(base))
            with client.stream("GET", "/events/board") as stream:
                for line in stream.iter_lines():
                    got.append(line)
        ended.set()

    with caplog.at_level("INFO", logger="uvicorn.error"), server.running():
        reader = threading.Thread(target=page)
        reader.start()
        for _ in range(300):  # the stream's first push, the board as it is
            if any(line.startswith("event: board") for line in got):
                break
            ended.wait(0.1)
        assert any(line.startswith("event: board") for line in got), got
    # The stream ended as the server stopped, and nothing was cancelled past a timeout.
    reader.join(timeout=30)
    assert ended.is_set()
    assert not [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
