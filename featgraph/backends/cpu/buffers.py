"""Recycled memory for the large outputs of CPU kernels.

glibc's ``malloc`` serves a request above its mmap threshold (dynamic, at most 32 MiB) with a fresh ``mmap``
and unmaps it on free, and it trims the freed top of its heap back to the system, so a large output often
starts as untouched pages: the kernel that writes it first takes a page fault and a kernel-side zeroing for
each 4 KiB: filling a fresh 50,000 x 256 float32 output costs about a quarter of that SpMM's time
(``featgraph bench output-pool``). The pool keeps such buffers after their tensors die and hands them out again, as
PyTorch's CUDA caching allocator does on the GPU. Every tensor or view of a pooled buffer holds the array it
was made from (``torch.from_numpy`` keeps that array alive), and the pool watches that array through a weak
reference, so memory a live tensor uses is never handed out twice.

``FEATGRAPH_POOL_MB`` bounds the free memory kept (default 128; 0 turns the pool off), as tensors die: free
buffers cannot serve torch's own allocations, so what the pool keeps beyond a step's reuse adds to the peak
(GAT on rand100k-2.9M under DGL kept 306 MB with no bound, ``featgraph bench dgl --workloads gat``).
"""

from __future__ import annotations

import math
import os
import threading
import weakref
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

MIN_POOLED_BYTES = 1024**2  # below this, page faults are few and malloc's small-block bins recycle well
SIZE_CLASS = 1024**2  # buffers are kept in whole MiB, so near-equal requests share them
FIT_SLACK = 0.125  # a request may take a free buffer up to this much larger than it
ALIGNMENT = 64  # one cache line: the kernels' vector loads never straddle two at a row start
DEFAULT_POOL_MB = 128
NUMPY_DTYPES = {
    torch.float16: np.float16,
    torch.float32: np.float32,
    torch.float64: np.float64,
    torch.int32: np.int32,
    torch.int64: np.int64,
}


def _pool_bytes_from_env() -> int:
    value = os.environ.get("FEATGRAPH_POOL_MB") or str(DEFAULT_POOL_MB)  # set but empty: the default
    try:
        megabytes = float(value)
    except ValueError:
        raise ValueError(f"FEATGRAPH_POOL_MB must be a number of MiB, got {value!r}") from None
    if not 0 <= megabytes < math.inf:
        raise ValueError(f"FEATGRAPH_POOL_MB must be a finite number of MiB >= 0, got {value!r}")
    return int(megabytes * 1024**2)


@dataclass
class _Buffer:
    memory: np.ndarray
    user: weakref.ref | None = None  # the array last handed out over ``memory``

    @property
    def free(self) -> bool:
        return self.user is None or self.user() is None


class BufferPool:
    """Hands out CPU tensors of at least ``min_bytes`` from buffers it keeps; smaller ones come from torch.

    ``max_free_bytes`` bounds the memory held by buffers no tensor uses (least recently used go first)."""

    def __init__(self, max_free_bytes: int, min_bytes: int = MIN_POOLED_BYTES) -> None:
        self.max_free_bytes = max_free_bytes
        self.min_bytes = min_bytes
        self._buffers: list[_Buffer] = []  # least recently used first
        self._lock = threading.Lock()

    def empty(self, shape: Sequence[int], dtype: torch.dtype) -> torch.Tensor:
        """An uninitialised tensor, in a recycled buffer where the request is large enough."""
        numel = 1
        for extent in shape:
            numel *= int(extent)
        nbytes = numel * dtype.itemsize
        if dtype not in NUMPY_DTYPES or nbytes < self.min_bytes or self.max_free_bytes <= 0:
            return torch.empty(tuple(shape), dtype=dtype)
        size = -(-nbytes // SIZE_CLASS) * SIZE_CLASS
        with self._lock:
            buffer = self._take(size)
            start = (-buffer.memory.ctypes.data) % ALIGNMENT
            array = buffer.memory[start : start + nbytes].view(NUMPY_DTYPES[dtype]).reshape(tuple(shape))
            buffer.user = weakref.ref(array, self._freed)
            return torch.from_numpy(array)

    def zeros(self, shape: Sequence[int], dtype: torch.dtype) -> torch.Tensor:
        return self.empty(shape, dtype).zero_()

    def _take(self, size: int) -> _Buffer:
        """The smallest free buffer of ``size`` to ``size * (1 + FIT_SLACK)`` usable bytes (mini-batches ask for
        a slightly different size each step), moved to the most recently used end, else a new one. A new one
        replaces the free buffers just too small for it (``size / (1 + FIT_SLACK)`` to ``size``): the same
        request's earlier, smaller steps, which it now serves, so they are not kept beside it."""
        fits = [
            (buffer.memory.nbytes, n)
            for n, buffer in enumerate(self._buffers)
            if buffer.free and size <= buffer.memory.nbytes - ALIGNMENT <= size * (1 + FIT_SLACK)
        ]
        if fits:
            buffer = self._buffers.pop(min(fits)[1])
            self._buffers.append(buffer)
            return buffer
        self._buffers = [
            buffer
            for buffer in self._buffers
            if not (buffer.free and size / (1 + FIT_SLACK) <= buffer.memory.nbytes - ALIGNMENT < size)
        ]
        self._trim(self.max_free_bytes - size)
        buffer = _Buffer(np.empty(size + ALIGNMENT, dtype=np.uint8))
        self._buffers.append(buffer)
        return buffer

    def _freed(self, _: weakref.ref) -> None:
        """A handed-out array died: drop the least recently used free buffers beyond ``max_free_bytes`` now,
        not at the next request, so memory the caller freed does not stay held while other allocations grow.
        Skipped where the pool's lock is held (this runs wherever the last reference goes, possibly inside
        the pool's own ``empty``, which trims before it allocates)."""
        if self._lock.acquire(blocking=False):
            try:
                self._trim(self.max_free_bytes)
            finally:
                self._lock.release()

    def _trim(self, keep_bytes: int) -> None:
        """Drop the least recently used free buffers until at most ``keep_bytes`` of free ones remain."""
        excess = sum(b.memory.nbytes for b in self._buffers if b.free) - max(0, keep_bytes)
        kept = []
        for buffer in self._buffers:
            if buffer.free and excess > 0:
                excess -= buffer.memory.nbytes
            else:
                kept.append(buffer)
        self._buffers = kept

    @property
    def free_bytes(self) -> int:
        with self._lock:
            return sum(b.memory.nbytes for b in self._buffers if b.free)

    def release(self) -> None:
        """Give every free buffer back to the system (buffers still in use stay until they are free)."""
        with self._lock:
            self._trim(0)


POOL = BufferPool(_pool_bytes_from_env())


def empty(shape: Sequence[int], dtype: torch.dtype) -> torch.Tensor:
    """An uninitialised CPU tensor from the process-wide pool."""
    return POOL.empty(shape, dtype)


def zeros(shape: Sequence[int], dtype: torch.dtype) -> torch.Tensor:
    """A zero-filled CPU tensor from the process-wide pool."""
    return POOL.zeros(shape, dtype)


def contiguous(tensor: torch.Tensor) -> torch.Tensor:
    """``tensor`` itself when contiguous, else a contiguous copy (pooled on the CPU): e.g. the expanded
    gradient that ``out.sum().backward()`` hands a backward pass."""
    if tensor.is_contiguous():
        return tensor
    if tensor.device.type != "cpu":
        return tensor.contiguous()
    return empty(tensor.shape, tensor.dtype).copy_(tensor)


def release() -> None:
    """Free the process-wide pool's unused buffers."""
    POOL.release()
