"""The example worker group's rendezvous: rank 0's store holds its port from the moment it is
picked (CI once failed with EADDRINUSE when a port was picked free, closed, and bound again later
by init_process_group: another process had taken it in between)."""
from __future__ import annotations

import errno
import socket

import pytest

pytest.importorskip("torch")

from examples.common.mcore_cpu import group_store  # noqa: E402


def test_the_masters_port_stays_bound_until_the_group_meets():
    master = group_store("127.0.0.1", 0, 2, master=True)
    assert master.port > 0
    with socket.socket() as other, pytest.raises(OSError) as err:
        other.bind(("127.0.0.1", master.port))    # what the old pick-and-close let another process do
    assert err.value.errno == errno.EADDRINUSE
    rank1 = group_store("127.0.0.1", master.port, 2, master=False)
    rank1.set("joined", "1")
    assert master.get("joined") == b"1"
