import json
import multiprocessing
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from featgraph.cli import main
from featgraph.distributed.launch import (
    CHECKPOINT_FILE,
    PeerFailure,
    _read_checkpoint,
    _write_checkpoint,
    prepare_parts,
)
from featgraph.training import evaluate, load_model
from tests.distributed.conftest import free_port

TRAIN = ["train", "--distributed", "--dataset", "cora", "--quiet", "--hidden", "4", "--partition-method", "random"]


def torchrun_env(rank: int, world_size: int, port: int) -> dict[str, str]:
    """What torchrun sets for each process (env:// rendezvous)."""
    return {
        "RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": str(world_size), "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(port), "OMP_NUM_THREADS": "1",
    }  # fmt: skip


def rank_main(rank: int, world_size: int, port: int, argv: list[str], errors: Path) -> None:
    """``featgraph`` as torchrun runs it on one rank; an exception goes to ``errors/rank-<r>``, exit code 3."""
    os.environ.update(torchrun_env(rank, world_size, port))
    torch.set_num_threads(1)
    try:
        main(argv)
    except Exception as err:  # noqa: BLE001 - reported to the test through the file
        (errors / f"rank-{rank}").write_text(f"{type(err).__name__}: {err}")
        os._exit(3)
    os._exit(0)


def start(argv: list[str], tmp_path: Path, world_size: int = 2) -> list[multiprocessing.Process]:
    context, port = multiprocessing.get_context("fork"), free_port()
    processes = [
        context.Process(target=rank_main, args=(rank, world_size, port, argv, tmp_path)) for rank in range(world_size)
    ]
    for process in processes:
        process.start()
    return processes


def run_job(argv: list[str], tmp_path: Path, world_size: int = 2) -> list[str]:
    """Run the job to its end; each rank's error message ('' where it succeeded)."""
    for process in start(argv, tmp_path, world_size):
        process.join(120)
    return [
        (tmp_path / f"rank-{r}").read_text() if (tmp_path / f"rank-{r}").exists() else "" for r in range(world_size)
    ]


def test_resume_equals_uninterrupted(tmp_path):
    """Dropout on: the resumed epochs draw the masks the uninterrupted run drew."""
    parts = ["--partition-dir", str(tmp_path / "parts"), "--dropout", "0.5"]
    whole, split, saved = tmp_path / "whole", tmp_path / "split", str(tmp_path / "model.pt")
    checkpointed = ["--checkpoint-every", "4", "--checkpoint-dir", str(whole), "--save", saved]
    assert run_job([*TRAIN, *parts, "--epochs", "4", *checkpointed], tmp_path) == ["", ""]
    assert run_job(
        [*TRAIN, *parts, "--epochs", "2", "--checkpoint-every", "2", "--checkpoint-dir", str(split)], tmp_path
    ) == ["", ""]
    interrupted = torch.load(split / CHECKPOINT_FILE)
    assert interrupted["epoch"] == 2
    resume = ["--epochs", "4", "--checkpoint-every", "2", "--checkpoint-dir", str(split), "--resume"]
    assert run_job([*TRAIN, *parts, *resume], tmp_path) == ["", ""]
    expected, resumed = torch.load(whole / CHECKPOINT_FILE), torch.load(split / CHECKPOINT_FILE)
    assert resumed["epoch"] == expected["epoch"] == 4
    assert resumed["history"] == [
        dict(r, seconds=s["seconds"]) for r, s in zip(expected["history"], resumed["history"], strict=True)
    ]
    for name, value in expected["state_dict"].items():
        assert torch.equal(resumed["state_dict"][name], value), name
    assert expected["history"][0] != interrupted["history"][1]
    # --save writes what a one-process model loads: it evaluates as the last epoch did
    val, test = evaluate(*load_model(saved)[:2])
    assert (val, test) == pytest.approx(
        (expected["history"][-1]["val_acc"], expected["history"][-1]["test_acc"]), abs=2e-3
    )


@pytest.mark.parametrize("stop", [signal.SIGKILL, signal.SIGSTOP], ids=["killed", "hung"])
def test_a_lost_rank_makes_the_others_fail_within_the_timeout(tmp_path, stop):
    checkpoints = tmp_path / "checkpoints"
    argv = [*TRAIN, "--partition-dir", str(tmp_path / "parts"), "--epochs", "100000", "--timeout", "5"]
    rank0, rank1 = start([*argv, "--checkpoint-every", "1", "--checkpoint-dir", str(checkpoints)], tmp_path)
    try:
        deadline = time.monotonic() + 60
        while not (checkpoints / CHECKPOINT_FILE).exists() and time.monotonic() < deadline:  # training under way
            time.sleep(0.1)
        assert rank0.is_alive() and rank1.is_alive(), "training did not start"
        os.kill(rank1.pid, stop)
        stopped = time.monotonic()
        rank0.join(30)
        assert not rank0.is_alive(), "rank 0 hangs after losing rank 1"
        assert time.monotonic() - stopped < 20
        assert rank0.exitcode == 3
        message = (tmp_path / "rank-0").read_text()
        assert message.startswith(PeerFailure.__name__) and "another process died or did not answer" in message
    finally:
        for process in (rank0, rank1):
            if process.is_alive():
                os.kill(process.pid, signal.SIGKILL)
                process.join()


