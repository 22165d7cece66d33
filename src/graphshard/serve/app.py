"""The HTTP side of ``graphshard serve``: a Starlette application (ASGI, run by uvicorn) with

- ``POST /v1/predict``: class scores and the predicted class of nodes (node classification checkpoints), or
  the scores of node pairs (link prediction checkpoints);
- ``POST /v1/embed``: the model's output rows of nodes (for link prediction, the encoder's);
- ``GET /healthz``: 200 while every rank is alive, 503 naming the lost ones;
- ``GET /metrics``: Prometheus text.

Every answer is JSON; an error is ``{"error": message, "field": the request field at fault or null}`` with a
4xx status for what the client sent (400 no JSON object, 401 no or a wrong bearer token, 404 unknown node or
path, 405 method, 408 a body that did not arrive in time, 413 too large, 422 a field of the wrong kind or
size) and 503 for what the service cannot do now (queue full, a lost rank, not answered in time). The
request handlers only parse, queue and render: the model runs in the micro-batcher's thread
(:mod:`.batching`)."""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import time
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass, field
from typing import Any

import numpy as np
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from .batching import MicroBatcher, Overloaded
from .metrics import Metrics
from .names import NodeNames
from .queries import GraphFacts, Limits, Query, RequestError, parse_query

log = logging.getLogger(__name__)


class Unavailable(Exception):
    """The service cannot answer now (HTTP 503): a lost rank the request needs, or no answer in time."""


@dataclass
class Service:
    """What the handlers need: the batcher, the graph facts and limits for the checks, the class count (None:
    the model predicts links), ``health()`` (the lost ranks, each with its
    line; empty when all are alive), how an error becomes a 503 line (``unavailable``: None when it is no
    such error), the bearer token (None: none asked), the body limit, how long a request may wait, and the
    ranks (for ``/healthz``)."""

    batcher: MicroBatcher
    facts: GraphFacts
    limits: Limits
    classes: int | None
    _: KW_ONLY
    health: Callable[[], list[dict[str, Any]]]
    unavailable: Callable[[BaseException], str | None]
    metrics: Metrics
    token: str | None = None
    max_body: int = 4 << 20
    timeout: float = 30.0
    ranks: list[dict[str, Any]] = field(default_factory=list)  # rank, partition, host, pid of every rank
    label_kind: str = "classification"  # of a node task: what its predictions are (train.labels)
    names: NodeNames | None = None  # the users' IDs of the nodes (serve --id-map)


def build_app(service: Service) -> Any:
    """The ASGI application answering for ``service`` (Starlette's routes behind the bearer-token guard)."""

    async def predict(request: Request) -> Response:
        return await _answer(service, request, "predict")

    async def embed(request: Request) -> Response:
        return await _answer(service, request, "embed")

    async def healthz(request: Request) -> Response:
        lost = service.health()
        service.metrics.lost_ranks.set(len(lost))
        if lost:
            return JSONResponse({"status": "unavailable", "lost": lost}, 503)
        return JSONResponse({"status": "ok", "ranks": service.ranks})

    async def metrics(request: Request) -> Response:
        service.metrics.queue_depth.set(service.batcher.depth())
        service.metrics.lost_ranks.set(len(service.health()))
        return Response(service.metrics.text(), media_type=service.metrics.content_type)

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        return JSONResponse({"error": exc.detail, "field": None}, exc.status_code, headers=exc.headers)

    routes = [
        Route("/v1/predict", predict, methods=["POST"]),
        Route("/v1/embed", embed, methods=["POST"]),
        Route("/healthz", healthz, methods=["GET"]),
        Route("/metrics", metrics, methods=["GET"]),
    ]
    app = Starlette(routes=routes, exception_handlers={HTTPException: http_error})
    return _Guard(app, service.token)


async def _answer(service: Service, request: Request, kind: str) -> Response:
    start = time.perf_counter()
    response: Response
    try:
        body = await _body(request, service.max_body, service.timeout)
        if service.names is not None:
            body = service.names.request(body, service.facts)
        query = parse_query(body, kind, service.facts, service.limits)
        rows = await _rows(service, query)
        answer = _render(kind, query, rows, service.label_kind, edges=service.facts.pair_etype)
        response = JSONResponse(answer if service.names is None else service.names.answer(answer, service.facts))
    except RequestError as exc:
        response = JSONResponse(exc.body(), exc.status)
    except Overloaded as exc:
        response = JSONResponse({"error": str(exc), "field": None}, 503, headers={"Retry-After": "1"})
    except Unavailable as exc:
        response = JSONResponse({"error": str(exc), "field": None}, 503, headers={"Retry-After": "5"})
    except ClientDisconnect:  # the client left before its body arrived: nobody to answer
        response = Response(status_code=499)
    except Exception:  # nothing a client sends may take the service down: log it, answer, go on
        log.exception("request to /v1/%s failed", kind)
        response = JSONResponse({"error": "internal error (logged by the service's rank 0)", "field": None}, 500)
    endpoint = f"/v1/{kind}"
    service.metrics.requests.labels(endpoint, str(response.status_code)).inc()
    service.metrics.latency.labels(endpoint).observe(time.perf_counter() - start)
    return response


