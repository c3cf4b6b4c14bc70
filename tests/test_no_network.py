"""The suite runs without network: in-process (pytest-socket) and in every subprocess."""

import socket
import subprocess
import sys

import pytest
from pytest_socket import SocketBlockedError


def test_sockets_are_blocked_in_the_test_process():
    with pytest.raises(SocketBlockedError):
        socket.socket(socket.AF_INET, socket.SOCK_STREAM)


def test_subprocesses_are_guarded(no_network):
    code = (
        "import socket\n"
        "s = socket.socket()\n"
        "try:\n"
        "    s.connect(('192.0.2.1', 443))\n"  # TEST-NET-1: never routed
        "except ConnectionRefusedError as err:\n"
        "    print('refused:', err)\n"
    )
    before = no_network.read_text()
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "network disabled in tests" in out.stdout
    # The attempt was logged; forget it so this deliberate one does not fail the session.
    assert "192.0.2.1" in no_network.read_text()
    no_network.write_text(before)
