"""Free loopback ports for services started by tests."""

import socket

_handed_out: set[int] = set()


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
