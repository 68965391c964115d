"""Batches made in worker processes (a loader's ``worker_processes``), as torch's ``DataLoader`` workers make
them, beside the background thread that otherwise makes them.

Each worker holds a copy of the loader, sent once when the pool starts: its tensors travel through shared
memory (torch's multiprocessing pickler), a ``numpy.memmap`` as its file, opened again in the worker, so
features on disk stay there; a copy-on-write map (mode ``"c"``), whose memory may differ from its file,
travels as its values instead. Workers are spawned, not forked: a fork of a process whose OpenMP threads have
run can hang in the child. The pool lives as long as the loader.

Each worker has its own pipe, and each job an index the pool assigns, so several iterators of one loader can
run at once (``zip(loader, loader)``, nested loops), each getting its own batches in order, up to ``depth``
ahead. A worker's exception is raised where its batch would have been, as its own type where it can be rebuilt
here (else as a ``RuntimeError`` naming it), with the worker's traceback as a note; a batch that cannot be
pickled is named by its field. A worker that dies ends the pool with an error naming the worker and its exit
code; the loader's next epoch starts a fresh pool.
"""

from __future__ import annotations

import dataclasses
import mmap
import os
import pickle
import signal
import threading
import traceback
import weakref
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from multiprocessing.connection import Connection, wait
from multiprocessing.context import get_spawning_popen
from multiprocessing.reduction import ForkingPickler
from typing import Any

import numpy as np
import torch
import torch.multiprocessing


def _reopened(filename: str, dtype: np.dtype, mode: str, offset: int, shape: tuple, order: str) -> np.memmap:
    return np.memmap(filename, dtype=dtype, mode="r" if mode == "r" else "r+", offset=offset, shape=shape,
                     order=order)  # fmt: skip


def _from_tensor(values: torch.Tensor) -> np.ndarray:
    return values.numpy()  # the array keeps the (shared-memory) tensor alive


def _reduce_memmap(array: np.memmap) -> tuple[Callable[..., Any], tuple]:
    """A whole mapped file as its file name and layout; a view of one (whose offset the array does not know) or
    a copy-on-write map (whose memory may differ from its file) as its values, in shared memory where torch
    takes the dtype."""
    if isinstance(array.base, mmap.mmap) and array.filename is not None and array.mode != "c":
        order = "F" if array.flags.f_contiguous and not array.flags.c_contiguous else "C"
        return _reopened, (array.filename, array.dtype, array.mode, array.offset, array.shape, order)
    values = np.array(array)
    try:
        shared = torch.from_numpy(values)
    except (TypeError, ValueError):  # a dtype or byte order torch does not take
        return np.array, (values,)
    if get_spawning_popen() is not None:  # its shared memory's descriptor must stay open until the child starts
        _spawn_kept.append(shared)
    return _from_tensor, (shared,)


_spawn_kept: list[torch.Tensor] = []  # arrays sent as values to workers being started (``_reduce_memmap``)


_FIELD_DEPTH = 8  # how deep the search for a batch's unpicklable field goes
_GRACE_S = 0.5  # how long a stopping pool waits for its workers to exit before terminating them
_REAP_S = 5.0  # how long it waits for a terminated (or dying) worker's exit code


def _parts(value: Any) -> list[tuple[str, Any]]:
    """The named parts of a batch (or of one of its fields): a dict's items, a dataclass's or named tuple's
    fields, a list's elements, PyG data's attributes (``to_dict``), an object's ``__dict__``."""
    if isinstance(value, dict):
        return [(f"[{key!r}]", part) for key, part in value.items()]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return [(f".{field.name}", getattr(value, field.name)) for field in dataclasses.fields(value)]
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return [(f".{name}", part) for name, part in zip(value._fields, value, strict=True)]
    if isinstance(value, list | tuple):
        return [(f"[{i}]", part) for i, part in enumerate(value)]
    to_dict = getattr(value, "to_dict", None)
    if callable(to_dict):
        try:
            fields = to_dict()
        except Exception:
            fields = None
        if isinstance(fields, dict):
            return [(f".{key}" if isinstance(key, str) and key.isidentifier() else f"[{key!r}]", part)
                    for key, part in fields.items()]  # fmt: skip
    return [(f".{key}", part) for key, part in getattr(value, "__dict__", {}).items()]


def _unpicklable_field(value: Any, path: str, depth: int = 0) -> tuple[str, Any]:
    """The innermost part of ``value`` (at ``path``) that does not pickle, and that part."""
    if depth < _FIELD_DEPTH:
        for name, part in _parts(value):
            try:
                pickle.dumps(part)
            except Exception:
                return _unpicklable_field(part, path + name, depth + 1)
    return path, value


