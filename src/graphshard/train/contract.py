"""The data a run reads, checked against the partition config before any process starts: the number of
processes against the partitions, the feature, label and split-mask names (defaults resolved: ``feat`` or
``x``, ``label`` or ``y``, as ``Graph.from_pyg`` names them), the node type to classify and the edge type
to predict. A name the partitions lack is an error listing what they hold; node types without features
(which get learnt input embeddings) are announced."""

from __future__ import annotations

import logging
from dataclasses import replace

from ..distributed.stores.partitions import stored_per_process
from ..errors import InputError
from ..format.config import PartitionConfig, read_config
from ..graph import etype_str, parse_etype
from ..models.registry import BUILTIN, check_kind, is_custom, load_factory, reads_edge_features
from ..tasks.labels import kind_of
from ..tasks.link_split import open_link_split, require_link_split
from ..tasks.losses import chosen_loss
from ..tasks.metrics import chosen_metrics
from ..tasks.multitask import task_specs, with_tasks
from ..tasks.options import TrainOptions

notice = logging.getLogger("graphshard.notice")  # shown at the default log level
FEATURE_NAMES = ("feat", "x")
LABEL_NAMES = ("label", "y")
Held = dict[str, dict[str, tuple[str, tuple[int, ...]]]]  # node type -> data name -> (dtype code, row shape)


def held_data(cfg: PartitionConfig) -> Held:
    """The node data of every node type, from the config's feature schema."""
    out: Held = {t: {} for t in cfg.ntypes}
    for key, spec in cfg.feature_schema.get("node_feats", {}).items():
        ntype, name = key.rsplit("/", 1)
        out.setdefault(ntype, {})[name] = spec
    return out


def describe(held: Held, types: list[str] | None = None) -> str:
    """``paper: feat (F32 x 128), label (I64); author: no node data``."""

    def one(t: str) -> str:
        items = [f"{n} ({d}{' x ' + 'x'.join(map(str, s)) if s else ''})" for n, (d, s) in sorted(held[t].items())]
        return f"{t}: {', '.join(items) if items else 'no node data'}"

    return "; ".join(one(t) for t in (types or list(held)))


def _pick(given: str | None, defaults: tuple[str, ...], present: set[str]) -> str:
    return given or next((n for n in defaults if n in present), defaults[0])


def _target(opts: TrainOptions, cfg: PartitionConfig, held: Held, label: str | None) -> str:
    types = list(cfg.ntypes)
    if opts.target:
        if opts.target not in held:
            raise InputError(f"{cfg.path}: target node type {opts.target!r} is not in the graph (types: {types})")
        return opts.target
    if len(types) == 1:
        return types[0]
    names = [label] if label else list(LABEL_NAMES)
    labelled = [t for t in types if any(n in held[t] for n in names)]
    if len(labelled) != 1:
        way = "choose one with --target" if labelled else "name the labels with --label, or use --task link"
        raise InputError(
            f"{cfg.path}: node types with labels {names}: {labelled}; {way} (the partitions hold {describe(held)})"
        )
    return labelled[0]


def _check_node_data(opts: TrainOptions, cfg: PartitionConfig, held: Held, target: str, *, label: str) -> None:
    have = held[target]
    missing = [n for n in [label, *opts.split_masks] if n not in have]
    if missing:
        raise InputError(
            f"{cfg.path}: node type {target!r} has no {', '.join(map(repr, missing))} (it holds "
            f"{describe(held, [target]).split(': ', 1)[1]}); name its data with --label and "
            "--split-masks, or learn from the edges alone with --task link (link prediction needs no labels)"
        )
    code, shape = have[label]
    _label_kind(opts, f"{cfg.path}: label {label!r} of {target!r} ({code} of row shape {list(shape)})", have[label])
    _check_masks(cfg, have, opts.split_masks, repr(target), item="node")


def _label_kind(opts: TrainOptions, what: str, held: tuple[str, tuple[int, ...]], item: str = "node") -> str:
    """The kind of a label ``held`` (dtype code, row shape), named ``what`` in errors, checked to have the
    metrics and loss asked; one boolean per ``item`` is refused (a mask)."""
    code, shape = held
    if code == "BOOL" and not shape:
        raise InputError(f"{what}: one boolean per {item} is a mask, not labels (classes are integers)")
    kind = kind_of(code[0] in "IU" or code == "BOOL", tuple(shape), opts.label_kind, what)
    chosen_metrics(opts.metric, kind)
    chosen_loss(opts.loss, kind)
    return kind


