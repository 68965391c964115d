"""``featgraph train --distributed``: full-graph training in the processes ``torchrun`` starts (env://
rendezvous: ``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT``), one part of the graph per process.

Rank 0 partitions the dataset into ``--partition-dir`` unless a partition of it is there already; every rank
then loads its own part. A process that dies or stops answering makes the others raise ``PeerFailure``
within ``--timeout`` seconds (gloo's timeout on every collective and exchange; a closed connection fails at
once) instead of waiting for ever. Rank 0 writes a checkpoint every ``--checkpoint-every`` epochs;
``--resume`` continues from it, and gives the results of an uninterrupted run: weights, optimiser state,
epoch and history are restored, and each epoch's random state is a function of (seed, epoch, rank).
"""

from __future__ import annotations

import argparse
import os
import warnings
from dataclasses import asdict
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist

from ..graph import Graph
from ..training.loop import node_task
from ..training.models import Preset
from . import minibatch
from .checked_file import digest_file, read_with_digest, write_with_digest
from .partition import METHODS, partition
from .store import check_meta, load_part, read_meta, save_parts
from .trainer import EpochRecord, PartClassifier, Trainer

CHECKPOINT_FILE = "checkpoint.pt"
DEFAULT_TIMEOUT_S = 300


class PeerFailure(RuntimeError):
    """Another process of the job died or did not answer within the timeout."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("distributed full-graph training (under torchrun; docs/guides/distributed.md)")
    group.add_argument(
        "--distributed",
        action="store_true",
        help="train across the processes torchrun starts, one part of the graph each: "
        "torchrun --nproc-per-node 2 -m featgraph train --distributed; models gcn, sage, gat",
    )
    group.add_argument(
        "--partition-dir",
        metavar="DIR",
        help="where the parts are; rank 0 partitions the dataset there when it holds none "
        "(default featgraph-partitions/<dataset>-<processes>-<method>)",
    )
    group.add_argument("--partition-method", choices=METHODS, default="metis", help="default metis (needs pymetis)")
    group.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT_S,
        help=f"seconds a process waits for the others before failing (default {DEFAULT_TIMEOUT_S})",
    )
    group.add_argument("--checkpoint-every", type=int, metavar="N", help="rank 0 saves a checkpoint every N epochs")
    group.add_argument(
        "--checkpoint-dir", metavar="DIR", help="where checkpoints go (with --checkpoint-every, --resume)"
    )
    group.add_argument("--resume", action="store_true", help="continue from the checkpoint in --checkpoint-dir")
    group.add_argument(
        "--features",
        choices=minibatch.FEATURE_MODES,
        default="auto",
        help="with --minibatch: every process holds all feature rows (replicated), or its part's and fetches the "
        "rest per batch from their owners (fetched); auto replicates up to 1 GiB",
    )


def run(args: argparse.Namespace, model: str, config: Preset) -> dict[str, float | int]:
    """Train ``model`` on ``args.dataset`` across the job's processes; every rank returns the same summary."""
    _check_arguments(args)
    if "RANK" not in os.environ or "WORLD_SIZE" not in os.environ:
        raise RuntimeError(
            "--distributed runs in processes started by torchrun (RANK and WORLD_SIZE are not set): "
            "torchrun --nproc-per-node 2 -m featgraph train --distributed ..."
        )
    dist.init_process_group("gloo", timeout=timedelta(seconds=args.timeout))
    rank, world_size = dist.get_rank(), dist.get_world_size()
    try:
        return _train(args, model, config, rank, world_size)
    except RuntimeError as err:
        if not _lost_peer(err):
            raise
        raise PeerFailure(
            f"rank {rank} of {world_size}: another process died or did not answer within --timeout "
            f"{args.timeout:g} s, so this one stops too ({type(err).__name__}: {err})"
        ) from err
    finally:
        dist.destroy_process_group()


def writes_files() -> bool:
    """Whether this process writes the command's output files: rank 0 of a torchrun job, or a lone process."""
    return os.environ.get("RANK", "0") == "0"


def _lost_peer(err: RuntimeError) -> bool:
    """Whether ``err`` is the communication backend's: torch's ``DistError``, or gloo's and NCCL's transport
    errors (a closed connection, a timeout), which reach Python as a plain ``RuntimeError`` naming them."""
    return isinstance(err, dist.DistError) or any(name in str(err) for name in ("gloo", "NCCL"))


def _check_arguments(args: argparse.Namespace) -> None:
    if args.load:
        raise ValueError("--distributed trains from scratch: not with --load")
    if args.minibatch and (args.checkpoint_every or args.resume or args.save):
        raise ValueError("--distributed --minibatch does not checkpoint, resume or save")
    if args.timeout <= 0:
        raise ValueError(f"--timeout must be > 0 seconds, got {args.timeout}")
    if args.checkpoint_every is not None and args.checkpoint_every < 1:
        raise ValueError(f"--checkpoint-every must be >= 1, got {args.checkpoint_every}")
    if (args.checkpoint_every or args.resume) and not args.checkpoint_dir:
        raise ValueError("--checkpoint-every and --resume need --checkpoint-dir")


