"""Network guard for every Python process the test suite starts (Snakemake and its jobs).

The tests put this folder on PYTHONPATH and set TCRFORMER_NETWORK_LOG. Any attempt to open
an internet connection is refused and recorded in that file; the test session then fails
(tests/conftest.py). Unix sockets and loopback addresses stay allowed: the local SLURM
cluster talks over them.
"""

import os
import socket

_LOG = os.environ.get("TCRFORMER_NETWORK_LOG")
_LOOPBACK = ("127.", "::1", "localhost")


def _allowed(address) -> bool:
    if isinstance(address, str | bytes):  # AF_UNIX path
        return True
    host = str(address[0]) if isinstance(address, tuple) and address else ""
    return host.startswith(_LOOPBACK)


def _refuse(address):
    with open(_LOG, "a", encoding="utf-8") as log:
        log.write(f"pid {os.getpid()}: connect to {address!r}\n")
    raise ConnectionRefusedError(f"network disabled in tests: connect to {address!r}")


if _LOG:
    _connect, _connect_ex = socket.socket.connect, socket.socket.connect_ex

    def connect(self, address):
        if not _allowed(address):
            _refuse(address)
        return _connect(self, address)

    def connect_ex(self, address):
        if not _allowed(address):
            _refuse(address)
        return _connect_ex(self, address)

    socket.socket.connect, socket.socket.connect_ex = connect, connect_ex
