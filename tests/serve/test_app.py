"""The HTTP layer on its own, served by uvicorn on loopback and asked by a real client, with a stand-in for the
model whose answers the test controls: the bearer token, a full queue (503 at once), an answer that does not
come in time (503), an answer that fails (500, and the service goes on), micro-batches bounded in nodes."""

from __future__ import annotations

import socket
import statistics
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import replace

import httpx
import numpy as np
import pytest
import uvicorn

from graphshard.errors import InputError
from graphshard.serve.app import Service, build_app
from graphshard.serve.batching import MicroBatcher
from graphshard.serve.metrics import Metrics
from graphshard.serve.queries import GraphFacts, Limits, Query
from graphshard.serve.service import ServeOptions, read_token, require_extra
from graphshard.serve.service import _listen as listen

FACTS = GraphFacts({"n": 100}, ["n"], "feat", {"n": 3}, stale=False)
TOKEN = "s3cret-token-0123456789"


def _rows(queries: list[Query]) -> list[np.ndarray]:
    """Row i of node i: [i, i, i]."""
    return [np.repeat(q.ids[:, None].astype(np.float32), 3, axis=1) for q in queries]


@contextmanager
def app(answer: Callable = _rows, **kw) -> Iterator[tuple[str, Service]]:
    batcher = MicroBatcher(answer, kw.pop("max_nodes", 64), kw.pop("wait", 0.0), kw.pop("max_queue", 64)).start()
    service = Service(
        batcher, FACTS, Limits(), 3, health=lambda: [], unavailable=lambda exc: None, metrics=Metrics(), **kw
    )
    sock = listen("127.0.0.1", 0)  # the service's own listening socket
    server = uvicorn.Server(uvicorn.Config(build_app(service), log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        while not server.started:
            thread.join(0.01)
            assert thread.is_alive()
        yield f"http://127.0.0.1:{sock.getsockname()[1]}", service
    finally:
        server.should_exit = True
        thread.join(10)
        batcher.stop()
        sock.close()


def test_a_token_is_required_when_set():
    with app(token=TOKEN) as (url, _):
        assert httpx.post(f"{url}/v1/predict", json={"nodes": [1]}).status_code == 401
        wrong = {"Authorization": "Bearer not-it"}
        assert httpx.post(f"{url}/v1/predict", json={"nodes": [1]}, headers=wrong).status_code == 401
        assert httpx.get(f"{url}/metrics").status_code == 401
        right = {"Authorization": f"Bearer {TOKEN}"}
        r = httpx.post(f"{url}/v1/predict", json={"nodes": [2]}, headers=right)
        assert r.status_code == 200 and r.json()["scores"] == [[2.0, 2.0, 2.0]]


def test_a_full_queue_is_refused_at_once_and_a_slow_answer_in_time():
    entered, release = threading.Event(), threading.Event()

    def held(queries: list[Query]) -> list[np.ndarray]:
        entered.set()
        assert release.wait(30)
        return _rows(queries)

    with app(held, max_queue=1, timeout=20) as (url, _), ThreadPoolExecutor(4) as pool:
        first = pool.submit(httpx.post, f"{url}/v1/predict", json={"nodes": [1]}, timeout=30)
        assert entered.wait(10)  # the batcher holds the first request
        more = [pool.submit(httpx.post, f"{url}/v1/predict", json={"nodes": [i]}, timeout=30) for i in (2, 3, 4)]
        deadline = time.monotonic() + 10
        while sum(f.done() for f in more) < 2:  # one request fits the queue: the other two are refused at once
            assert time.monotonic() < deadline, "no request was refused"
            wait([f for f in more if not f.done()], timeout=deadline - time.monotonic(), return_when=FIRST_COMPLETED)
        refused = [f.result() for f in more if f.done()]
        waiting = [f for f in more if not f.done()]
        assert [r.status_code for r in refused] == [503, 503]
        assert "busy" in refused[0].json()["error"] and refused[0].headers["retry-after"] == "1"
        release.set()
        assert first.result().json()["scores"] == [[1.0] * 3]
        assert [f.result().status_code for f in waiting] == [200]
    entered.clear()
    release.clear()
    with app(held, timeout=0.5) as (url, _):
        r = httpx.post(f"{url}/v1/predict", json={"nodes": [1]}, timeout=30)
        assert r.status_code == 503 and "not answered within 0.5 s" in r.json()["error"]
        release.set()


def test_a_failed_answer_is_a_500_and_the_service_goes_on():
    calls = []

    def flaky(queries: list[Query]) -> list:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("boom")
        return _rows(queries)

    with app(flaky) as (url, _):
        r = httpx.post(f"{url}/v1/embed", json={"nodes": [1]})
        assert r.status_code == 500 and r.json()["error"] == "internal error (logged by the service's rank 0)"
        assert httpx.post(f"{url}/v1/embed", json={"nodes": [4]}).json()["embeddings"] == [[4.0] * 3]


def test_batches_hold_what_was_queued_up_to_the_node_bound():
    sizes, entered, release = [], threading.Event(), threading.Event()

    def recorded(queries: list[Query]) -> list[np.ndarray]:
        sizes.append(sum(q.size for q in queries))
        entered.set()
        assert release.wait(30)
        return _rows(queries)

    batcher = MicroBatcher(recorded, max_nodes=5, wait=0.0, max_queue=64).start()
    got: list = []
    answered = threading.Event()

    def done(result) -> None:
        got.append(result)
        if len(got) == 7:
            answered.set()

    try:
        batcher.submit(Query("predict", "n", np.array([0])), done)
        assert entered.wait(10)
        for i in range(1, 7):  # queued while the first batch is held: 6 queries of 2 nodes
            batcher.submit(Query("predict", "n", np.array([i, i])), done)
        release.set()
        assert answered.wait(10)
    finally:
        batcher.stop()
    assert sizes == [1, 6, 6] and len(got) == 7  # 3 queries (6 nodes: the bound is passed by the last), then 3


def test_without_the_serve_extra_the_command_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "uvicorn", None)  # what an absent package looks like to an import
    with pytest.raises(
        InputError, match=r"needs the serve extra \(missing: uvicorn\): pip install 'graphshard\[serve\]'"
    ):
        require_extra()
    monkeypatch.undo()
    require_extra()


def test_options_and_tokens_are_checked(tmp_path):
    with pytest.raises(InputError, match="--host 0.0.0.0 is not a loopback address: give --token-file"):
        ServeOptions(host="0.0.0.0").check(2)
    ServeOptions(host="0.0.0.0", token_file="t").check(2)
    ServeOptions(host="::1").check(2)
    with pytest.raises(InputError, match=r"--fanouts \[5\]: give 2 counts"):
        replace(ServeOptions(), fanouts=[5]).check(2)
    (tmp_path / "short").write_text("abc\n")
    with pytest.raises(InputError, match="at least 16 printable"):
        read_token(str(tmp_path / "short"))
    with pytest.raises(InputError, match="cannot be read"):
        read_token(str(tmp_path / "missing"))
    (tmp_path / "t").write_text(f"{TOKEN}\n")
    assert read_token(str(tmp_path / "t")) == TOKEN


def test_answers_on_a_kept_alive_connection_do_not_wait_for_delayed_acks():
    """An answer's head and body go out at once (TCP_NODELAY), not 40 ms apart behind the client's delayed ACK."""
    with app() as (url, _), httpx.Client(timeout=30) as client:
        times = []
        for i in range(8):  # one connection, kept alive
            start = time.perf_counter()
            assert client.post(f"{url}/v1/predict", json={"nodes": [i]}).status_code == 200
            times.append(time.perf_counter() - start)
    assert statistics.median(times[1:]) < 0.02, times


def test_what_no_model_can_answer_is_a_4xx_not_a_500():
    """Values JSON carries but no float32 row holds, integers too long to parse, keys that are no valid Unicode,
    a body that does not arrive in time, outputs that are not finite."""
    raw = {
        b'{"new": {"features": {"feat": [1, 2, ' + b"9" * 400 + b"]}}}": (422, "new[0].features.feat[2]"),
        b'{"new": {"features": {"feat": [1, 2, 3.5e38]}}}': (422, "new[0].features.feat[2]"),
        b'{"new": {"features": {"feat": [1, 2, Infinity]}}}': (422, "new[0].features.feat[2]"),
        b'{"nodes": [' + b"1" * 5000 + b"]}": (400, None),
        rb'{"nodes": [1], "\ud800": 1}': (422, "\\ud800"),
    }

    def nan_rows(queries: list[Query]) -> list[np.ndarray]:
        return [np.full((q.size, 3), np.nan, dtype=np.float32) for q in queries]

    with app(timeout=1.0) as (url, _):
        for body, (status, field) in raw.items():
            r = httpx.post(f"{url}/v1/predict", content=body, timeout=30)
            assert r.status_code == status and r.json()["field"] == field, (body[:60], r.text)
        with socket.create_connection(("127.0.0.1", int(url.rsplit(":", 1)[1])), timeout=30) as slow:
            slow.sendall(b"POST /v1/predict HTTP/1.1\r\nHost: x\r\nContent-Length: 20\r\n\r\n{")  # and no more
            assert slow.recv(4096).split(b" ", 2)[1] == b"408"
    with app(nan_rows) as (url, _):
        r = httpx.post(f"{url}/v1/predict", json={"nodes": [1]}, timeout=30)
        assert r.status_code == 422 and "not finite" in r.json()["error"]
