"""The service's door: what a connection must do before it is given a slot. uvicorn counts every open
connection against ``limit_concurrency`` and resets its own idle timer on each byte, so one client trickling
header bytes over ~1,000 connections could keep everyone else at a bare 503. Here every connection must
deliver each request's header and body within ``read_timeout`` seconds (else ``408`` and the connection is
closed), and one client address holds at most ``per_client`` connections (the next gets ``503`` and is
closed at once, before it reaches the application)."""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

log = logging.getLogger(__name__)

TIMED_OUT = b"HTTP/1.1 408 Request Timeout\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
TOO_MANY = b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"


def guarded_protocol(read_timeout: float, per_client: int) -> type[H11Protocol]:
    """uvicorn's HTTP/1.1 protocol with a read deadline per request and a cap on connections per client.

    Args:
        read_timeout: Seconds a connection has to deliver a request's header and body, counted from the
            connection's start or the end of its previous answer.
        per_client: Connections one client address may hold at once.

    Returns:
        A protocol class for ``uvicorn.Config(http=...)``; its connection counts are its own.
    """
    open_per_client: Counter[Any] = Counter()

    class Guarded(H11Protocol):
        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._peer = self.client[0] if self.client else None
            self._deadline: asyncio.TimerHandle | None = None
            open_per_client[self._peer] += 1
            if open_per_client[self._peer] > per_client:
                log.warning("%s holds %d connections (at most %d): refused", self._peer, per_client, per_client)
                transport.write(TOO_MANY)
                transport.close()
                return
            self._arm()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            open_per_client[self._peer] -= 1
            if open_per_client[self._peer] <= 0:
                del open_per_client[self._peer]
            super().connection_lost(exc)

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            if self.conn.their_state is not h11.IDLE and self.conn.their_state is not h11.SEND_BODY:
                self._disarm()  # the whole request is in: its answer is the batcher's business (--request-timeout)

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing():
                self._arm()  # the next request has its own deadline

        def _arm(self) -> None:
            self._disarm()
            self._deadline = self.loop.call_later(read_timeout, self._too_slow)

        def _disarm(self) -> None:
            if getattr(self, "_deadline", None) is not None:
                self._deadline.cancel()  # type: ignore[union-attr]
                self._deadline = None

        def _too_slow(self) -> None:
            self._deadline = None
            if not self.transport.is_closing() and self.conn.their_state in (h11.IDLE, h11.SEND_BODY):
                if self.cycle is None or self.cycle.response_complete:
                    self.transport.write(TIMED_OUT)
                self.transport.close()

    return Guarded
