"""The job secret at start-up: ranks given different secrets are refused within seconds, each naming the other's
channel address; the launcher gives its ranks one secret (so they meet); a process about to listen beyond loopback
without a secret is refused unless told ``--insecure``."""

from __future__ import annotations

import os
import time

import pytest

from graphshard.distributed.ranks.context import DistError
from graphshard.distributed.ranks.launcher import launch
from graphshard.distributed.transport import handshake
from graphshard.errors import InputError


def _meet(secrets: tuple[str, ...] | None) -> None:
    from graphshard.distributed.runtime.session import session

    rank = int(os.environ["RANK"])
    if secrets is not None:
        os.environ[handshake.SECRET_ENV] = secrets[rank]
    assert os.environ[handshake.SECRET_ENV]  # the launcher's, or the one set here
    with session(timeout=60) as s:
        s.group.barrier("met")


def test_ranks_of_one_launch_share_its_secret():
    launch(_meet, 2, (None,), timeout=60)


def test_ranks_given_different_secrets_are_refused_at_start_naming_each_other():
    start = time.monotonic()
    with pytest.raises(DistError) as err:
        launch(_meet, 2, (("the first rank's secret", "the second rank's secret"),), timeout=60)
    assert time.monotonic() - start < 30  # start-up included; the refusal itself within the handshake's 10 s
    text = str(err.value)
    assert "must be given the same secret" in text and "another secret" in text
    assert "rank1 at 127.0.0.1" in text or "rank0 at 127.0.0.1" in text


def test_listening_beyond_loopback_needs_a_secret_or_insecure(monkeypatch):
    for name in (handshake.SECRET_ENV, handshake.SECRET_FILE_ENV, handshake.INSECURE_ENV):
        monkeypatch.delenv(name, raising=False)
    assert handshake.listening_key("127.0.0.1", "rank0") == b""  # loopback: allowed, said in the docs
    with pytest.raises(InputError, match=r"rank1 would listen on 10\.0\.0\.2 without a job secret.*--insecure"):
        handshake.listening_key("10.0.0.2", "rank1")
    monkeypatch.setenv(handshake.INSECURE_ENV, "1")
    assert handshake.listening_key("10.0.0.2", "rank1") == b""
    monkeypatch.delenv(handshake.INSECURE_ENV)
    monkeypatch.setenv(handshake.SECRET_ENV, "a secret long enough")
    assert len(handshake.listening_key("10.0.0.2", "rank1")) == 32