def _pickled_batch(batch: Any) -> bytes:
    """``batch`` as torch's multiprocessing pickler writes it (tensors in shared memory); where it does not
    pickle, a ``PicklingError`` naming the field that does not."""
    try:
        return bytes(ForkingPickler.dumps(batch))
    except Exception as error:
        path, part = _unpicklable_field(batch, "batch")
        raise pickle.PicklingError(
            f"worker_processes: the batch cannot be sent from its worker process: {path} "
            f"({type(part).__name__}) cannot be pickled ({type(error).__name__}: {error})"
        ) from error


def _rebuilt_error(kind: type[BaseException], args: tuple, state: dict) -> BaseException:
    """An exception of type ``kind`` with ``args`` and attributes ``state``, made without its ``__init__``
    (whose parameters may not be its ``args``)."""
    error = kind.__new__(kind, *args)
    error.args = args
    error.__dict__.update(state)
    return error


def _pickled_error(error: BaseException) -> tuple[str | None, bytes | None, str, str, str]:
    """How ``error`` travels to the parent: how it is rebuilt there (``"pickled"``: itself; ``"state"``: its
    type, args and attributes; None: not at all), those bytes, its type's name, its message and traceback."""
    kind = type(error)
    name = kind.__qualname__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"
    trace = "".join(traceback.format_exception(error))
    for how in ("pickled", "state"):
        try:
            if how == "pickled":
                data = pickle.dumps(error)
                pickle.loads(data)  # an exception pickles but may not rebuild (its __init__ takes other arguments)
            else:
                data = pickle.dumps((kind, error.args, dict(getattr(error, "__dict__", {}))))
                _rebuilt_error(*pickle.loads(data))
            return how, data, name, str(error), trace
        except Exception:
            continue
    return None, None, name, str(error), trace


def _raised(worker: int, how: str | None, data: bytes | None, name: str, message: str, trace: str) -> BaseException:
    """The exception a worker sent (``_pickled_error``), rebuilt here with its traceback as a note, or a
    ``RuntimeError`` naming its type, message and traceback where it cannot be rebuilt."""
    try:
        if how == "pickled":
            error = pickle.loads(data)
        elif how == "state":
            error = _rebuilt_error(*pickle.loads(data))
        else:
            raise TypeError("it could not be pickled")
    except Exception as failure:
        return RuntimeError(
            f"worker_processes: loader worker {worker} raised {name}: {message} (not rebuilt here: {failure})\n\n"
            f"The worker's traceback:\n{trace}"
        )
    if hasattr(error, "add_note"):  # Python 3.11 on
        error.add_note(f"Raised in loader worker {worker}; the worker's traceback:\n{trace}")
    return error


