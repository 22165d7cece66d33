"""Optional TLS on the channels (``--tls-cert``, ``--tls-key``, ``--tls-ca``), for networks where rows must not
be readable in transit.

Every process of the run is given a certificate and its key, and the CA that signed every process's: both ends
of a connection present their certificate and check the other's against that CA (mutual TLS, TLS 1.2 or later;
peers are reached by address, so host names are not checked). The job secret's handshake (:mod:`.handshake`)
then runs inside the encrypted connection. The files come from ``GRAPHSHARD_TLS_CERT``, ``GRAPHSHARD_TLS_KEY``
and ``GRAPHSHARD_TLS_CA`` (the flags set them for the ranks a command starts).
"""

from __future__ import annotations

import os
import ssl
from dataclasses import dataclass

from ...errors import InputError

CERT_ENV, KEY_ENV, CA_ENV = "GRAPHSHARD_TLS_CERT", "GRAPHSHARD_TLS_KEY", "GRAPHSHARD_TLS_CA"
_FLAGS = {CERT_ENV: "--tls-cert", KEY_ENV: "--tls-key", CA_ENV: "--tls-ca"}


@dataclass(frozen=True)
class Tls:
    """The contexts a process's channels wrap their connections in: ``server`` for those it accepts, ``client``
    for those it makes."""

    server: ssl.SSLContext
    client: ssl.SSLContext


def tls_from_env() -> Tls | None:
    """The TLS contexts the environment names, or None (no TLS). Raises :class:`InputError` naming the flag and
    file at fault: one given without the others, or a file that cannot be read or is not what it should be."""
    given = {name: os.environ.get(name, "") for name in _FLAGS}
    if not any(given.values()):
        return None
    missing = [_FLAGS[n] for n, v in given.items() if not v]
    if missing:
        raise InputError(f"--tls-cert, --tls-key and --tls-ca go together: {', '.join(missing)} missing")
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    client = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    client.check_hostname = False  # peers are reached by address; the CA says who belongs to the run
    for ctx in (server, client):
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        ctx.verify_mode = ssl.CERT_REQUIRED
        _load(ctx, given)
    return Tls(server, client)


def _load(ctx: ssl.SSLContext, given: dict[str, str]) -> None:
    step = CERT_ENV
    try:
        ctx.load_cert_chain(given[CERT_ENV], given[KEY_ENV])
        step = CA_ENV
        ctx.load_verify_locations(given[CA_ENV])
    except (OSError, ssl.SSLError) as exc:
        files = f"{given[CERT_ENV]} / {given[KEY_ENV]}" if step == CERT_ENV else given[CA_ENV]
        what = "--tls-cert / --tls-key" if step == CERT_ENV else "--tls-ca"
        raise InputError(f"{what} {files}: {getattr(exc, 'strerror', None) or exc}") from None
