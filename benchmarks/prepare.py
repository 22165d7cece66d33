"""Benchmark of ``graphshard prepare`` (issue 53): users' tables into a chunked graph, on both engines.

    python benchmarks/prepare.py --edges 10M,100M --engines local,spark
    python benchmarks/prepare.py --edges 10M --compare-local      # DuckDB against Polars' streaming engine

Makes (once, under --work) tables of E edges with string IDs: users (E/8, 4 numeric columns with 1 % missing,
1 categorical, a class label) and items (E/64, 4 numeric, 1 categorical) as node tables, and the edge table
(user ID, item ID, 4 numeric, 1 categorical), Parquet files of 5 M rows. Then runs ``graphshard prepare``
on each engine in a fresh process (Spark: ``local[2]``-style ``local[*]``): wall time, edges per second, peak
memory of the process tree (the sum of its processes' peak RSS: Spark's JVM included), peak disk above the
start, the output's size. ``--compare-local`` times the core of the job (IDs ranked, edges joined to both
ID maps, 4 numeric edge columns standardised, Parquet written) in DuckDB and in Polars, each in its own
process. Prints a table and writes JSON (machine named).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from partition import machine, peak_rss, write_result
from scale import watched

ROWS_PER_FILE = 5_000_000


def count(text: str) -> int:
    text = text.strip().upper()
    scale = {"K": 10**3, "M": 10**6, "G": 10**9}.get(text[-1:], 1)
    return int(float(text.rstrip("KMG")) * scale)


def _ids(prefix: str, values):
    import pyarrow as pa
    import pyarrow.compute as pc

    return pc.binary_join_element_wise(pa.scalar(prefix), pc.cast(pa.array(values), pa.string()), "")


def _numeric(rng, n: int, missing: float = 0.0) -> dict:
    import numpy as np

    cols = {}
    for k in range(4):
        x = rng.normal(k, 1 + k, n)
        if missing:
            x[rng.random(n) < missing] = np.nan
        cols[f"x{k}"] = x
    return cols


def make_tables(root: Path, edges: int, seed: int = 0, edge_rank_gauss: bool = False) -> Path:
    """The tables of ``edges`` edges (kept: made once per size) and their prepare config."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq
    import yaml

    config = root / "prepare.yaml"
    if config.is_file():
        return config_for(root, edge_rank_gauss)
    rng = np.random.default_rng(seed)
    users, items = edges // 8, edges // 64
    user_key, item_key = rng.permutation(users * 4)[:users], rng.permutation(items * 4)[:items]
    countries = np.array([f"c{k:02d}" for k in range(50)])
    for name, keys, prefix, extra in (("users", user_key, "user-", True), ("items", item_key, "item-", False)):
        (root / name).mkdir(parents=True, exist_ok=True)
        for i, lo in enumerate(range(0, keys.size, ROWS_PER_FILE)):
            part = keys[lo : lo + ROWS_PER_FILE]
            cols = {
                "id": _ids(prefix, part),
                **_numeric(rng, part.size, 0.01),
                "country": countries[rng.integers(0, 50, part.size)],
            }
            if extra:
                cols["label"] = rng.integers(0, 10, part.size)
            pq.write_table(pa.table(cols), root / name / f"part-{i:03d}.parquet")
    kinds = np.array([f"k{k:02d}" for k in range(20)])
    (root / "edges").mkdir(parents=True, exist_ok=True)
    for i, lo in enumerate(range(0, edges, ROWS_PER_FILE)):
        n = min(ROWS_PER_FILE, edges - lo)
        cols = {
            "user": _ids("user-", user_key[rng.integers(0, users, n)]),
            "item": _ids("item-", item_key[rng.integers(0, items, n)]),
            **_numeric(rng, n),
            "kind": kinds[rng.integers(0, 20, n)],
        }
        pq.write_table(pa.table(cols), root / "edges" / f"part-{i:03d}.parquet")
    # nodes: the four numeric transforms fitted to statistics or to ranks; edges: rank_gauss only with
    # --edge-rank-gauss (it sorts every edge: measured apart)
    numeric = [{"column": f"x{k}", "transform": t} for k, t in enumerate(["standard", "min_max", "rank_gauss", "none"])]
    bucket = {"column": "x2", "transform": "bucket", "buckets": [0.0, 1.0, 2.0, 3.0, 4.0]}
    edge_numeric = numeric if edge_rank_gauss else [*numeric[:2], bucket, numeric[3]]
    node = lambda t, path, label: {  # noqa: E731
        "type": t,
        "path": f"{path}/*.parquet",
        "id": "id",
        "features": [*numeric, {"column": "country", "transform": "categorical"}],
        **({"label": {"column": "label", "kind": "classification"}} if label else {}),
    }
    spec = {
        "graph_name": "shop",
        "nodes": [node("user", "users", True), node("item", "items", False)],
        "edges": [
            {
                "type": ["user", "buys", "item"],
                "path": "edges/*.parquet",
                "source": "user",
                "destination": "item",
                "features": [*edge_numeric, {"column": "kind", "transform": "categorical"}],
            }
        ],
    }
    config.write_text(yaml.safe_dump(json.loads(json.dumps(spec))))
    return config_for(root, edge_rank_gauss)


