"""Find a launcher's rank processes through ``/proc``: the children of its fork server (see
``graphshard.distributed.ranks.forkserver``), or, where ranks are spawned, its children that run multiprocessing's
``spawn_main``; and read a process's state there."""

from __future__ import annotations

from pathlib import Path


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def children(pid: int) -> list[int]:
    """The processes ``pid`` started (from any of its threads)."""
    kids: list[int] = []
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            kids += [int(c) for c in (task / "children").read_text().split()]
    except OSError:
        pass
    return kids


def stat_fields(pid: int) -> list[str]:
    """The fields of ``/proc/<pid>/stat`` after the command's name (the state first); [] once it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return []


def state(pid: int) -> str:
    """The process's state letter (``R``, ``S``, ``T`` stopped, ``Z`` exited, not yet reaped, ...), or ``"gone"``."""
    fields = stat_fields(pid)
    return fields[0] if fields else "gone"


def alive(pid: int) -> bool:
    """Whether ``pid`` is a process that has not exited (a zombie has)."""
    return state(pid) not in ("Z", "gone")


def _started_at(pid: int) -> tuple[int, int]:
    fields = stat_fields(pid)
    return (int(fields[19]) if len(fields) > 19 else 0), pid


def fork_server(launcher: int) -> int | None:
    """The launcher's fork server, once it has started one."""
    servers = [c for c in children(launcher) if "multiprocessing.forkserver" in _cmdline(c)]
    return servers[0] if servers else None


def rank_processes(launcher: int) -> list[int]:
    """The rank processes ``launcher`` started, in the order they were started (rank 0 first; both often
    start in one clock tick, then by PID)."""
    server = fork_server(launcher)
    ranks = children(server) if server is not None else []
    ranks += [c for c in children(launcher) if "spawn_main" in _cmdline(c)]
    return sorted(ranks, key=_started_at)
