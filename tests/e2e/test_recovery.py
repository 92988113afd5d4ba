"""Every recovery path the daemon claims (docs/architecture.md, "The daemon and its failure
model"), end to end: the real Claude Code CLI on the scripted model, a private tmux server, real
git, and `legion start --foreground` with short ticks, stale and cooldown times.

What runs is read from the world: tmux windows, the processes running each Claude session
(`/proc`), transcripts, the tracker and the action log. Two processes never run one session at
the same time (`SessionWatch`), in any of these tests.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import shlex
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from legion.demo.swarm_script import controller_scenarios
from legion.files.locking import exclusive
from tests.fakes.model_server import Scenario, bash, pause, text
from tests.support.cli import LEGION_BIN, Result, git
from tests.support.processes import SessionWatch, cmdline
from tests.support.swarm import (
    Daemon,
    Swarm,
    actions,
    issue_status,
    live_pid,
    runs_until,
    session_uuid,
    state_dir,
    wake,
    windows,
)
from tests.support.tmux import TmuxShim
from tests.support.waits import wait_until

pytestmark = [pytest.mark.e2e]

# The prompt Legion resumes a stopped worker's session with.
RESUMED = "previous session stopped"
REDISPATCH = "remove_worker_active_and_redispatch"


def busy(seconds: int) -> str:
    """A command that runs `seconds` (the CLI refuses a plain long `sleep`)."""
    return f'python3 -c "import time; time.sleep({seconds})"'


def park(issue: str) -> str:
    """What a resumed worker does here: take the issue out of the flow, so the test ends still
    (it asks a human: a worker moves no issue, `legion.core.roles`)."""
    return f"legion issue label {issue} --add user-input-needed --remove worker-active"


def parked(swarm: Swarm, issue: str) -> bool:
    found = labels(swarm, issue)
    return "user-input-needed" in found and "worker-active" not in found


def controller(swarm: Swarm) -> None:
    """An auto-mode controller that has nothing to judge."""
    swarm.server.script.scenarios.extend(controller_scenarios("auto"))


def resumed_scenario(swarm: Swarm, issue: str, command: str, name: str = "resumed") -> None:
    """What `issue`'s worker does when Legion resumes it after it stopped; first in the script,
    since that prompt also names the mode and the issue."""
    scenario = Scenario(
        rf"mode for {issue}\b[\s\S]*{RESUMED}",
        [[bash(command, "Carry on")], [text("Carried on.")]],
        name=name,
        regex=True,
    )
    swarm.server.script.scenarios.insert(0, scenario)


def legion_with(swarm: Swarm, env: dict[str, str], *args: str) -> Result:
    proc = subprocess.run(
        [str(LEGION_BIN), *args],
        cwd=swarm.repo,
        env=swarm.env | env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return Result(proc.returncode, proc.stdout, proc.stderr)


def labels(swarm: Swarm, issue: str) -> set[str]:
    return set(swarm.json("issue", "show", issue)["labels"])


def legion_comments(swarm: Swarm, issue: str) -> list[str]:
    comments = swarm.json("issue", "show", issue)["comments"]
    return [c["body"] for c in comments if c["author"] == "legion"]


def screen_hash(swarm: Swarm, window: str) -> str:
    screen = swarm.tmux("capture-pane", "-p", "-J", "-t", window, "-S", "-60")
    return hashlib.sha256(screen.encode()).hexdigest()


def transcripts_of(swarm: Swarm, sid: str) -> list[Path]:
    return swarm.transcripts(sid)


def no_overlap(watch: SessionWatch) -> None:
    assert watch.overlaps == [], f"two processes ran one session at once: {watch.overlaps[:3]}"


# -- 1. a stuck worker ---------------------------------------------------------------------------


def test_a_stuck_worker_is_killed_only_when_both_signals_agree_then_resumed(swarm: Swarm) -> None:
    stale_after = 3.0
    swarm.legion("issue", "create", "Stuck", "--status", "In Progress")
    controller(swarm)
    release = swarm.workspace_root / "leg-1" / ".release"  # the long command's end
    swarm.server.add_scenario(
        "implement mode for LEG-1",
        [
            [bash(runs_until(release), "Run the slow tests")],
            [text("Tests pass; now thinking it over.")],
        ],
        name="first",
    )
    resumed_scenario(swarm, "LEG-1", park("LEG-1"))
    sid = session_uuid(swarm, "LEG-1:implement")
    env = {"LEGION_STALE_AFTER": f"{stale_after:g}"}
    with SessionWatch({sid}) as watch, Daemon(swarm, tick=1.0, extra_env=env):
        pid = wait_until("the worker runs", lambda: live_pid(swarm, "leg-1-implement"))
        worker = swarm.worker("LEG-1")
        assert worker is not None
        transcript = Path(worker["transcript"])
        swarm.server.wait_for_turn("first", 0)

        # Only the transcript is stale: a long command runs, its timer moves on screen. It
        # runs until the transcript has been quiet for two ticks past stale_after, however
        # late a loaded machine wrote the command's start there.
        quiet_for = 0.0
        deadline = time.monotonic() + 60
        while quiet_for <= stale_after + 2:
            assert time.monotonic() < deadline, "the transcript was never stale for two ticks"
            assert not actions(swarm, "kill_stuck_worker")
            if transcript.exists():
                quiet_for = time.time() - transcript.stat().st_mtime
            time.sleep(0.2)
        assert not swarm.server.requests_for_scenario("first")[1:], "the command ended early"
        release.touch()
        wait_until("the command's end", lambda: swarm.server.requests_for_scenario("first")[1:])
        assert live_pid(swarm, "leg-1-implement") == pid
        assert actions(swarm, "kill_stuck_worker") == []

        # Only the screen is unchanged: the worker idles, its transcript is written to.
        wait_until("idle", lambda: swarm.worker("LEG-1")["state"] == "idle")  # type: ignore[index]
        assert "worker-active" in labels(swarm, "LEG-1")  # it ended its turn without finishing
        # The screen settles once the CLI has drawn the turn's end (later on a loaded
        # machine): kept fresh the transcript, until the screen stood still for two ticks
        # past stale_after.
        last_hash, still_since = screen_hash(swarm, "leg-1-implement"), time.monotonic()
        deadline = time.monotonic() + 30
        while time.monotonic() - still_since < stale_after + 2:
            assert time.monotonic() < deadline, "the idle screen kept changing"
            os.utime(transcript)
            touched = time.monotonic()  # the transcript is quiet from here
            seen = screen_hash(swarm, "leg-1-implement")
            if seen != last_hash:
                last_hash, still_since = seen, time.monotonic()
            assert not actions(swarm, "kill_stuck_worker")
            time.sleep(0.3)
        assert live_pid(swarm, "leg-1-implement") == pid
        assert actions(swarm, "kill_stuck_worker") == []

        # Both: killed, and resumed in its own session; not before the transcript was quiet
        # for stale_after (counted from its last touch, not from the loop's last sleep).
        wait_until("killed", lambda: actions(swarm, "kill_stuck_worker"), timeout=60)
        assert time.monotonic() - touched >= stale_after - 0.5
        wait_until("resumed and parked", lambda: parked(swarm, "LEG-1"))
    no_overlap(watch)
    assert len(actions(swarm, "kill_stuck_worker")) == 1
    assert [e["outcome"] for e in actions(swarm, REDISPATCH)] == ["done"]
    # The resumed session is the same one: the model was sent the first session's history.
    (request,) = swarm.server.requests_for_scenario("resumed")[:1]
    assert "Tests pass; now thinking it over." in json.dumps(request.messages)
    assert transcripts_of(swarm, sid) == [transcript]
    assert len(watch.seen[sid]) == 2  # the stuck process, then the resumed one


def test_a_thinking_worker_is_not_killed_when_ticks_come_close_together(swarm: Swarm) -> None:
    """A worker thinking for long (its transcript quiet, its spinner turning) is not taken for
    stuck, however its screen is looked at: in bursts of ticks a moment apart, or after a gap
    longer than `stale_after` without any look (the daemon ticks only when something happens),
    when the look may catch the spinner in the frame the last look saw. Each of several gaps
    gives that chance: a look after a gap that shows the last frame again is confirmed by
    looks in quick succession, which see the spinner move."""
    swarm.legion("issue", "create", "Deep thought", "--status", "In Progress")
    controller(swarm)
    # The model takes its time: the spinner turns, the transcript is quiet.
    swarm.server.add_scenario(
        "implement mode for LEG-1", [[pause(45), text("Thought it through.")]], name="think"
    )
    state = state_dir(swarm)
    stale_after = 4.0
    with Daemon(swarm, tick=60, extra_env={"LEGION_STALE_AFTER": f"{stale_after:g}"}):
        swarm.server.wait_for_turn("think", 0)
        pid = wait_until("the worker runs", lambda: live_pid(swarm, "leg-1-implement"))
        transcript = Path(swarm.worker("LEG-1")["transcript"])  # type: ignore[index]
        wait_until(
            "the transcript quiet for longer than stale_after",
            lambda: time.time() - transcript.stat().st_mtime > stale_after + 0.5,
            interval=0.05,
        )
        for _ in range(5):
            for _ in range(3):  # ticks in quick succession, as a burst of `legion` writes makes
                wake(swarm, state)
                time.sleep(0.15)
            time.sleep(stale_after + 0.5)  # then no look for longer than stale_after
            assert actions(swarm, "kill_stuck_worker") == []
        assert swarm.server.requests_for_scenario("think")[1:] == []  # still its first turn
        assert live_pid(swarm, "leg-1-implement") == pid


# -- 2. a stale controller -----------------------------------------------------------------------


def test_a_stale_controller_is_restarted_in_its_session_no_sooner_than_the_cooldown(
    swarm: Swarm,
) -> None:
    # The cooldown leaves the transcript quiet for some seconds past `stale_after` even when a
    # loaded machine takes 5 s to start the CLI again (which writes the transcript; with a 7 s
    # cooldown, a start of over 4 s once left it quiet for only 2.3 s).
    stale_after, cooldown = 2.0, 9.0
    # Every controller turn hangs in a command: mid-turn, transcript quiet.
    swarm.server.add_scenario(
        r"<command-name>/legion-controller</command-name>",
        [[bash(busy(40), "Wait for something that never comes")]],
        name="controller",
        regex=True,
    )
    sid = session_uuid(swarm, "controller")
    env = {
        "LEGION_STALE_AFTER": f"{stale_after:g}",
        "LEGION_RESTART_COOLDOWN": f"{cooldown:g}",
    }
    longest_quiet = 0.0
    with SessionWatch({sid}, interval=0.05) as watch, Daemon(swarm, tick=0.5, extra_env=env):
        started = time.monotonic()
        # Until the start and two restarts were seen (2.6 cooldowns apart at the least; a
        # loaded machine makes each restart slower, never sooner), or 12 cooldowns passed.
        while time.monotonic() - started < 2.6 * cooldown or (
            len(watch.seen.get(sid, set())) < 3 and time.monotonic() - started < 12 * cooldown
        ):
            (transcript,) = transcripts_of(swarm, sid) or [None]
            if transcript is not None:
                longest_quiet = max(longest_quiet, time.time() - transcript.stat().st_mtime)
            time.sleep(0.1)
        # Not a single sample: it may fall just between closing one controller and the next.
        pid = wait_until("the controller runs", lambda: live_pid(swarm, "main"))
    no_overlap(watch)
    starts = sorted(watch.started[p] for p in watch.seen.get(sid, set()))
    assert len(starts) >= 3, f"expected the start and two restarts, saw {len(starts)}"
    gaps = [b - a for a, b in itertools.pairwise(starts)]
    # The cooldown runs from one restart's end to the next restart's decision; the CLI process
    # appears a moment after each (its launcher starts first), so allow for that jitter. Without
    # the cooldown the gaps would be stale_after + a tick, about 2.5 s.
    assert min(gaps) >= cooldown - 0.5, f"restarted sooner than the cooldown: {gaps}"
    # Stale for longer than a tick without a restart: the cooldown held it back.
    restarts = actions(swarm, "restart_controller")
    assert longest_quiet >= stale_after + 1.0, [(e["created_at"], e["detail"]) for e in restarts]
    assert len(restarts) == len(starts)
    assert all("stale" in e["detail"] for e in restarts[1:])
    assert len(transcripts_of(swarm, sid)) == 1
    assert pid is not None and "--resume" in cmdline(pid) and sid in cmdline(pid)


# A claude whose controller never gets to its first turn (a first-run screen, say): it runs, and
# writes no transcript. Each start is noted, with its time, in the file `starts` of its own
# home (where the confined controller may write).
SILENT_CLAUDE = """#!{python}
import os, sys, time
if os.environ.get("LEGION_MODE") != "controller" or "--version" in sys.argv:
    os.execv({real!r}, [{real!r}, *sys.argv[1:]])
