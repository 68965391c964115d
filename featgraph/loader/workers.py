"""Batches made in worker processes (a loader's ``worker_processes``), as torch's ``DataLoader`` workers make
them, beside the background thread that otherwise makes them.

Each worker holds a copy of the loader, sent once when the pool starts: its tensors travel through shared
memory (torch's multiprocessing pickler), a ``numpy.memmap`` as its file, opened again in the worker, so
features on disk stay there. Workers are spawned, not forked: a fork of a process whose OpenMP threads have
run can hang in the child. The pool lives as long as the loader. Batches come back in order, up to ``depth``
ahead; a worker's exception is raised where its batch would have been.
"""

from __future__ import annotations

import mmap
import os
import queue
import weakref
from collections.abc import Callable, Iterable, Iterator
from multiprocessing.reduction import ForkingPickler
from typing import Any

import numpy as np
import torch
import torch.multiprocessing


def _reopened(filename: str, dtype: np.dtype, mode: str, offset: int, shape: tuple, order: str) -> np.memmap:
    return np.memmap(filename, dtype=dtype, mode="r" if mode in ("r", "c") else "r+", offset=offset, shape=shape,
                     order=order)  # fmt: skip


def _reduce_memmap(array: np.memmap) -> tuple[Callable[..., Any], tuple]:
    """A whole mapped file as its file name and layout (a view of one, whose offset the array does not know, as
    its values)."""
    if not isinstance(array.base, mmap.mmap) or array.filename is None:
        return np.array, (np.asarray(array),)
    order = "F" if array.flags.f_contiguous and not array.flags.c_contiguous else "C"
    return _reopened, (array.filename, array.dtype, array.mode, array.offset, array.shape, order)


_DONE = None  # the job queue's end, one per worker
_POLL_S = 0.5  # how often the parent, waiting for a batch, looks whether a worker has died


def _work(loader: Any, threads: int, jobs: Any, results: Any) -> None:
    """A worker's loop: each job's batch (or the exception it raised) onto ``results``, by the job's index."""
    os.environ["OMP_NUM_THREADS"] = str(threads)  # what featgraph's CPU kernels read first
    torch.set_num_threads(threads)
    while (job := jobs.get()) is not _DONE:
        index, work = job
        try:
            results.put((index, True, loader._made(work)))
        except BaseException as error:  # handed to the parent, which raises it
            results.put((index, False, error))


class WorkerPool:
    """``processes`` spawned workers, each with its own copy of ``loader`` (sent once, at the start), whose
    batches run on ``threads`` threads. A worker that dies is reported by its exit code, never waited on."""

    def __init__(self, loader: Any, processes: int, threads: int) -> None:
        ForkingPickler.register(np.memmap, _reduce_memmap)  # before the workers' copies of the loader are pickled
        context = torch.multiprocessing.get_context("spawn")
        self._jobs, self._results = context.Queue(), context.Queue()
        self._processes = [
            context.Process(target=_work, args=(loader, threads, self._jobs, self._results), daemon=True)
            for _ in range(processes)
        ]
        for process in self._processes:
            process.start()
        self._next_index = 0
        weakref.finalize(self, _stop, self._processes)

    def map(self, jobs: Iterable[tuple[torch.Tensor, int]], depth: int) -> Iterator[Any]:
        """The batch of each job, in order, with up to ``depth`` (at least one per worker) in flight."""
        jobs = iter(jobs)
        width = max(depth, len(self._processes))
        first = self._next_index  # indices are the pool's, so an epoch left early never mixes with the next
        sent = received = first
        done: dict[int, tuple[bool, Any]] = {}
        while True:
            while sent - received < width and (job := next(jobs, None)) is not None:
                self._jobs.put((sent, job))
                sent += 1
            self._next_index = sent
            if received == sent:
                return
            while received not in done:
                index, ok, value = self._get()
                done[index] = (ok, value)
            ok, value = done.pop(received)
            received += 1
            if not ok:
                raise value
            yield value

    def _get(self) -> tuple[int, bool, Any]:
        """The next result any worker sends, raising where a worker has died."""
        while True:
            try:
                return self._results.get(timeout=_POLL_S)
            except queue.Empty:
                dead = [p.exitcode for p in self._processes if not p.is_alive()]
                if dead:
                    raise RuntimeError(
                        f"worker_processes: a loader worker exited with code {dead[0]} before its batch was made"
                    ) from None


def _stop(processes: list) -> None:
    """End the workers still running (the pool's loader is gone)."""
    for process in processes:
        if process.is_alive():
            process.terminate()