def _check_masks(cfg: PartitionConfig, have: dict, names: list[str], owner: str, *, item: str) -> None:
    """The split masks ``names`` of ``owner`` (held as ``have``) are one boolean per ``item``."""
    for name in names:
        code, shape = have[name]
        if code not in ("BOOL", "U8", "I8") or shape not in ((), (1,)):
            raise InputError(
                f"{cfg.path}: split mask {name!r} of {owner} must be one boolean per {item}, got "
                f"{code} of row shape {list(shape)}"
            )


def held_edge_data(cfg: PartitionConfig) -> Held:
    """The edge data of every edge type (``src:rel:dst``), from the config's feature schema."""
    out: Held = {t: {} for t in cfg.etypes}
    for key, spec in cfg.feature_schema.get("edge_feats", {}).items():
        etype, name = key.rsplit("/", 1)
        out.setdefault(etype, {})[name] = spec
    return out


def _check_edge_data(opts: TrainOptions, cfg: PartitionConfig) -> tuple[str, str]:
    """The edge type whose labels ``--task edge`` learns and the label's name, checked: the label and split
    masks are there, the label's kind has the metrics, loss and decoder asked."""
    held = held_edge_data(cfg)
    names = [opts.label] if opts.label else list(LABEL_NAMES)
    if opts.edge_type:
        et = etype_str(parse_etype(opts.edge_type))
        if et not in held:
            raise InputError(f"{cfg.path}: edge type {et!r} is not in the graph (edge types: {sorted(held)})")
    else:
        labelled = [t for t in held if any(n in held[t] for n in names)]
        if len(labelled) != 1:
            raise InputError(
                f"{cfg.path}: edge types with labels {names}: {labelled or 'none'}; "
                + (
                    "choose one with --edge-type"
                    if labelled
                    else "an edge task needs edge labels (see the dataset layout)"
                )
            )
        et = labelled[0]
    have = held[et]
    label = _pick(opts.label, LABEL_NAMES, set(have))
    missing = [n for n in [label, *opts.split_masks] if n not in have]
    if missing:
        raise InputError(
            f"{cfg.path}: edge type {et!r} has no {', '.join(map(repr, missing))} (it holds "
            f"{', '.join(sorted(have)) or 'no edge data'}); name its data with --label and --split-masks"
        )
    code, shape = have[label]
    what = f"{cfg.path}: label {label!r} of edge type {et!r} ({code} of row shape {list(shape)})"
    kind = _label_kind(opts, what, have[label], "edge")
    if opts.edge_decoder == "dot" and (kind != "regression" or tuple(shape) not in ((), (1,))):
        raise InputError(f"{what}: --edge-decoder dot gives one number per edge: use concat or distmult")
    _check_masks(cfg, have, opts.split_masks, f"edge type {et!r}", item="edge")
    return et, label


def _check_link(opts: TrainOptions, cfg: PartitionConfig, held: Held) -> None:
    et = open_link_split(require_link_split(opts)).etype  # the header alone
    if etype_str(et) not in cfg.etypes:
        raise InputError(
            f"{opts.link_split}: held-out edges of type {etype_str(et)!r}, which {cfg.path} does not "
            f"have (edge types: {sorted(cfg.etypes)})"
        )
    if opts.negatives == "hard" and opts.hard_negatives is None and et[0] != et[2]:
        raise InputError(
            f"--negatives hard draws a destination's neighbours as negatives: edge type {etype_str(et)!r} joins two "
            "node types, so its destination's in-neighbours are no destinations (give them: --hard-negatives; or use "
            "in-batch or joint)"
        )
    hard = held_edge_data(cfg).get(etype_str(et), {}).get(opts.hard_negatives or "")
    if opts.hard_negatives is not None and (hard is None or hard[0][0] not in "IU" or len(hard[1]) > 1):
        raise InputError(
            f"{cfg.path}: --hard-negatives {opts.hard_negatives!r}: edge type {etype_str(et)!r} has no such edge "
            f"data of integer node IDs, one row per edge (it holds "
            f"{', '.join(sorted(held_edge_data(cfg).get(etype_str(et), {}))) or 'none'})"
        )
    if opts.edge_weight is not None and opts.edge_weight not in held_edge_data(cfg).get(etype_str(et), {}):
        raise InputError(
            f"{cfg.path}: --edge-weight {opts.edge_weight!r}: edge type {etype_str(et)!r} has no such edge data "
            f"(it holds {', '.join(sorted(held_edge_data(cfg).get(etype_str(et), {}))) or 'none'})"
        )
    if opts.model == "mlp" and len(cfg.ntypes) > 1 and et[0] != et[2]:
        raise InputError(f"model 'mlp' maps one node type; edge type {etype_str(et)!r} joins two: use --model rsage")