with open(os.path.join(os.environ["CLAUDE_CONFIG_DIR"], "starts"), "a") as out:
    out.write(f"{{time.time()}}\\n")
print("Welcome to Claude Code! Choose a theme:")
while True:
    time.sleep(1)
"""


def test_a_controller_stuck_before_its_first_transcript_line_is_restarted_within_the_cooldown(
    swarm: Swarm, tmp_path: Path
) -> None:
    stale_after, cooldown = 2.0, 5.0
    wrapper = tmp_path / "bin" / "claude"
    wrapper.parent.mkdir()
    real = swarm.env["LEGION_CLAUDE_BIN"]
    text = SILENT_CLAUDE.format(python=sys.executable, real=real)
    wrapper.write_text(text)
    wrapper.chmod(0o755)
    env = {
        "LEGION_CLAUDE_BIN": str(wrapper),
        "LEGION_STALE_AFTER": f"{stale_after:g}",
        "LEGION_RESTART_COOLDOWN": f"{cooldown:g}",
    }

    def started() -> list[float]:
        state = Path(swarm.env["XDG_STATE_HOME"])
        found = list(state.glob("legion/*/cli/claude-code/sessions/*/starts"))
        return [float(line) for line in found[0].read_text().split()] if found else []

    with Daemon(swarm, tick=0.5, extra_env=env):
        wait_until("the controller started three times", lambda: len(started()) >= 3, timeout=40)
    times = started()
    gaps = [b - a for a, b in itertools.pairwise(times)]
    # Never sooner than the cooldown (it is longer than stale_after here), nor much later.
    assert min(gaps) >= cooldown - 0.5, f"restarted sooner than the cooldown: {gaps}"
    restarts = actions(swarm, "restart_controller")
    assert len(restarts) >= 3
    assert all("no transcript" in e["detail"] for e in restarts[1:]), restarts
    assert transcripts_of(swarm, session_uuid(swarm, "controller")) == []


# -- 3. a worker that keeps dying ------------------------------------------------------------------

# The worker's command kills its own CLI (every ancestor started on a session), as a crash would.
CRASH = """python3 -c "
import os, signal
pid, crash = os.getpid(), []
while pid > 1:
    pid = int(open(f'/proc/{pid}/stat').read().rpartition(')')[2].split()[1])
    args = open(f'/proc/{pid}/cmdline', 'rb').read().split(bytes(1))
    if b'--session-id' in args or b'--resume' in args:
        crash.append(pid)