def test_bad_input(tmp_path, monkeypatch):
    for name in ("RANK", "WORLD_SIZE"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(RuntimeError, match="torchrun"):
        main(TRAIN)
    with pytest.raises(ValueError, match="--checkpoint-dir"):
        main([*TRAIN, "--resume"])
    with pytest.raises(ValueError, match="--minibatch does not checkpoint"):
        main([*TRAIN, "--minibatch", "--checkpoint-every", "1", "--checkpoint-dir", str(tmp_path)])
    parts = ["--partition-dir", str(tmp_path / "parts")]
    prepare_parts(tmp_path / "parts", "cora", 2, "random")
    errors = run_job([*TRAIN, *parts, "--epochs", "1", "--dataset", "citeseer"], tmp_path)
    assert all("another graph" in e for e in errors), errors
    errors = run_job([*TRAIN, *parts, "--epochs", "1"], tmp_path, world_size=1)
    assert "holds 2 parts, but 1 were asked for" in errors[0]
    errors = run_job(
        [*TRAIN, *parts, "--epochs", "1", "--resume", "--checkpoint-dir", str(tmp_path / "none")], tmp_path
    )
    assert all("no checkpoint" in e for e in errors), errors
    damaged = tmp_path / "damaged"
    damaged.mkdir()
    (damaged / CHECKPOINT_FILE).write_bytes(b"PK\x03\x04 cut short")
    errors = run_job([*TRAIN, *parts, "--epochs", "1", "--resume", "--checkpoint-dir", str(damaged)], tmp_path)
    assert all(f"{CHECKPOINT_FILE}' is damaged" in e and "before it cannot serve" in e for e in errors), errors


def test_a_damaged_checkpoint_falls_back_to_the_one_before_it(tmp_path):
    path = tmp_path / CHECKPOINT_FILE
    identity = {"model": "gcn", "dataset": "cora"}
    _write_checkpoint(path, {**identity, "epoch": 2})
    _write_checkpoint(path, {**identity, "epoch": 4})
    assert _read_checkpoint(path, identity)["epoch"] == 4
    data = path.read_bytes()
    path.write_bytes(data[:-200])  # a crash or a full disk cut the latest one short
    with pytest.warns(UserWarning, match="resuming from the checkpoint before it"):
        assert _read_checkpoint(path, identity)["epoch"] == 2
    path.write_bytes(data[:300] + bytes([data[300] ^ 1]) + data[301:])  # one bit flipped: its digest differs
    with pytest.warns(UserWarning, match="contents differ from what was written"):
        assert _read_checkpoint(path, identity)["epoch"] == 2
    with pytest.raises(ValueError, match="is of model 'gcn'"):
        _read_checkpoint(path, {"model": "gat", "dataset": "cora"})


def test_minibatch_job(tmp_path):
    """``train --distributed --minibatch``: fetched features train as replicated ones do, and only they move
    feature rows between the processes."""
    argv = [*TRAIN[:5], "--partition-method", "random", "--partition-dir", str(tmp_path / "parts"), "--minibatch"]
    argv += ["--epochs", "15"]  # the default width
    results = {}
    for features in ("replicated", "fetched"):
        out = tmp_path / f"{features}.json"
        assert run_job([*argv, "--features", features, "--json", str(out)], tmp_path) == ["", ""]
        results[features] = json.loads(out.read_text())
    replicated, fetched = results["replicated"], results["fetched"]
    assert replicated["world_size"] == fetched["world_size"] == 2 and replicated["epochs"] == 15
    assert replicated["feature_bytes_per_epoch"] == 0 < fetched["feature_bytes_per_epoch"]
    for key in ("val_acc", "test_acc", "loss"):
        assert fetched[key] == pytest.approx(replicated[key], abs=1e-4), key
    assert replicated["val_acc"] > 0.6  # it learns: chance is 1/7 on Cora


def test_torchrun(tmp_path):
    """The documented command, as torchrun starts it."""
    argv = [*TRAIN, "--partition-dir", str(tmp_path / "parts"), "--epochs", "2", "--json", str(tmp_path / "out.json")]
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]
    done = subprocess.run([*torchrun, "-m", "featgraph", *argv], capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "gcn on cora, 2 processes" in done.stdout
    assert json.loads((tmp_path / "out.json").read_text())["world_size"] == 2
