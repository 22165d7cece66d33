"""All-node outputs: layer-wise inference against mini-batches over every in-edge (issue 12), on the
generated community graph, 2 processes × 2 METIS partitions, one training epoch each. Prints a table and
writes JSON (with the machine's description).

    python benchmarks/inference.py --nodes 200000 --avg-degree 20
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from partition import machine


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=200_000)
    ap.add_argument("--avg-degree", type=int, default=20)
    ap.add_argument("--procs", type=int, default=2)
    ap.add_argument("--out", type=Path, default=Path("bench-out/inference.json"))
    args = ap.parse_args()
    from graphshard.datasets import community_graph, save_dataset
    from graphshard.train import TrainOptions, train

    data = Path(f"bench-out/comm{args.nodes // 1000}k-d{args.avg_degree}")
    if not (data / "meta.json").is_file():
        save_dataset(community_graph(num_nodes=args.nodes, avg_degree=args.avg_degree, seed=0), data)
    rows = []
    for path, fanouts in (("layer-wise", None), ("sampled, fanout -1", [-1, -1])):
        emb = Path(f"bench-out/inference-{'sampled' if fanouts else 'layerwise'}.npy")
        start = time.perf_counter()
        m = train(
            TrainOptions(epochs=1, eval_every=0, eval_fanouts=fanouts, save_embeddings=str(emb), progress=False),
            num_procs=args.procs,
            dataset=str(data),
            work_dir="bench-out/inference-work",
        )
        rows.append(
            {
                "path": path,
                "inference_s": m["inference_s"],
                "epoch_s": m["epochs"][0]["wall_s"],
                "end_to_end_s": time.perf_counter() - start,
                "test_acc": m["test_acc"],
            }
        )
    print(f"{'outputs':<20} {'all-node outputs s':>18} {'x epoch':>8} {'end to end s':>12} {'test acc':>8}")
    for r in rows:
        print(
            f"{r['path']:<20} {r['inference_s']:>18.2f} {r['inference_s'] / r['epoch_s']:>8.2f} "
            f"{r['end_to_end_s']:>12.1f} {r['test_acc']:>8.4f}"
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps({"machine": machine(), "args": {**vars(args), "out": str(args.out)}, "rows": rows}, indent=1)
    )
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
