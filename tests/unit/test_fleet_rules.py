"""The fleet's rules (`legion.core.fleet`), pure: at most one leader at any time, a new epoch
at each change of holder, a lost host told by its heartbeat, a capacity from cores and memory."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from legion.core.fleet import (
    HostState,
    Lease,
    default_max_sessions,
    host_state,
    leads,
    take_lease,
)

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