def check_model(opts: TrainOptions, cfg: PartitionConfig) -> None:
    """The model fits the graph (homogeneous or heterogeneous), the user's factory imports, and the edge
    feature, if given, is held by the partitions and read by the model."""
    if is_custom(opts.model):
        load_factory(opts.model)
    else:
        check_kind(opts.model, len(cfg.ntypes) > 1 or len(cfg.etypes) > 1)
    if opts.edge_feat is None:
        return
    held = {key.rsplit("/", 1)[-1] for key in cfg.feature_schema.get("edge_feats", {})}
    if opts.edge_feat not in held:
        raise InputError(
            f"{cfg.path}: no edge type has feature {opts.edge_feat!r} (edge features: "
            f"{', '.join(sorted(held)) or 'none'})"
        )
    if not reads_edge_features(opts.model) and not (opts.task == "edge" and opts.edge_decoder == "concat"):
        readers = [n for n, b in BUILTIN.items() if b.edge_features]
        raise InputError(
            f"--edge-feat: model {opts.model!r} reads no edge features ({', '.join(readers)} and your own model do; "
            "so does --task edge's concat decoder, of the labelled edge)"
        )


def resolve_data(
    opts: TrainOptions, world_size: int, announce: bool = True, cfg: PartitionConfig | None = None
) -> TrainOptions:
    """``opts`` with the data names resolved and checked against its partitions (see the module docstring);
    raises :class:`InputError` naming the file and what it holds. ``announce``: log featureless types. A
    multi-task run's tasks are each resolved as a run of their own."""
    if opts.task == "multi":
        tasks = task_specs(opts)
        done = [
            replace(t, opts=resolve_data(t.opts, world_size, announce and i == 0, cfg)) for i, t in enumerate(tasks)
        ]
        return with_tasks(replace(opts, feat=done[0].opts.feat), done)
    if opts.part_config is None:
        raise InputError("no partitions to train on: give part_config (--part-config) or a dataset (--dataset)")
    cfg = read_config(opts.part_config) if cfg is None else cfg  # the caller's, loaded once
    try:
        stored_per_process(cfg.num_parts, world_size)
    except InputError:
        raise InputError(
            f"{world_size} processes cannot serve the {cfg.num_parts} partitions of {cfg.path} evenly: "
            f"start a multiple or a divisor of {cfg.num_parts} (every partition is served by as many "
            "processes, or every process serves as many partitions)"
        ) from None
    held = held_data(cfg)
    present = {n for h in held.values() for n in h}
    feat = _pick(opts.feat, FEATURE_NAMES, present)
    if opts.feat and feat not in present:
        raise InputError(f"{cfg.path}: no node type has feature {feat!r}; the partitions hold {describe(held)}")
    for t, h in held.items():
        if feat in h and (h[feat][0] == "BOOL" or len(h[feat][1]) > 1):
            raise InputError(
                f"{cfg.path}: feature {feat!r} of {t!r} must be numbers, one row per node, got "
                f"{h[feat][0]} of row shape {list(h[feat][1])}"
            )
    label, target = None, opts.target
    if opts.task == "node":
        target = _target(opts, cfg, held, opts.label)
        label = _pick(opts.label, LABEL_NAMES, set(held[target]))
        _check_node_data(opts, cfg, held, target, label=label)
        target = target if len(cfg.ntypes) > 1 else opts.target
    elif opts.task == "edge":
        edge_type, label = _check_edge_data(opts, cfg)
        opts = replace(opts, edge_type=edge_type)
    else:
        _check_link(opts, cfg, held)
    check_model(opts, cfg)
    featureless = [t for t in held if feat not in held[t]]
    if featureless and announce:
        notice.info(
            "node types without feature %r get learnt %d-d input embeddings (sparse Adagrad, lr %g): %s",
            feat,
            opts.embed_dim or opts.hidden,
            opts.sparse_lr,
            ", ".join(featureless),
        )
    return replace(opts, feat=feat, label=label if opts.task != "link" else opts.label, target=target)