def config_for(tables: Path, edge_rank_gauss: bool) -> Path:
    """The tables' config, with or without rank_gauss on an edge column."""
    import yaml

    spec = yaml.safe_load((tables / "prepare.yaml").read_text())
    features = spec["edges"][0]["features"]
    features[2] = (
        {"column": "x2", "transform": "rank_gauss"}
        if edge_rank_gauss
        else {"column": "x2", "transform": "bucket", "buckets": [0.0, 1.0, 2.0, 3.0, 4.0]}
    )
    path = tables / ("prepare-edge-rank-gauss.yaml" if edge_rank_gauss else "prepare-default.yaml")
    path.write_text(yaml.safe_dump(json.loads(json.dumps(spec))))  # no YAML aliases
    return path


def du(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) if path.exists() else 0


def run_prepare(config: Path, out: Path, engine: str, memory: str | None, log: Path) -> dict:
    shutil.rmtree(out, ignore_errors=True)
    cmd = [sys.executable, "-m", "graphshard.cli", "prepare", str(config), "--out", str(out), "--engine", engine]
    cmd += ["--memory", memory] if memory else []
    res = watched(cmd, log, out.parent, shutil.disk_usage(out.parent).used)
    if res["returncode"] != 0:
        raise RuntimeError(f"{engine} failed:\n{log.read_text()[-3000:]}")
    res["peak_memory"] = sum(res["peak_rss"])
    res["output_bytes"] = du(out)
    return res


# -- DuckDB against Polars on the core of the job ---------------------------------------------------------------


def core_duckdb(tables: Path, out: Path, memory: str) -> None:
    import duckdb

    con = duckdb.connect(config={"memory_limit": memory, "temp_directory": str(out / "spill")})
    con.execute("SET preserve_insertion_order = false")
    for t in ("users", "items"):
        con.execute(
            f"CREATE TABLE m_{t} AS SELECT id, row_number() OVER (ORDER BY id) - 1 AS nid "
            f"FROM read_parquet('{tables}/{t}/*.parquet')"
        )
    e = f"read_parquet('{tables}/edges/*.parquet')"
    stats = con.execute(f"SELECT {', '.join(f'AVG(x{k}), STDDEV_POP(x{k})' for k in range(4))} FROM {e}").fetchone()
    scaled = ", ".join(f"(e.x{k} - {stats[2 * k]}) / {stats[2 * k + 1]} AS x{k}" for k in range(4))
    con.execute(
        f"COPY (SELECT a.nid AS src, b.nid AS dst, {scaled} FROM {e} AS e JOIN m_users AS a ON e.user = a.id "
        f"JOIN m_items AS b ON e.item = b.id) TO '{out}/edges' (FORMAT parquet, FILE_SIZE_BYTES '256MB')"
    )


def core_polars(tables: Path, out: Path) -> None:
    import polars as pl

    maps = {}
    for t in ("users", "items"):
        path = out / f"m_{t}.parquet"
        pl.scan_parquet(f"{tables}/{t}/*.parquet").select("id").sort("id").with_row_index("nid").sink_parquet(path)
        maps[t] = pl.scan_parquet(path)
    e = pl.scan_parquet(f"{tables}/edges/*.parquet")
    stats = (
        e.select(
            [pl.col(f"x{k}").mean().alias(f"m{k}") for k in range(4)]
            + [pl.col(f"x{k}").std(ddof=0).alias(f"s{k}") for k in range(4)]
        )
        .collect(engine="streaming")
        .row(0)
    )
    scaled = [((pl.col(f"x{k}") - stats[k]) / stats[4 + k]).alias(f"x{k}") for k in range(4)]
    joined = (
        e.join(maps["users"].rename({"nid": "src"}), left_on="user", right_on="id")
        .join(maps["items"].rename({"nid": "dst"}), left_on="item", right_on="id")
        .select(["src", "dst", *scaled])
    )
    joined.sink_parquet(out / "edges.parquet", engine="streaming")


