"""``graphshard serve`` across two emulated hosts under torchrun: rank 0 answers on its host's network address
with a bearer token; a stranger on a third host probing the ranks' own sockets gets nothing; when host 1's link
is cut, ``/healthz`` and the requests that need partition 1 answer 503 naming it within the heartbeat bound, and
the service goes on answering."""

from __future__ import annotations

import json
import shutil
import signal
import time
from pathlib import Path

import numpy as np

from graphshard.train import TrainOptions, train

from .jobs import PY, clean_env, probe, spread, start
from .test_train import FAST, _partitions

HEARTBEAT = 3.0
TOKEN = "cluster-serve-token-0123456789"
CLIENT = str(Path(__file__).with_name("serve_client.py"))


def _steps(proc) -> dict[str, dict]:
    return {s["step"]: s for s in (json.loads(ln) for ln in proc.output().splitlines() if ln.startswith("{"))}


def test_serving_across_hosts_names_the_partition_a_cut_link_took(cluster, tmp_path):
    config = _partitions(tmp_path)
    train(  # the reference: the same model's outputs, computed on this machine
        TrainOptions(
            part_config=str(config),
            epochs=1,
            checkpoint=str(tmp_path / "ckpt"),
            progress=False,
            save_embeddings=str(tmp_path / "e.npy"),
            **_fast(),
        ),
        num_procs=2,
    )
    c = cluster(3)  # host 2: a stranger on the same network
    mine = spread(config, c, [[0], [1], []])
    for i, h in enumerate(c.hosts[:2]):  # each host gets its own rank's checkpoint only
        (h.workdir / "ckpt").mkdir()
        shutil.copytree(tmp_path / "ckpt" / "best" / f"rank{i}", h.workdir / "ckpt" / f"rank{i}")
    (c.hosts[0].workdir / "token").write_text(TOKEN + "\n")
    address = c.hosts[0].address
    args = [
        "serve",
        "--part-config",
        mine,
        "--checkpoint",
        "ckpt",
        "--host",
        address,
        "--port",
        "8080",
        "--token-file",
        "token",
        "--heartbeat-timeout",
        str(HEARTBEAT),
        "--timeout",
        "60",
    ]
    service = start(c, args, hosts=2, name="serve")
    client = c.run(0, [PY, CLIENT, f"http://{address}:8080", TOKEN], clean_env(), name="client")
    deadline = time.monotonic() + 120
    while "answered" not in _steps(client):  # polling the client's output, against a deadline
        assert time.monotonic() < deadline and client.popen.poll() is None, client.tail() + service[0].tail()
        time.sleep(0.1)
    steps = _steps(client)
    assert steps["unauthorised"]["status"] == 401
    assert steps["answered"]["status"] == 200
    np.testing.assert_allclose(np.array(steps["answered"]["scores"]), np.load(tmp_path / "e.npy"), atol=1e-5)
    reports = probe(c, stranger=2, hosts=[0, 1], pwned=tmp_path / "pwned", skip=(8080,))  # the ranks' own sockets
    assert all(v == 0 for r in reports if r["proto"] == "tcp" for v in r["got"].values()), reports
    assert not (tmp_path / "pwned").exists()
    c.cut(1)
    (c.hosts[0].workdir / "cut").write_text("")
    assert client.wait(60) == 0, client.tail()
    steps = _steps(client)
    health, lost = steps["health"], steps["lost"]
    assert health["status"] == 503 and health["seconds"] < HEARTBEAT + 4, health
    (gone,) = health["body"]["lost"]
    assert (gone["rank"], gone["partition"]) == (1, 1) and "198.18.0.2" in gone["why"], gone
    assert lost["status"] == 503 and "partition 1 (rank 1) is lost" in lost["body"]["error"], lost
    assert lost["seconds"] < 2.0, lost
    assert service[0].popen.poll() is None  # still serving
    c.signal(0, signal.SIGINT, match="torch.distributed.run")  # SIGINT: rank 0 stops, naming the lost rank
    assert service[0].wait(60) != 0
    assert "lost rank 1 on host 198.18.0.2" in service[0].output(), service[0].tail()
    assert f"rank0: refused a channel connection from {c.hosts[2].address}" in service[0].output()
    c.kill(1)
    service[1].wait(60)


def _fast() -> dict:
    flags = dict(zip(FAST[::2], FAST[1::2]))
    return {
        "fanouts": [int(f) for f in flags["--fanouts"].split(",")],
        "batch_size": int(flags["--batch-size"]),
        "hidden": int(flags["--hidden"]),
    }