for pid in crash:
    os.kill(pid, signal.SIGKILL)
"
"""


def crashing_worker(swarm: Swarm) -> str:
    """LEG-1 In Progress, with a worker that crashes each time it starts; its session id."""
    swarm.legion("issue", "create", "Crashy", "--status", "In Progress")
    controller(swarm)
    swarm.server.add_scenario("implement mode for LEG-1", [[bash(CRASH, "Work")]], name="work")
    return session_uuid(swarm, "LEG-1:implement")


def asked(swarm: Swarm) -> list[str]:
    return [body for body in legion_comments(swarm, "LEG-1") if "keeps" in body]


def test_a_worker_that_keeps_dying_is_handed_to_a_human_exactly_once(swarm: Swarm) -> None:
    sid = crashing_worker(swarm)
    with SessionWatch({sid}) as watch, Daemon(swarm, tick=0.5) as daemon:
        wait_until("a human is asked", lambda: "user-input-needed" in labels(swarm, "LEG-1"))
        daemon.ticks(4)
        assert live_pid(swarm, "leg-1-implement") is None
    no_overlap(watch)
    assert len(swarm.server.requests_for_scenario("work")) == 4  # crashed four times
    assert len(watch.seen[sid]) == 4  # the first start and three restarts, not one more
    restarts = [e for e in actions(swarm, REDISPATCH) if "human" not in e["detail"]]
    assert len(restarts) == 3
    assert len(asked(swarm)) == 1, legion_comments(swarm, "LEG-1")
    assert "legion peek LEG-1" in asked(swarm)[0]


def test_after_the_human_clears_the_flag_the_worker_is_started_again(swarm: Swarm) -> None:
    sid = crashing_worker(swarm)
    with SessionWatch({sid}) as watch, Daemon(swarm, tick=0.5):
        wait_until("a human is asked", lambda: "user-input-needed" in labels(swarm, "LEG-1"))
        # The human fixes the cause, then clears the flag, as the comment asks.
        swarm.server.script.scenarios.insert(
            0, Scenario("implement mode for LEG-1", [[bash(park("LEG-1"))], [text("Parked.")]])
        )
        swarm.legion("issue", "label", "LEG-1", "--remove", "user-input-needed")
        wait_until(
            "started again, or asked again",
            lambda: parked(swarm, "LEG-1") or len(asked(swarm)) > 1,
        )
    no_overlap(watch)
    assert len(asked(swarm)) == 1, "asked the human again instead of starting the worker"
    assert len(watch.seen[sid]) == 5


# -- 4. a worker that cannot start ---------------------------------------------------------------

FAILING_CLAUDE = """#!{python}
import os, sys
if os.environ.get("LEGION_MODE") == "controller" or "--version" in sys.argv:
    os.execv({real!r}, [{real!r}, *sys.argv[1:]])
