"""Where graphshard's processes listen: only on the address the user gives, loopback by default.

torch's TCPStore and gloo do not authenticate their peers: anyone who can connect can read and write the
rendezvous keys and join the collectives. graphshard's own channels (:mod:`.channel`) carry everything else, and
pickle nothing. So every listening socket binds to one given address, never to all interfaces, and that address
is loopback unless the user names another one.

The sockets, and how each is bound:
- rendezvous store (the launcher's, or rank 0's without torchrun): a socket bound to the address and
  handed to ``TCPStore`` (``master_listen_fd``), since TCPStore alone listens on every interface;
- gloo: its device is created for the address (``ProcessGroupGloo.create_device(hostname=...)``);
- the channels of each group (trainer ranks, sampler workers): a socket bound to the address.
On a host that does not hold the rendezvous address (the other machines of a multi-host run), gloo, the
channels and the heartbeat (:mod:`.liveness`) listen on :func:`own_address`: the address of this host's
interface on the route to the rendezvous host, so no host needs ``GLOO_SOCKET_IFNAME`` set (when set, it wins).
"""

from __future__ import annotations

import datetime
import ipaddress
import socket
from typing import Any, cast

from ...errors import InputError

LOOPBACK = "127.0.0.1"


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or an address) resolves only to loopback addresses."""
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except socket.gaierror:
        return False
    return bool(infos) and all(_ip(i[4][0]).is_loopback for i in infos)


def _ip(address: str | int) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    """The address of a ``getaddrinfo`` entry's sockaddr (the zone of an IPv6 one dropped)."""
    # a host name resolves to IPv4/IPv6 sockaddrs, whose first item is the address as text (int: other families)
    return ipaddress.ip_address(cast(str, address).split("%")[0])


def check_host(host: str) -> str:
    """Refuse wildcard addresses (they mean every interface) and names that do not resolve."""
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise InputError(f"--host {host!r} does not resolve to an address ({exc})") from None
    if any(_ip(i[4][0]).is_unspecified for i in infos):
        raise InputError(
            f"--host {host!r} would listen on every interface; give the one address to listen on "
            f"({LOOPBACK} for this machine only)"
        )
    return host


def listen_socket(host: str, port: int) -> socket.socket:
    """A TCP socket listening on ``host:port`` (port 0: a free one) and nowhere else."""
    family, kind, proto, _, addr = socket.getaddrinfo(check_host(host), port, type=socket.SOCK_STREAM)[0]
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(addr)
    sock.listen(1024)
    return sock


def host_store(host: str, port: int, world_size: int, timeout: float) -> Any:
    """A ``TCPStore`` server listening on ``host:port`` only (``port`` 0: a free one; see ``.port``)."""
    import torch.distributed as dist

    sock = listen_socket(host, port)
    bound = sock.getsockname()[1]
    return dist.TCPStore(
        host,
        bound,
        world_size,
        is_master=True,
        timeout=datetime.timedelta(seconds=timeout),
        wait_for_workers=False,
        master_listen_fd=sock.detach(),
    )


def gloo_options(host: str) -> Any:
    """Process-group options that make gloo listen on ``host``."""
    import torch.distributed as dist

    # gloo's own options (with ``_devices``); torch's stubs lack ``_Options`` (their ``Options`` is Backend's)
    opts = dist.ProcessGroupGloo._Options()  # type: ignore[attr-defined]
    opts._devices = [dist.ProcessGroupGloo.create_device(hostname=host)]
    return opts


def interface_of(host: str) -> str | None:
    """Name of the network interface holding ``host``'s address (IPv4), or None if none does."""
    import fcntl
    import struct

    try:
        addr = socket.gethostbyname(host)
    except OSError:
        return None
    siocgifaddr = 0x8915
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for _, name in socket.if_nameindex():
            try:
                raw = fcntl.ioctl(s.fileno(), siocgifaddr, struct.pack("256s", name.encode()[:15]))
            except OSError:
                continue
            if socket.inet_ntoa(raw[20:24]) == addr:
                return name
    return "lo" if ipaddress.ip_address(addr).is_loopback else None


def own_address(master: str) -> str:
    """The address this host listens on in a run whose rendezvous is at ``master``: ``master`` itself when
    this host holds it (loopback, or the rendezvous host), else the source address of this host's route to
    it (asked of the kernel; nothing is sent). Raises :class:`InputError` when there is no route."""
    if interface_of(master):
        return socket.gethostbyname(master)
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect((master, 9))
            return s.getsockname()[0]
    except OSError as exc:
        raise InputError(f"MASTER_ADDR {master!r}: this host has no route to it ({exc})") from None
