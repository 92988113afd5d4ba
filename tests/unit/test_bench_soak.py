"""`bench/soak.py`'s growth of a daemon's samples: its warm-up left out, the median of the last
quarter of the rest against that of the first, so a start-up's climb or a passing spike is not
a leak, and a steady climb is."""

from __future__ import annotations

import contextlib
import re
from pathlib import Path

import pytest

from tests.support.bench import load_bench

soak = load_bench("soak")


def test_a_flat_series_after_its_warm_up_did_not_grow() -> None:
    # A start-up from 10 to 100 in the first fifth, then flat with a spike and some noise.
    warm_up = [10, 40, 70, 100]
    steady = [100, 101, 99, 100, 100, 100, 102, 98, 100, 101, 99, 100, 100, 400, 101, 100]
    assert soak.growth(warm_up + steady) == pytest.approx(0.0, abs=0.01)


def test_a_steady_climb_is_growth() -> None:
    climbing = [100 + 2 * n for n in range(50)]  # +2 a sample: a leak
    grew = soak.growth(climbing)
    assert grew is not None and grew > soak.GROWTH_LIMIT


def test_half_again_between_the_quarters_is_fifty_percent() -> None:
    # 20 samples: 4 of warm-up, then 16, whose first quarter is 4 samples of 100 and whose
    # last is 4 of 150.
    values = [0] * 4 + [100] * 4 + [120] * 8 + [150] * 4
    assert soak.growth(values) == pytest.approx(0.5)


def test_too_few_samples_tell_nothing() -> None:
    assert soak.growth([100] * 8) is None  # 7 left after warm-up: too few
    assert soak.growth([100] * 9) == 0.0  # 8 left: enough
    assert soak.growth([]) is None


def test_open_files_say_what_they_are_and_what_grew() -> None:
    assert soak.fd_kind("socket:[81234]") == "socket"
    assert soak.fd_kind("pipe:[77]") == "pipe"
    assert soak.fd_kind("anon_inode:[eventfd]") == "anon_inode:[eventfd]"
    assert soak.fd_kind("/tmp/soak-3/state/legion.db-wal") == "/tmp/soak-N/state/legion.db-wal"
    from collections import Counter

    life = soak.Life("alpha", 1)
    life.kinds = [Counter({"pipe": 4})] * 5 + [Counter({"pipe": 3, "socket": 2})]
    assert life.files_grown() == "+2 socket, -1 pipe"


def test_the_daemons_figures_say_a_growth_of_open_files_and_what_it_is() -> None:
    from collections import Counter

    sampler = soak.DaemonSampler([], 0.0)
    life = sampler.lives[7] = soak.Life("beta", 7)
    for n in range(40):  # 200 s; open files from 20 to 26 over the run, sockets all
        life.samples.append((5.0 * n, 70_000, 25, 20 + n * 6 // 39))
        life.kinds.append(Counter({"pipe": 10, "socket": 10 + n * 6 // 39}))
    assert life.seconds == 195.0
    figures = soak.daemon_figures(sampler, ran_for=200.0)
    assert "beta's daemon, 3.2 min, 40 samples" in figures.lines[1], figures.lines
    (problem,) = figures.problems
    assert problem.startswith("beta's daemon 7: open files 21 -> 25") and "(+5 socket)" in problem


def test_a_daemons_sockets_say_what_they_are_for(tmp_path: Path) -> None:
    """This process's own sockets, read as the soak reads a daemon's: a listener and the
    connection it accepted by its port, the connection made to it by the port it went to, a
    Unix socket by its path."""
    import os
    import socket

    with contextlib.ExitStack() as stack:
        listener = stack.enter_context(socket.create_server(("127.0.0.1", 0)))
        port = listener.getsockname()[1]
        client = stack.enter_context(socket.create_connection(("127.0.0.1", port)))
        accepted = stack.enter_context(listener.accept()[0])
        unix = stack.enter_context(socket.socket(socket.AF_UNIX))
        unix.bind(str(tmp_path / "relay-7.sock"))
        names = soak.socket_names(os.getpid())

        def kind(sock: socket.socket) -> str:
            return soak.fd_kind(os.readlink(f"/proc/self/fd/{sock.fileno()}"), names)

        assert kind(listener) == kind(accepted) == f"tcp :{port}"
        assert kind(client) == f"tcp to :{port}"
        assert kind(unix) == "unix " + str(tmp_path / "relay-N.sock").replace(
            str(tmp_path), re.sub(r"\d+", "N", str(tmp_path))
        )


def test_a_process_left_behind_is_said_with_its_command_line() -> None:
    import os
    import sys

    assert soak.described(os.getpid()).startswith(f"{os.getpid()} {sys.executable}")
    assert soak.described(2**22 + 7) == f"{2**22 + 7} (gone)"  # above any pid_max default
