"""Input commands: ``generate`` (synthetic datasets) and ``chunk`` (a dataset into the chunked format)."""

from __future__ import annotations

import argparse
import time
from typing import Any

from .common import (
    HelpFormatter,
    command,
    dataset_flag,
    disk_check_flag,
    out_flag,
    overwrite_flag,
    positive_int,
    seed_flag,
)


def run_generate(args: argparse.Namespace) -> None:
    from ..datasets import community_graph, hetero_graph, rmat_graph, save_dataset
    from ..format.outputs import check_output_dir

    start = time.perf_counter()
    if args.kind == "rmat" and args.chunked:
        from ..datasets.rmat_chunked import write_rmat_chunked

        meta = write_rmat_chunked(
            args.out,
            args.scale,
            args.edge_factor,
            args.feat_dim,
            num_chunks=args.num_chunks,
            seed=args.seed,
            num_classes=args.num_classes,
            overwrite=args.overwrite,
            check_disk=args.check_disk,
        )
        print(
            f"generated rmat (chunked, {args.num_chunks} chunks): {sum(meta.num_nodes.values()):,} nodes, "
            f"{sum(meta.num_edges.values()):,} edges in {time.perf_counter() - start:.1f} s -> {meta.path}"
        )
        return
    name = f"rmat{args.scale}" if args.kind == "rmat" else args.kind  # what the generator names its graph
    check_output_dir(args.out, "dataset", args.overwrite, graph=name)  # refuse before generating
    if args.kind == "rmat":
        ds = rmat_graph(args.scale, args.edge_factor, args.feat_dim, args.seed, num_classes=args.num_classes)
    elif args.kind == "community":
        ds = community_graph(
            args.nodes,
            args.classes,
            args.avg_degree,
            args.intra,
            feat_dim=args.feat_dim,
            noise=args.noise,
            seed=args.seed,
            targets=args.targets,
            edge_targets=args.edge_targets,
        )
    else:
        ds = hetero_graph(
            args.papers,
            args.authors,
            args.institutions,
            args.fields,
            num_classes=args.classes,
            feat_dim=args.feat_dim,
            noise=args.noise,
            seed=args.seed,
            targets=args.targets,
            edge_targets=args.edge_targets,
        )
    recorded = {k: v for k, v in vars(args).items() if k not in ("func", "parser", "required_flags")}
    out = save_dataset(ds, args.out, {"generator": recorded}, overwrite=args.overwrite)
    print(
        f"generated {args.kind}: {ds.graph.total_nodes:,} nodes, {ds.graph.total_edges:,} edges "
        f"in {time.perf_counter() - start:.1f} s -> {out}"
    )


def run_chunk(args: argparse.Namespace) -> None:
    from ..chunked.writer import chunk_graph
    from ..datasets import load_dataset

    ds = load_dataset(args.dataset)
    name = args.graph_name or "".join(c if c.isalnum() else "_" for c in ds.name)
    meta = chunk_graph(
        ds.graph,
        args.out,
        args.num_chunks,
        args.format,
        graph_name=name,
        feat_num_chunks=args.feat_num_chunks,
        overwrite=args.overwrite,
    )
    print(f"wrote chunked graph {name!r} ({args.format}, {args.num_chunks} chunks) -> {meta.path}")


def _generators(gen: argparse.ArgumentParser) -> None:
    gsub = gen.add_subparsers(dest="kind", required=True, metavar="KIND")
    r = command(gsub, "rmat", "R-MAT power-law graph (Graph500 parameters), symmetrised")
    r.add_argument("--scale", type=positive_int, required=True, help="2**SCALE nodes")
    r.add_argument("--edge-factor", type=positive_int, default=16, help="sampled edges per node")
    r.add_argument("--feat-dim", type=int, default=0, help="node feature dimension (0: none)")
    r.add_argument(
        "--chunked",
        action="store_true",
        help="write the chunked format directly, chunk by chunk, in "
        "memory that does not grow with the edges (sampled edges in both directions, duplicates kept)",
    )
    r.add_argument("--num-chunks", type=positive_int, default=8, help="--chunked: edge and node-data chunks")
    disk_check_flag(r)
    r.add_argument(
        "--num-classes",
        type=int,
        default=0,
        help="add label (argmax of the first NUM feature columns, "
        "so --feat-dim >= NUM) and random train/val/test masks (10/5/5 %%): what train needs (0: none)",
    )
    c = command(gsub, "community", "planted-community graph with label signal in structure and features")
    c.add_argument("--nodes", type=positive_int, default=20000, help="number of nodes")
    c.add_argument("--classes", type=positive_int, default=8, help="number of communities (label classes)")
    c.add_argument("--avg-degree", type=positive_int, default=16, help="average degree")
    c.add_argument("--intra", type=float, default=0.85, help="fraction of edges inside a community")
    c.add_argument("--feat-dim", type=positive_int, default=32, help="node feature dimension")
    c.add_argument("--noise", type=float, default=2.0, help="feature noise (higher = harder from features)")
    h = command(gsub, "hetero", "MAG-like heterogeneous graph (paper/author/institution/field)")
    for flag, default, text in (
        ("--papers", 20000, "paper nodes"),
        ("--authors", 8000, "author nodes"),
        ("--institutions", 200, "institution nodes"),
        ("--fields", 50, "field nodes"),
        ("--classes", 8, "paper classes"),
        ("--feat-dim", 32, "paper feature dimension"),
    ):
        h.add_argument(flag, type=positive_int, default=default, help=text)
    h.add_argument("--noise", type=float, default=2.0, help="feature noise (higher = harder from features)")
    for g in (c, h):
        g.add_argument(
            "--edge-targets",
            choices=["classes", "regression"],
            help="also label every edge (hetero: every paper:cites:paper edge), with splits, for train --task "
            "edge: its class (0 within a community, 1 from a lower to a higher one, 2 the other way), or a float "
            "(the product of the communities' values, plus noise)",
        )
        g.add_argument(
            "--targets",
            default="classes",
            choices=["classes", "regression", "multilabel"],
            help="what label holds: the community (class); a float per node (its community's value plus a "
            "share of its first feature); or one 0/1 column per class, the community's label set, 5%% flipped",
        )
    for g in (r, c, h):
        seed_flag(g)
        out_flag(g, "output dataset directory")
        overwrite_flag(g)
        g.set_defaults(func=run_generate)


def register(sub: Any) -> None:
    gen = sub.add_parser(
        "generate", help="write a synthetic dataset in the shared-data layout", formatter_class=HelpFormatter
    )
    _generators(gen)

    ch = command(sub, "chunk", "write a dataset in the chunked graph format (input of assign and dispatch)")
    dataset_flag(ch, "dataset directory in the shared-data layout (meta.json)")
    out_flag(ch, "output directory (metadata.json + chunks)")
    ch.add_argument("--num-chunks", type=positive_int, required=True, help="edge chunks per edge type")
    ch.add_argument("--feat-num-chunks", type=positive_int, help="chunks per node feature (default: --num-chunks)")
    ch.add_argument("--format", default="numpy", choices=["csv", "numpy", "parquet"], help="chunk file format")
    ch.add_argument("--graph-name", help="graph name (default: the dataset's name)")
    overwrite_flag(ch)
    ch.set_defaults(func=run_chunk)