def _train(args: argparse.Namespace, model: str, config: Preset, rank: int, world_size: int) -> dict:
    directory = Path(args.partition_dir or f"featgraph-partitions/{args.dataset}-{world_size}-{args.partition_method}")
    num_classes = _agreed(rank, lambda: prepare_parts(directory, args.dataset, world_size, args.partition_method))
    if args.minibatch:
        return minibatch.train(args, model, config, directory, rank, world_size)
    part = load_part(directory, rank, world_size)
    torch.manual_seed(args.seed)
    net = PartClassifier(model, part, num_classes, config, timeout=timedelta(seconds=args.timeout))
    trainer = Trainer(net, part, config, args.seed)
    identity = {"model": model, "dataset": args.dataset, "world_size": world_size, "config": asdict(config)}
    checkpoint = Path(args.checkpoint_dir) / CHECKPOINT_FILE if args.checkpoint_dir else None
    if args.resume:
        trainer.load_state(_agreed(rank, lambda: _read_checkpoint(checkpoint, identity)))
    log = rank == 0 and not args.quiet

    def after_epoch(record: EpochRecord) -> None:
        if log:
            print(f"epoch {record.epoch}: loss {record.loss:.4f} val {record.val_acc:.4f} test {record.test_acc:.4f}")
        due = args.checkpoint_every and (record.epoch + 1) % args.checkpoint_every == 0
        if rank == 0 and checkpoint is not None and due:
            _write_checkpoint(checkpoint, {**identity, **trainer.state()})

    trainer.fit(config.epochs, after_epoch)
    result = trainer.summary()
    if rank == 0:
        print(
            f"{model} on {args.dataset}, {world_size} processes: val {result['val_acc']:.4f} "
            f"test {result['test_acc']:.4f} (epoch {result['best_epoch']}), "
            f"{result['epoch_seconds'] * 1e3:.2f} ms/epoch"
        )
        if args.save:  # the format of training.loop.save: loads into a one-process model
            meta = {"model": model, "dataset": args.dataset, "config": asdict(config), "backend": "featgraph"}
            torch.save({"meta": meta, "state_dict": net.state_dict()}, args.save)
            print(f"saved to {args.save} (weights after the last epoch)")
    return result


def _agreed(rank: int, compute):
    """``compute()`` on rank 0, its value (or its error, raised on every rank) sent to all."""
    box: list = [None]
    if rank == 0:
        try:
            box[0] = ("value", compute())
        except (ValueError, FileNotFoundError, ImportError) as err:
            box[0] = ("error", err)
    dist.broadcast_object_list(box)
    kind, value = box[0]
    if kind == "error":
        raise value
    return value


def prepare_parts(directory: Path, dataset: str, world_size: int, method: str) -> int:
    """Check the partition in ``directory`` against ``dataset`` (its graph, ``world_size`` parts), or partition
    the dataset there with ``method``; the class count. Rank 0 runs it before the others load their parts."""
    task = node_task(dataset)
    graph = Graph.from_edge_index(task.edge_index, task.x.shape[0])
    if (directory / "meta.json").is_file():
        check_meta(read_meta(directory), directory, graph.fingerprint, world_size)
        return task.num_classes
    masks = {}
    for name, index in (("train", task.train_idx), ("val", task.val_idx), ("test", task.test_idx)):
        masks[name] = torch.zeros(task.x.shape[0], dtype=torch.bool)
        masks[name][index] = True
    save_parts(directory, graph, partition(graph, world_size, method), task.x, task.y, masks, method)
    return task.num_classes


def previous_checkpoint(path: Path) -> Path:
    """Where the checkpoint before ``path``'s last one is kept: the fallback of a damaged one."""
    return path.with_name(path.name + ".previous")


def _read_checkpoint(path: Path, identity: dict) -> dict:
    """The checkpoint at ``path``, or, where it is damaged, the one before it (with a warning). Run on rank 0
    inside ``_agreed``: a ValueError naming the file reaches every rank."""
    if not path.is_file():
        raise FileNotFoundError(f"--resume: no checkpoint at {str(path)!r}")
    remedy = "train again without --resume"
    try:
        state = read_with_digest(path, remedy)
    except ValueError as err:
        previous = previous_checkpoint(path)
        try:
            state = read_with_digest(previous, remedy)
        except (ValueError, FileNotFoundError) as fallback:
            raise ValueError(f"--resume: {err}; the checkpoint before it cannot serve either: {fallback}") from err
        warnings.warn(f"--resume: {err}; resuming from the checkpoint before it, {str(previous)!r}", stacklevel=2)
    for key in ("model", "dataset"):
        if state[key] != identity[key]:
            raise ValueError(f"--resume: the checkpoint is of {key} {state[key]!r}, this run's is {identity[key]!r}")
    return state


def _write_checkpoint(path: Path, state: dict) -> None:
    """Written whole and then renamed, with its SHA-256 digest beside it (``checked_file``), the one it
    replaces kept as the previous checkpoint, so a crash mid-write or a damaged file loses at most one
    interval."""
    path.parent.mkdir(parents=True, exist_ok=True)
    previous = previous_checkpoint(path)
    for source, target in ((path, previous), (digest_file(path), digest_file(previous))):
        if source.is_file():
            os.replace(source, target)
    write_with_digest(path, state)
