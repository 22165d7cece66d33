"""Launcher environments: torchrun's names are filled in from srun's, Slurm host lists are read as Slurm
writes them, and what is missing or malformed is named."""

from __future__ import annotations

import pytest

from graphshard.distributed.host.environment import adopt_launcher_env, first_host, launcher, tasks_per_node
from graphshard.distributed.ranks.context import DistError


@pytest.mark.parametrize(
    "nodelist, first",
    [
        ("node07", "node07"),
        ("node[07-09,12]", "node07"),
        ("gpu[3,1]-a,cpu1", "gpu3-a"),
        ("rack[2-3]-n[001-004],login", "rack2-n001"),
        ("10.0.0.5,10.0.0.6", "10.0.0.5"),
    ],
)
def test_first_host_of_a_slurm_host_list(nodelist, first):
    assert first_host(nodelist) == first


def test_tasks_per_node_expands_slurms_counts():
    assert tasks_per_node("2(x3),1") == [2, 2, 2, 1]
    assert tasks_per_node("4") == [4]
    with pytest.raises(DistError, match=r"SLURM_TASKS_PER_NODE '2\(x' is not"):
        tasks_per_node("2(x")


def _srun(**extra: str) -> dict[str, str]:
    return {
        "SLURM_PROCID": "3",
        "SLURM_NTASKS": "4",
        "SLURM_LOCALID": "1",
        "SLURM_NODEID": "1",
        "SLURM_JOB_NODELIST": "cn[012-013]",
        "SLURM_TASKS_PER_NODE": "2(x2)",
        "SLURM_JOB_ID": "123456",
    } | extra


def test_ntasks_per_node_is_one_count_for_every_node():
    """``srun --ntasks-per-node=1`` on 2 nodes sets SLURM_NTASKS_PER_NODE=1 (not a per-node list): the task on
    the second node has one local rank, as Slurm documents, instead of failing on node index 1."""
    env = _srun(SLURM_PROCID="1", SLURM_NTASKS="2", SLURM_LOCALID="0", SLURM_NODEID="1", SLURM_NTASKS_PER_NODE="1")
    del env["SLURM_TASKS_PER_NODE"]
    adopt_launcher_env(env)
    assert (env["RANK"], env["WORLD_SIZE"], env["LOCAL_WORLD_SIZE"], env["GROUP_RANK"]) == ("1", "2", "1", "1")
    both = _srun(SLURM_NTASKS_PER_NODE="3")  # the per-node list wins where Slurm sets both
    adopt_launcher_env(both)
    assert both["LOCAL_WORLD_SIZE"] == "2"
    bad = _srun(SLURM_NTASKS_PER_NODE="x")
    del bad["SLURM_TASKS_PER_NODE"]
    with pytest.raises(DistError, match="SLURM_NTASKS_PER_NODE"):
        adopt_launcher_env(bad)


def test_srun_environment_becomes_torchruns():
    env = _srun()
    assert adopt_launcher_env(env) == "slurm"
    assert {
        k: env[k]
        for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR", "MASTER_PORT")
    } == {
        "RANK": "3",
        "WORLD_SIZE": "4",
        "LOCAL_RANK": "1",
        "LOCAL_WORLD_SIZE": "2",
        "GROUP_RANK": "1",
        "MASTER_ADDR": "cn012",
        "MASTER_PORT": str(20000 + 3456),
    }
    assert launcher(env) == "env"  # RANK is set now: a second call leaves it alone


def test_given_master_wins_and_other_launchers_are_left_alone():
    env = _srun(MASTER_ADDR="10.1.1.1", MASTER_PORT="29400")
    adopt_launcher_env(env)
    assert (env["MASTER_ADDR"], env["MASTER_PORT"]) == ("10.1.1.1", "29400")
    torchrun = {"RANK": "0", "WORLD_SIZE": "2", "TORCHELASTIC_RUN_ID": "x", "SLURM_PROCID": "5", "SLURM_NTASKS": "8"}
    assert adopt_launcher_env(torchrun) == "torchrun" and torchrun["RANK"] == "0"  # srun torchrun ...: torchrun's
    assert launcher({}) == "none"


@pytest.mark.parametrize(
    "drop, change, message",
    [
        ("SLURM_JOB_NODELIST", {}, "set MASTER_ADDR or SLURM_JOB_NODELIST"),
        ("SLURM_JOB_ID", {}, "SLURM_JOB_ID is not set"),
        (None, {"SLURM_PROCID": "x"}, "SLURM_PROCID is 'x'"),
        (None, {"SLURM_NODEID": "5"}, "lists 2 nodes; SLURM_NODEID is 5"),
    ],
)
def test_bad_srun_environments_name_the_variable(drop, change, message):
    env = _srun(**change)
    env.pop(drop, None)
    with pytest.raises(DistError, match=message):
        adopt_launcher_env(env)