async def _body(request: Request, limit: int, within: float) -> Any:
    """The request's JSON, read at most ``limit`` bytes far (413 beyond) and within ``within`` seconds (408)."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise RequestError(413, f"the request body has {int(declared)} bytes, more than the {limit} accepted")
    try:
        raw = await asyncio.wait_for(_read(request, limit), within)
    except asyncio.TimeoutError:
        raise RequestError(408, f"the request body did not arrive within {within:g} s") from None
    try:
        return json.loads(raw)
    except json.JSONDecodeError as exc:
        raise RequestError(
            400, f"the request body is not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        ) from None
    except (ValueError, RecursionError):  # not UTF-8 text, an integer of too many digits, nested too deep
        raise RequestError(400, "the request body is not JSON this service reads (UTF-8, nested < 1000)") from None


async def _read(request: Request, limit: int) -> bytes:
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise RequestError(413, f"the request body is longer than the {limit} bytes accepted")
        chunks.append(chunk)
    return b"".join(chunks)


async def _rows(service: Service, query: Query) -> np.ndarray:
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()

    def done(result: Any) -> None:
        loop.call_soon_threadsafe(_settle, future, result)

    service.batcher.submit(query, done, time.monotonic() + service.timeout)
    try:
        result = await asyncio.wait_for(future, service.timeout)
    except asyncio.TimeoutError:
        raise Unavailable(f"not answered within {service.timeout:g} s") from None
    if isinstance(result, BaseException):
        why = service.unavailable(result)
        if why is not None:
            raise Unavailable(why) from result
        raise result
    return result


def _settle(future: asyncio.Future[Any], result: Any) -> None:
    if not future.done():  # a request that timed out has gone
        future.set_result(result)


def _render(
    kind: str, query: Query, rows: np.ndarray, label_kind: str = "classification", *, edges: str | None = None
) -> dict[str, Any]:
    """The answer's JSON: ``edges``, an edge task's edge type (its pairs are labelled edges)."""
    if not np.isfinite(rows).all():  # JSON has no NaN: say so rather than fail to encode
        raise RequestError(422, "the model's output for these nodes is not finite (features far out of range?)")
    if query.pairs is not None and edges is not None:  # an edge task's labelled edges
        return {"edges": query.pairs.T.tolist(), "type": edges, "stale": query.stale} | predictions(rows, label_kind)
    if query.pairs is not None:
        probability = 1.0 / (1.0 + np.exp(-rows.astype(np.float64)))
        pairs = query.pairs.T.tolist()
        return {"pairs": pairs, "stale": query.stale, "scores": rows.tolist(), "probabilities": probability.tolist()}
    nodes: list[Any] = query.ids.tolist() if not query.new else [None] * len(query.new)
    head = {"type": query.ntype, "nodes": nodes, "stale": query.stale}
    if kind == "embed":
        return head | {"embeddings": rows.tolist()}
    return head | predictions(rows, label_kind)


def predictions(rows: np.ndarray, label_kind: str) -> dict[str, Any]:
    """What a prediction answers for outputs ``rows``: classification, the class with the highest score (and the
    scores); multi-label, the labels whose probability passes 0.5 (and the probabilities and scores);
    regression, the predicted values (one number per item for one target column)."""
    if label_kind == "regression":
        return {"predictions": (rows[:, 0] if rows.ndim == 2 and rows.shape[1] == 1 else rows).tolist()}
    if label_kind == "multilabel":
        probability = 1.0 / (1.0 + np.exp(-rows.astype(np.float64)))
        at, labels = np.nonzero(rows > 0)
        bounds = np.cumsum(np.bincount(at, minlength=rows.shape[0]))[:-1]
        chosen = [c.tolist() for c in np.split(labels, bounds)] if rows.shape[0] else []
        return {"predictions": chosen, "probabilities": probability.tolist(), "scores": rows.tolist()}
    return {"predictions": rows.argmax(axis=1).tolist() if rows.shape[0] else [], "scores": rows.tolist()}


class _Guard:
    """ASGI middleware: a bearer token on every request when ``token`` is set (401 otherwise)."""

    def __init__(self, app: Any, token: str | None):
        self.app, self.token = app, token

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] == "http" and self.token is not None and not self._allowed(scope):
            response = JSONResponse(
                {"error": "a bearer token is required (Authorization: Bearer <token>)", "field": None},
                401,
                headers={"WWW-Authenticate": "Bearer"},
            )
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)

    def _allowed(self, scope: dict) -> bool:
        assert self.token is not None
        for name, value in scope.get("headers", []):
            if name == b"authorization":
                return hmac.compare_digest(value, f"Bearer {self.token}".encode())
        return False