def compare_local(args, tables: Path, work: Path, log: Path) -> list[dict]:
    rows = []
    for engine in ("duckdb", "polars") * args.repeat:
        out = work / f"core-{engine}"
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir(parents=True)
        cmd = [sys.executable, __file__, "--child", engine, "--tables", str(tables), "--out", str(out)]
        cmd += ["--memory", args.memory or "2.5GB"]
        res = watched(cmd, log, work, shutil.disk_usage(work).used)
        if res["returncode"] != 0:
            raise RuntimeError(f"{engine} failed:\n{log.read_text()[-3000:]}")
        rows.append({"engine": engine, "seconds": res["seconds"], "peak_memory": sum(res["peak_rss"])})
        shutil.rmtree(out, ignore_errors=True)
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--edges", default="10M", help="comma-separated edge counts (e.g. 10M,100M)")
    p.add_argument("--engines", default="local,spark")
    p.add_argument("--memory", help="the engine's memory (--memory of prepare; default: prepare's, per engine)")
    p.add_argument("--repeat", type=int, default=1, help="runs per engine, interleaved (A B A B)")
    p.add_argument("--compare-local", action="store_true", help="DuckDB against Polars on the job's core")
    p.add_argument("--edge-rank-gauss", action="store_true", help="rank_gauss on an edge column too (sorts every edge)")
    p.add_argument("--work", type=Path, default=Path("/tmp/graphshard-bench-prepare"))
    p.add_argument("--json", type=Path, default=Path("bench-out/prepare.json"))
    p.add_argument("--child", help=argparse.SUPPRESS)
    p.add_argument("--tables", type=Path, help=argparse.SUPPRESS)
    p.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        start = time.perf_counter()
        core_duckdb(args.tables, args.out, args.memory) if args.child == "duckdb" else core_polars(
            args.tables, args.out
        )
        print(json.dumps({"seconds": time.perf_counter() - start, "peak_rss": peak_rss()}))
        return
    result: dict = {"machine": machine(), "runs": [], "core": []}
    print("| edges | engine | seconds | M edges/s | peak memory GiB | peak disk GiB | output GiB |")
    print("|---:|---|---:|---:|---:|---:|---:|")
    for size in args.edges.split(","):
        edges = count(size)
        tables = args.work / f"tables-{size}"
        t0 = time.perf_counter()
        config = make_tables(tables, edges, edge_rank_gauss=args.edge_rank_gauss)
        made = time.perf_counter() - t0
        log = args.work / "run.log"
        if args.compare_local:
            for row in compare_local(args, tables, args.work, log):
                row["edges"] = edges
                result["core"].append(row)
                rate, peak = edges / row["seconds"] / 1e6, row["peak_memory"] / 2**30
                print(f"| {size} | core: {row['engine']} | {row['seconds']:.1f} | {rate:.2f} | {peak:.2f} | | |")
            continue
        for engine in args.engines.split(",") * args.repeat:
            res = run_prepare(config, args.work / f"out-{size}-{engine}", engine, args.memory, log)
            row = {
                "edges": edges,
                "engine": engine,
                "edge_rank_gauss": args.edge_rank_gauss,
                "tables_made_s": made,
                **res,
            }
            result["runs"].append(row)
            gib = [res[k] / 2**30 for k in ("peak_memory", "peak_disk", "output_bytes")]
            rate = edges / res["seconds"] / 1e6
            cells = [size, engine, f"{res['seconds']:.1f}", f"{rate:.2f}", *(f"{g:.2f}" for g in gib)]
            print("| " + " | ".join(cells) + " |")
            shutil.rmtree(args.work / f"out-{size}-{engine}", ignore_errors=True)
    write_result(args.json, result)


if __name__ == "__main__":
    main()
