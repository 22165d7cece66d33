"""A stranger on the run's network (run on a host of its own by tests/cluster/test_stranger.py): given the ranks'
listening sockets, it sends each TCP one random bytes, a well-formed channel request, a pickle that would create
``PWNED`` if it were unpickled, a handshake that gives the listener's nonce back as a proof, and a flood of
connections;
each UDP one (the heartbeat) random bytes and a forged-looking datagram. Prints one JSON line per socket: the
bytes it got back for each probe beyond a listener's half of the handshake (all zero when nothing was served;
-1 when nothing listened there any more).

    python stranger.py '[["10.0.0.1", 41234, "tcp"], ...]' PWNED
"""

from __future__ import annotations

import json
import os
import pickle
import socket
import sys
import time

from graphshard.distributed.transport.handshake import MAGIC as HELLO  # as anyone could read it in the source
from graphshard.distributed.transport.handshake import NONCE, REFUSED


class Evil:
    def __init__(self, path: str):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def frame() -> bytes:
    """A well-formed channel request: a DistTensor write."""
    head = json.dumps(
        {
            "h": "graphshard.distributed.remote.tensor._write",
            "v": {"(": ["x", {"T": 0}, {"T": 1}]},
            "a": [["int64", [1]], ["float32", [1]]],
        }
    ).encode()
    return len(head).to_bytes(4, "little") + head + (0).to_bytes(8, "little") + b"\0\0\0\0"


def answered(address: tuple[str, int], data: bytes, hello_first: bool = False) -> int:
    """Bytes got back after sending ``data`` (beyond the listener's half of the handshake, when ``hello_first``);
    -1 when the connection was refused (nothing listens there any more)."""
    got = b""
    try:
        s = socket.create_connection(address, timeout=2)
    except OSError:
        return -1
    try:
        with s:
            if hello_first:
                s.sendall(HELLO + os.urandom(NONCE))
                theirs = s.recv(NONCE)
                data = data or theirs  # its own nonce given back as a proof
            s.sendall(data)
            s.settimeout(1)  # a listener that answers does so at once
            while chunk := s.recv(4096):
                got += chunk
    except OSError:
        pass
    return 0 if got == REFUSED else len(got)  # told it was refused: nothing served


def flood(address: tuple[str, int], n: int = 100) -> int:
    """Open ``n`` connections and hold them a while; -1 when the first was refused."""
    socks = []
    for _ in range(n):
        try:
            socks.append(socket.create_connection(address, timeout=5))
        except OSError:
            if not socks:
                return -1
            break
    time.sleep(0.3)  # held open a while, as a flood would (not a synchronisation)
    for s in socks:
        s.close()
    return 0


def main() -> None:
    targets, pwned = json.loads(sys.argv[1]), sys.argv[2]
    for host, port, proto in targets:
        address = (host, int(port))
        if proto == "udp":
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
                s.sendto(os.urandom(64), address)
                s.sendto(b"GSHB" + os.urandom(28), address)
            print(json.dumps({"port": port, "proto": proto}), flush=True)
            continue
        got = {
            "random": answered(address, os.urandom(1024)),
            "frame": answered(address, frame()),
            "pickle": answered(address, pickle.dumps(Evil(pwned))),
            "replay": answered(address, b"", hello_first=True),
            "flood": flood(address),
        }
        print(json.dumps({"port": port, "proto": proto, "got": got}), flush=True)


if __name__ == "__main__":
    main()