def _work(loader: Any, threads: int, connection: Connection) -> None:
    """A worker's loop: each job's batch (or the exception it raised) back through ``connection``, by the job's
    index, until the parent sends None or goes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    os.environ["OMP_NUM_THREADS"] = str(threads)  # what featgraph's CPU kernels read first
    torch.set_num_threads(threads)
    while True:
        try:
            job = connection.recv()
        except (EOFError, OSError):  # the parent has gone
            return
        if job is None:
            return
        index, work = job
        try:
            message = (index, True, _pickled_batch(loader._made(work)))
        except Exception as error:  # handed to the parent, which raises it
            message = (index, False, _pickled_error(error))
        try:
            connection.send(message)
        except OSError:  # the parent has gone
            return


class WorkerPool:
    """``processes`` spawned workers, each with its own copy of ``loader`` (sent once, at the start), whose
    batches run on ``threads`` threads. A worker that dies is reported by its index and exit code, and ends
    the pool (``broken``)."""

    def __init__(self, loader: Any, processes: int, threads: int) -> None:
        ForkingPickler.register(np.memmap, _reduce_memmap)  # before the workers' copies of the loader are pickled
        context = torch.multiprocessing.get_context("spawn")
        self._connections: list[Connection] = []
        self._processes: list[Any] = []
        self._finalizer = weakref.finalize(self, _shutdown, os.getpid(), self._processes, self._connections)
        for _ in range(processes):
            ours, theirs = context.Pipe()
            process = context.Process(target=_work, args=(loader, threads, theirs), daemon=True)
            self._connections.append(ours)
            self._processes.append(process)
            try:
                process.start()
            except Exception as error:
                self._finalizer()
                raise RuntimeError(
                    f"worker_processes: the loader cannot be sent to its worker processes ({type(error).__name__}: "
                    f"{error}); its callables (a transform) must pickle, as with torch's DataLoader workers"
                ) from error
            finally:
                theirs.close()
                _spawn_kept.clear()
        self._lock = threading.Condition()  # guards what follows; one thread at a time reads the pipes
        self._reading = False
        self._next_index = 0
        self._assigned: list[set[int]] = [set() for _ in range(processes)]  # each worker's jobs not yet back
        self._wanted: set[int] = set()  # jobs whose iterator is still live
        self._done: dict[int, tuple[bool, Any]] = {}  # results received, not yet taken
        self._failure: str | None = None

    @property
    def broken(self) -> bool:
        """Whether a worker has died (the pool is stopped; a loader starts a fresh one)."""
        return self._failure is not None

    def map(self, jobs: Iterable[tuple[torch.Tensor, int]], depth: int) -> Iterator[Any]:
        """The batch of each job, in order, with up to ``depth`` (at least one per worker) in flight. Several
        such iterators may run at once; each gets its own batches."""
        jobs = iter(jobs)
        width = max(depth, len(self._processes))
        pending: deque[int] = deque()
        try:
            while True:
                while len(pending) < width and (job := next(jobs, None)) is not None:
                    pending.append(self._submit(job))
                if not pending:
                    return
                ok, value = self._result(pending[0])
                pending.popleft()
                if not ok:
                    raise value
                yield value
        finally:
            self._forget(pending)

    def _submit(self, job: tuple[torch.Tensor, int]) -> int:
        """Send ``job`` to the worker with the fewest jobs in hand; its index."""
        with self._lock:
            self._raise_if_broken()
            index = self._next_index
            self._next_index += 1
            worker = min(range(len(self._processes)), key=lambda w: len(self._assigned[w]))
            try:
                self._connections[worker].send((index, job))
            except OSError:
                self._died(worker)
            self._assigned[worker].add(index)
            self._wanted.add(index)
            return index

    def _result(self, index: int) -> tuple[bool, Any]:
        """Whether job ``index`` made its batch, and the batch (or the exception to raise)."""
        with self._lock:
            while index not in self._done:
                self._raise_if_broken()
                if self._reading:  # another thread reads the pipes; it says when results have come
                    self._lock.wait()
                    continue
                self._reading = True
                try:
                    try:
                        self._lock.release()
                        try:
                            received, dead = self._receive()
                        finally:
                            self._lock.acquire()
                    except (OSError, ValueError):  # the pipes were closed: another thread found a worker dead
                        self._raise_if_broken()
                        raise
                    for worker, job, made in received:
                        self._assigned[worker].discard(job)
                        if job in self._wanted:
                            self._wanted.discard(job)
                            self._done[job] = made
                    if dead:
                        self._died(dead[0])
                finally:
                    self._reading = False
                    self._lock.notify_all()
            return self._done.pop(index)

    def _receive(self) -> tuple[list[tuple[int, int, tuple[bool, Any]]], list[int]]:
        """Wait for results: those that came (worker, job index, (made, batch or exception)), and the workers
        found dead."""
        sentinels = {process.sentinel: w for w, process in enumerate(self._processes)}
        readers = {connection: w for w, connection in enumerate(self._connections)}
        ready = wait([*readers, *sentinels])
        received, dead = [], []
        for connection in (c for c in ready if c in readers):
            worker = readers[connection]
            try:
                index, ok, payload = connection.recv()
            except (EOFError, OSError):  # the worker died while sending
                dead.append(worker)
                continue
            if not ok:
                received.append((worker, index, (False, _raised(worker, *payload))))
                continue
            try:
                received.append((worker, index, (True, ForkingPickler.loads(payload))))
            except Exception as error:  # its shared memory comes from the worker, which may have died
                self._processes[worker].join(1.0)
                if self._processes[worker].exitcode is not None:
                    dead.append(worker)
                    continue
                failure = RuntimeError(
                    f"worker_processes: the batch from loader worker {worker} could not be received "
                    f"({type(error).__name__}: {error})"
                )
                failure.__cause__ = error
                received.append((worker, index, (False, failure)))
        dead += [w for sentinel, w in sentinels.items() if sentinel in ready and w not in dead]
        return received, dead

    def _died(self, worker: int) -> None:
        """Stop the pool, whose ``worker`` has died, and raise the error that says so."""
        process = self._processes[worker]
        process.join(_REAP_S)
        code = process.exitcode
        self._failure = (
            f"worker_processes: loader worker {worker} exited with code {code} before its batches were made "
            f"(killed, out of memory, or ended by the loader's code); the loader starts fresh workers when "
            f"iterated again"
        )
        self._finalizer()
        self._raise_if_broken()

    def _raise_if_broken(self) -> None:
        if self._failure is not None:
            raise RuntimeError(self._failure)

    def _forget(self, pending: Iterable[int]) -> None:
        """Drop the results of an iterator's jobs (it has ended): they are discarded as they come."""
        with self._lock:
            for index in pending:
                self._wanted.discard(index)
                self._done.pop(index, None)


def _shutdown(owner: int, processes: list[Any], connections: list[Connection]) -> None:
    """End the workers (the pool's loader is gone, or a worker died): idle ones exit when their pipe closes,
    the rest are terminated."""
    if os.getpid() != owner:  # a forked copy of the parent: the workers are not its children
        return
    for connection in connections:
        connection.close()
    started = [process for process in processes if process.pid is not None]
    for process in started:
        process.join(_GRACE_S / max(1, len(started)))
    for process in started:
        if process.exitcode is None:
            process.terminate()
            process.join(_REAP_S)
        if process.exitcode is None:
            process.kill()
            process.join()
