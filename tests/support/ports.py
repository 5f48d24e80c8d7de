"""Free loopback ports for services started by tests."""

import random
import socket
from pathlib import Path

_handed_out: set[int] = set()
_LOWEST = 10_000  # below: ports some systems' services use


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now, never handed out before here.

    Two ports asked for before either is bound (a broker's client and controller ports, say)
    could otherwise be the same one.
    """
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("127.0.0.1", 0))
            port = int(sock.getsockname()[1])
        if port not in _handed_out:
            _handed_out.add(port)
            return port


def free_ports_in_a_row(count: int) -> int:
    """The first of `count` consecutive free ports, never handed out before here, for a
    service whose ports are a base plus an index (the Spark workers' web UIs).

    They lie below the system's ephemeral range, so no port the system hands out meanwhile
    (a bind to port 0, as `free_port` and Spark's own services do, or an outgoing
    connection) can take one of them before the service binds it.
    """
    highest = _ephemeral_start() - count
    while True:
        base = random.randrange(_LOWEST, highest)
        ports = range(base, base + count)
        if not _handed_out.isdisjoint(ports) or not all(map(_bindable, ports)):
            continue
        _handed_out.update(ports)
        return base


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _ephemeral_start() -> int:
    """The first port of Linux's ephemeral range (32768 where it cannot be read)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768
