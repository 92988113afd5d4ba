"""The fleet's rules (`legion.core.fleet`), pure: at most one leader at any time, a new epoch
at each change of holder, a lost host told by its heartbeat, a capacity from cores and memory,
where a session is placed, and how another host's worker is seen."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from legion.core.fleet import (
    HostState,
    Lease,
    Room,
    default_max_sessions,
    host_state,
    hosted_state,
    leads,
    place,
    remote_session_state,
    room,
    take_lease,
    worker_capacity,
)
from legion.core.liveness import SessionState

HOSTS = ("a", "b", "c")


@given(
    st.lists(
        st.tuples(st.sampled_from(HOSTS), st.floats(0, 5), st.booleans()), min_size=1, max_size=60
    )
)
def test_one_leader_at_a_time_and_a_new_epoch_for_each_new_holder(
    asks: list[tuple[str, float, bool]],
) -> None:
    duration = 3.0
    lease: Lease | None = None
    now = 0.0
    for host, step, willing in asks:
        now += step
        taken = take_lease(lease, host, now, duration, willing=willing)
        if taken is None:
            if lease is not None and lease.holder == host and not willing:  # gave it up
                lease = Lease(lease.holder, lease.epoch, min(lease.expires_at, now))
            continue
        if lease is not None and taken.holder != lease.holder:
            # A new holder only once the old lease ran out, and under a greater epoch.
            assert lease.expires_at <= now and taken.epoch == lease.epoch + 1
        elif lease is not None and lease.expires_at > now:
            assert taken.epoch == lease.epoch  # renewed while it held
        assert leads(taken, host, taken.epoch, now)
        lease = taken


def test_a_lease_taken_over_is_no_longer_its_old_holders() -> None:
    first = take_lease(None, "a", 0.0, 10.0)
    assert first == Lease("a", 1, 10.0)
    assert take_lease(first, "b", 5.0, 10.0) is None  # a holds it
    renewed = take_lease(first, "a", 5.0, 10.0)
    assert renewed == Lease("a", 1, 15.0)
    second = take_lease(renewed, "b", 15.5, 10.0)  # expired: b takes it
    assert second == Lease("b", 2, 25.5)
    assert not leads(second, "a", 1, 16.0) and leads(second, "b", 2, 16.0)
    assert take_lease(second, "b", 17.0, 10.0, willing=False) is None  # draining: gives it up


def test_host_states_and_capacity() -> None:
    assert host_state(100.0, False, 150.0, 60.0) is HostState.UP
    assert host_state(100.0, True, 150.0, 60.0) is HostState.DRAINING
    assert host_state(100.0, False, 161.0, 60.0) is HostState.LOST
    assert host_state(100.0, False, 150.0, 60.0, left=True) is HostState.STOPPED
    gib = 1024**3
    assert default_max_sessions(2, 24 * gib) == 4  # two a core
    assert default_max_sessions(64, 8 * gib) == 16  # half a GiB each
    assert default_max_sessions(1, 100) == 1  # at least one


def test_a_session_goes_where_its_workspace_is_then_to_the_leader_then_where_most_room_is() -> None:
    rooms = {
        "alpha": Room(open=True, free=1),
        "beta": Room(open=True, free=3),
        "gamma": Room(open=True, free=3),
        "full": Room(open=True, free=0),
        "drained": Room(open=False, free=5),
    }
    assert place("alpha", "beta", rooms) == "beta"  # its workspace and transcript are there
    assert place("alpha", "", rooms) == "alpha"  # a new issue: the leader's own host
    assert place("alpha", "full", rooms) == "alpha"  # its host has no room: moved
    assert place("alpha", "drained", rooms) == "alpha"  # nor one that takes nothing new
    assert place("alpha", "gone", rooms) == "alpha"  # nor one that left the fleet
    # The leader full too: the most room, by name on a tie.
    assert place("full", "", rooms) == "beta"
    assert place("full", "drained", {"full": rooms["full"], "drained": rooms["drained"]}) is None


@given(
    st.dictionaries(
        st.sampled_from(["a", "b", "c", "d"]),
        st.builds(Room, st.booleans(), st.integers(-2, 4)),
    ),
    st.sampled_from(["a", "b", "x"]),
    st.sampled_from(["", "a", "c", "x"]),
)
def test_placement_only_ever_picks_a_host_with_room(
    rooms: dict[str, Room], here: str, holder: str
) -> None:
    placed = place(here, holder, rooms)
    roomy = [name for name, room in rooms.items() if room.open and room.free > 0]
    if placed is None:
        assert roomy == []
    else:
        assert placed in roomy
        if holder in roomy:
            assert placed == holder


def test_another_hosts_worker_is_seen_as_reported_while_its_host_lives() -> None:
    up, lost = HostState.UP, HostState.LOST
    assert remote_session_state(up, SessionState.IDLE, 500.0, 60.0) is SessionState.IDLE
    assert remote_session_state(HostState.DRAINING, SessionState.RUNNING, 1.0, 60.0) is (
        SessionState.RUNNING
    )
    # Its host lost, stopped, or never in the fleet: dead, whatever it said last.
    for host in (lost, HostState.STOPPED, None):
        assert remote_session_state(host, SessionState.RUNNING, 1.0, 60.0) is SessionState.DEAD
    # Asked of its host, not reported yet: starting for the allowance, then dead.
    assert remote_session_state(up, None, 59.0, 60.0) is SessionState.RUNNING
    assert remote_session_state(up, None, 61.0, 60.0) is SessionState.DEAD


def test_a_worker_waiting_for_its_setup_is_reported_starting_not_dead() -> None:
    """A start asked of a host waits there for its workspace's setup (no window yet): reported
    running, so the leader neither takes it for dead nor starts it elsewhere."""
    assert hosted_state(SessionState.DEAD, True) is SessionState.RUNNING
    assert hosted_state(SessionState.DEAD, False) is SessionState.DEAD
    for seen in (SessionState.RUNNING, SessionState.IDLE, SessionState.BLOCKED):
        assert hosted_state(seen, True) is seen and hosted_state(seen, False) is seen


def test_a_hosts_room_and_the_fleets_capacity_count_the_controller_once() -> None:
    assert room(True, 4, 1, leads=True) == Room(open=True, free=2)
    assert room(True, 4, 1, leads=False) == Room(open=True, free=3)
    assert room(False, 4, 0, leads=False) == Room(open=False, free=4)
    # Three open hosts of 2, 1 and 1: three workers at once beside the leader's controller.
    assert worker_capacity([2, 1, 1]) == 3
    assert worker_capacity([2, 1, 1]) == sum(
        r.free for r in (room(True, 2, 0, True), room(True, 1, 0, False), room(True, 1, 0, False))
    )


def test_a_worker_its_host_has_not_started_yet_is_not_reported_dead() -> None:
    """The leader records a worker, then asks its host to start it: a host that looks in
    between sees no window. It reports nothing (the leader counts it starting), never dead,
    which would have the leader start it again and two starts of one session meet there. Once
    the host started it (a window, or a report of its own), a dead one is reported dead."""
    assert hosted_state(SessionState.DEAD, False, started_here=False) is None
    assert hosted_state(SessionState.DEAD, True, started_here=False) is SessionState.RUNNING
    assert hosted_state(SessionState.DEAD, False, started_here=True) is SessionState.DEAD
    for seen in (SessionState.RUNNING, SessionState.IDLE, SessionState.BLOCKED):
        assert hosted_state(seen, False, started_here=False) is seen
