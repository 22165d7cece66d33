"""A stranger on the run's network: a third emulated host on the same bridge probes every socket the ranks of a
2-host training run listen on (its channels, gloo and heartbeat) while it trains, and gets nothing served;
nothing is created, the run's result is the one it gives unprobed, and each rank names the stranger once."""

from __future__ import annotations

import time

from .jobs import finish, probe, spread, start
from .test_train import FAST, ONE_THREAD, _metrics, _partitions, _same_run


def test_a_stranger_gets_nothing_and_changes_nothing(cluster, tmp_path):
    c = cluster(3)
    config = _partitions(tmp_path)
    mine = spread(config, c, [[0], [1], []])
    train = ["train", "--part-config", mine, *FAST, "--epochs", "600", "--metrics-out", "metrics.json"]
    finish(start(c, train, hosts=2, name="unprobed", env=ONE_THREAD))
    unprobed = _metrics(c.hosts[0].workdir / "metrics.json")
    (c.hosts[0].workdir / "metrics.json").unlink()
    procs = start(c, train, hosts=2, name="probed", env=ONE_THREAD)
    deadline = time.monotonic() + 120
    while not (c.hosts[0].workdir / "metrics.json").exists() and time.monotonic() < deadline:
        time.sleep(0.1)  # polling for the first epoch's record (the channels are up by then), against a deadline
    pwned = tmp_path / "pwned"
    reports = probe(c, stranger=2, hosts=[0, 1], pwned=pwned)
    finish(procs)
    # every probe reached its port while the run was training (none refused: -1), and got nothing back
    assert all(v == 0 for r in reports if r["proto"] == "tcp" for v in r["got"].values()), reports
    assert not pwned.exists()
    _same_run(_metrics(c.hosts[0].workdir / "metrics.json"), unprobed)
    said = [ln for p in procs for ln in p.output().splitlines() if "refused a channel connection" in ln]
    assert said and all(c.hosts[2].address in ln for ln in said), said
    assert [sum(f"rank{r}: refused" in ln for ln in said) for r in (0, 1)] == [1, 1], said  # once by each rank


def test_hosts_given_different_secrets_are_refused_at_start_naming_each_other(cluster, tmp_path):
    c = cluster(2)
    mine = spread(_partitions(tmp_path), c, [[0], [1]])
    train = ["train", "--part-config", mine, *FAST, "--epochs", "1"]
    begun = time.monotonic()
    secrets = [{"GRAPHSHARD_SECRET": f"the secret of host {i}"} for i in range(2)]
    procs = start(c, train, name="secrets", env=ONE_THREAD, host_env=secrets)
    codes = [p.wait(60) for p in procs]
    assert all(codes) and time.monotonic() - begun < 40, [p.tail() for p in procs]  # start-up, then seconds
    for i, p in enumerate(procs):  # each names the other's channel address
        other = c.hosts[1 - i].address
        assert f"rank{1 - i} at {other}" in p.output() and "must be given the same secret" in p.output(), p.tail()