sys.stderr.write("claude: fatal: this CLI cannot start (the test broke it)\\n")
sys.exit(3)
"""


def failing_claude(swarm: Swarm, tmp_path: Path) -> dict[str, str]:
    """A claude that runs the controller but exits at once for every worker."""
    wrapper = tmp_path / "bin" / "claude"
    wrapper.parent.mkdir()
    real = swarm.env["LEGION_CLAUDE_BIN"]
    wrapper.write_text(FAILING_CLAUDE.format(python=sys.executable, real=real))
    wrapper.chmod(0o755)
    return {"LEGION_CLAUDE_BIN": str(wrapper)}


def test_a_worker_that_cannot_start_is_reported_and_not_retried_in_a_loop(
    swarm: Swarm, tmp_path: Path
) -> None:
    swarm.legion("issue", "create", "Doomed", "--status", "In Progress")
    controller(swarm)
    env = failing_claude(swarm, tmp_path)
    message = "claude: fatal: this CLI cannot start"

    # By hand (under a daemon that only hosts): `legion dispatch` says why at once, and
    # leaves nothing behind.
    with Daemon(swarm, mode="manual"):
        started = time.monotonic()
        result = legion_with(swarm, env, "dispatch", "LEG-1", "implement")
        assert time.monotonic() - started < 25  # not the start's 30 s wait, however loaded
    assert result.returncode != 0 and message in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert "worker-active" not in labels(swarm, "LEG-1")
    assert all(w["state"] == "dead" for w in swarm.json("workers"))

    # The daemon: reported, a few attempts at most, then a human is told; no loop.
    with Daemon(swarm, tick=0.5, extra_env=env) as daemon:
        wait_until(
            "the failure reported",
            lambda: [e for e in actions(swarm) if message in e["detail"]],
        )
        daemon.ticks(10)
        attempts = len([e for e in actions(swarm) if message in e["detail"]])
        daemon.ticks(4)
        assert len([e for e in actions(swarm) if message in e["detail"]]) == attempts
    assert attempts <= 4, [e for e in actions(swarm) if message in e["detail"]]
    status = json.dumps(swarm.json("status"))
    told = "user-input-needed" in labels(swarm, "LEG-1") or message in status
    assert told, "nobody was told that workers cannot start"
    assert issue_status(swarm, "LEG-1") == "In Progress"


# -- 5. an orphaned worker-active label ------------------------------------------------------------


def test_an_orphaned_worker_active_label_is_recovered(swarm: Swarm) -> None:
    swarm.legion("issue", "create", "Orphan", "--status", "In Progress", "--label", "worker-active")
    controller(swarm)
    resumed_scenario(swarm, "LEG-1", park("LEG-1"))
    sid = session_uuid(swarm, "LEG-1:implement")
    assert swarm.json("workers") == []
    with SessionWatch({sid}) as watch, Daemon(swarm, tick=0.5):
        # `park` moves the issue, then takes the label off: two commands, both waited for.
        wait_until(
            "recovered",
            lambda: parked(swarm, "LEG-1") and "worker-active" not in labels(swarm, "LEG-1"),
        )
    no_overlap(watch)
    assert [e["outcome"] for e in actions(swarm, REDISPATCH)] == ["done"]
    assert len(watch.seen[sid]) == 1
    assert "worker-active" not in labels(swarm, "LEG-1")
    assert len(swarm.server.requests_for_scenario("resumed")) >= 1


# -- 6. the daemon killed mid-pass ----------------------------------------------------------------


def test_a_daemon_killed_mid_pass_loses_nothing_and_starts_nothing_twice(
    swarm: Swarm, tmp_path: Path
) -> None:
    shim = TmuxShim(tmp_path / "shim")
    for n in (1, 2, 3):
        swarm.legion("issue", "create", f"Work {n}", "--status", "In Progress")
        end = park(f"LEG-{n}")
        work = (
            f"echo {n} > work-{n}.txt && git add -A && (git diff --cached --quiet || "
            f"git commit -qm work-{n}) && {end}"
        )
        swarm.server.add_scenario(
            f"implement mode for LEG-{n}", [[bash(work, "Work")], [text("Done.")]], name=f"w{n}"
        )
    controller(swarm)
    sids = {session_uuid(swarm, f"LEG-{n}:implement") for n in (1, 2, 3)}
    sids.add(session_uuid(swarm, "controller"))
    env = shim.env(swarm.env)
    with SessionWatch(sids) as watch:
        # Killed between recording LEG-1's worker and creating its window.
        shim.set("slow-before-leg-1-implement", "5")
        first = Daemon(swarm, tick=0.5, extra_env=env).start()
        wait_until("LEG-1 started", lambda: "holding new-window leg-1-implement" in shim.events())
        first.kill()
        shim.clear("slow-before-leg-1-implement")
        assert "worker-active" in labels(swarm, "LEG-1")

        # Killed after LEG-2's window exists, before the daemon heard back from tmux.
        shim.set("slow-after-leg-2-implement", "5")
        second = Daemon(swarm, tick=0.5, extra_env=env).start()
        wait_until("LEG-2's window made", lambda: "made leg-2-implement" in shim.events())
        second.kill()
        shim.clear("slow-after-leg-2-implement")

        with Daemon(swarm, tick=0.5, extra_env=env):
            for n in (1, 2, 3):
                wait_until(f"LEG-{n} parked", lambda n=n: parked(swarm, f"LEG-{n}"))
            swarm.legion("issue", "move", "LEG-3", "Done")  # a person closes it
            wait_until(
                "LEG-3's workspace looked at",
                lambda: [e for e in actions(swarm, "sweep_workspace", "LEG-3")],
            )
    no_overlap(watch)
    # One controller, adopted by each new daemon.
    assert len(actions(swarm, "restart_controller")) == 1
    for n in (1, 2, 3):
        workspace = swarm.workspace_root / f"leg-{n}"
        assert (workspace / f"work-{n}.txt").read_text() == f"{n}\n"
        log = git(workspace, "log", "--format=%s", "legion/leg-" + str(n))
        assert log.splitlines().count(f"work-{n}") == 1
    # Done, but its work is not merged anywhere: the workspace stays.
    assert (swarm.workspace_root / "leg-3").is_dir()
    assert all(e["outcome"] != "done" for e in actions(swarm, "sweep_workspace", "LEG-3"))


# -- 7. the tmux server gone -----------------------------------------------------------------------


def test_the_tmux_server_killed_everything_is_restarted_in_its_sessions(swarm: Swarm) -> None:
    swarm.legion("issue", "create", "Survivor", "--status", "In Progress")
    controller(swarm)
    swarm.server.add_scenario(
        "implement mode for LEG-1", [[bash(busy(40), "Long work")]], name="work"
    )
    resumed_scenario(swarm, "LEG-1", park("LEG-1"))
    worker_sid = session_uuid(swarm, "LEG-1:implement")
    controller_sid = session_uuid(swarm, "controller")
    env = {"LEGION_RESTART_COOLDOWN": "1"}
    watched = {worker_sid, controller_sid}
    with SessionWatch(watched) as watch, Daemon(swarm, tick=0.5, extra_env=env):
        swarm.server.wait_for_turn("work", 0)
        sid = worker_sid
        # The CLI has the tool call (sent is not yet received: through the proxy, and a confined
        # worker's bridge, the answer takes its time on a loaded machine).
        wait_until(
            "the worker's tool call recorded",
            lambda: any(
                "time.sleep(40)" in t.read_text() for t in transcripts_of(swarm, worker_sid)
            ),
        )
        wait_until("controller idle", lambda: swarm.json("status")["controller"]["state"] == "idle")
        before = {sid: set(watch.seen.get(sid, ())) for sid in (worker_sid, controller_sid)}
        (controller_transcript,) = transcripts_of(swarm, controller_sid)
        controller_lines = len(controller_transcript.read_text().splitlines())
        swarm.tmux("kill-server")
        wait_until("worker resumed and parked", lambda: parked(swarm, "LEG-1"))
        wait_until(
            "controller back in its session",
            lambda: (
                len(controller_transcript.read_text().splitlines()) > controller_lines
                and swarm.json("status")["controller"]["state"] in ("running", "idle")
            ),
        )
        controller_pid = live_pid(swarm, "main")
    no_overlap(watch)
    for sid in (worker_sid, controller_sid):
        assert watch.seen[sid] - before[sid], f"session {sid} was not started again"
        assert len(transcripts_of(swarm, sid)) == 1
    assert controller_pid is not None and "--resume" in cmdline(controller_pid)
    (request,) = swarm.server.requests_for_scenario("resumed")[:1]
    assert "time.sleep(40)" in json.dumps(request.messages)  # the worker's own history, resumed
    assert asked(swarm) == []  # no human was asked about it (its own park asks one)
    assert [e["outcome"] for e in actions(swarm, REDISPATCH)] == ["done"]


# -- tmux not answering ----------------------------------------------------------------------------


def test_tmux_not_answering_is_unknown_not_dead_and_nothing_is_restarted(
    swarm: Swarm, tmp_path: Path
) -> None:
    shim = TmuxShim(tmp_path / "shim")
    swarm.legion("issue", "create", "Steady", "--status", "In Progress")
    controller(swarm)
    finish = "legion issue label LEG-1 --add worker-done --remove worker-active"
    # Its work lasts until the test has looked (never a fixed time a loaded machine outruns);
    # the word goes again, as `worker-done` is refused over a change left in the workspace.
    release = swarm.workspace_root / "leg-1" / ".release-the-work"
    work = f"{runs_until(release)}; rm -f {shlex.quote(str(release))}"
    swarm.server.add_scenario(
        "implement mode for LEG-1",
        [[bash(work, "Long work")], [bash(finish, "Finish")], [text("Done.")]],
        name="work",
    )
    swarm.server.add_scenario(
        "review mode for LEG-1", [[bash(park("LEG-1"), "Park")], [text("Parked.")]], name="review"
    )
    worker_sid = session_uuid(swarm, "LEG-1:implement")
    controller_sid = session_uuid(swarm, "controller")
    env = shim.env(swarm.env) | {"LEGION_RESTART_COOLDOWN": "1"}
    watched = {worker_sid, controller_sid}
    with SessionWatch(watched) as watch, Daemon(swarm, tick=0.5, extra_env=env) as daemon:
        swarm.server.wait_for_turn("work", 0)
        wait_until("controller idle", lambda: swarm.json("status")["controller"]["state"] == "idle")
        worker_pid = live_pid(swarm, "leg-1-implement")
        controller_pid = live_pid(swarm, "main")
        logged = len(actions(swarm))
        shim.set("fail-list-windows")
        daemon.ticks(8)  # that cannot see tmux
        during = actions(swarm)[logged:]
        shim.clear("fail-list-windows")
        assert shim.events().count("failed list-windows") >= 4
        # Nothing was restarted, killed or escalated on what could not be seen.
        assert live_pid(swarm, "leg-1-implement") == worker_pid
        assert live_pid(swarm, "main") == controller_pid
        assert [name for name, _, dead in windows(swarm) if not dead].count("main") == 1
        assert [e for e in during if e["outcome"] == "done"] == []
        assert any(e["outcome"] == "failed" for e in during)
        assert "user-input-needed" not in labels(swarm, "LEG-1")
        # And everything carries on: the worker finishes, the reviewer is started.
        release.touch()
        wait_until("reviewed and parked", lambda: parked(swarm, "LEG-1"))
    no_overlap(watch)
    assert len(watch.seen[worker_sid]) == 1 and len(watch.seen[controller_sid]) == 1
    assert actions(swarm, "transition_to_needs_review")
    assert actions(swarm, REDISPATCH) == [] and actions(swarm, "restart_controller")[1:] == []


# -- legion answer and the workers' lock -----------------------------------------------------------


def test_answer_waits_for_the_workers_lock(swarm: Swarm) -> None:
    swarm.legion("issue", "create", "Question")
    held = threading.Event()
    release = threading.Event()

    def hold() -> None:
        with exclusive(state_dir(swarm) / "workers.lock"):
            held.set()
            release.wait(10)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert held.wait(10)
        threading.Timer(1.5, release.set).start()
        started = time.monotonic()
        result = swarm.legion("answer", "LEG-1", "yes", check=False)
        waited = time.monotonic() - started
    finally:
        release.set()
        holder.join()
    assert waited >= 1.4, f"legion answer did not wait for the lock ({waited:.2f} s)"
    assert result.returncode != 0 and "no worker waiting" in result.stderr


# -- a process on the session outside every window Legion knows ------------------------------------


def test_a_session_still_running_outside_its_window_is_ended_before_it_starts_again(
    swarm: Swarm, tmp_path: Path
) -> None:
    """Issue 24, item 4: two Claude Code processes on one session id, once, while the daemon
    was SIGKILLed and started again. A process can outlive the window Legion knows it by (a
    Legion process killed while it waited for it to exit after closing its window; a fork the
    CLI made for a tool, orphaned). Here: the real CLI on the worker's session, in a tmux
    server of its own, so neither Legion's windows nor its pid file name it. Starting the
    session again ends it first: never two processes on the session."""
    import shutil
    import tempfile

    from tests.support.processes import ancestors, session_processes

    def on_session() -> list[int]:
        return session_processes({sid}).get(sid, [])

    swarm.legion("issue", "create", "Once only", "--status", "In Progress")
    swarm.server.add_scenario("implement mode for LEG-1", [[text("Working on it.")]], name="work")
    sid = session_uuid(swarm, "LEG-1:implement")
    folder = Path(tempfile.mkdtemp(prefix="lgo-"))
    other = ["tmux", "-S", str(folder / "sock"), "-f", "/dev/null"]
    claude = swarm.env["LEGION_CLAUDE_BIN"]
    subprocess.run(
        [*other, "new-session", "-d", "-x", "120", "-y", "40", "--", claude, "--session-id", sid],
        env=swarm.env,
        cwd=tmp_path,
        check=True,
    )
    try:
        (leftover,) = wait_until("the leftover running", on_session)
        with SessionWatch({sid}, interval=0.05) as watch, Daemon(swarm, mode="manual"):
            swarm.legion("dispatch", "LEG-1", "implement")
            swarm.server.wait_for_turn("work", 0)
            wait_until("the new process seen", lambda: watch.seen.get(sid, set()) - {leftover})
        no_overlap(watch)
        # The one on the session is the window's (its CLI, under the sandbox's processes).
        (running,) = on_session()
        window = live_pid(swarm, "leg-1-implement")
        assert running != leftover
        assert running == window or window in ancestors(running)
    finally:
        subprocess.run([*other, "kill-server"], check=False, capture_output=True)
        shutil.rmtree(folder, ignore_errors=True)
