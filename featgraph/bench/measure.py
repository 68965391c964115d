"""Peak-memory and bandwidth helpers shared by the benchmarks (their timing helpers are ``featgraph.timing``)."""

from __future__ import annotations

import gc
from collections.abc import Callable
from pathlib import Path

import torch

from ..backends.cpu import buffers
from ..graph.graph import release_freed_heap
from ..timing import best_ms

CLEAR_REFS = Path("/proc/self/clear_refs")
STATUS = Path("/proc/self/status")


def status_kb(field: str) -> int | None:
    """A field of ``/proc/self/status`` in kB (``VmRSS``, ``VmHWM``, ``RssAnon``, ...); None where it is absent."""
    for line in STATUS.read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return None


def peak_extra_mb(fn: Callable[[], object], device: torch.device | None = None) -> float | None:
    """Peak memory that ``fn`` adds over what the process held before, in MB: resident memory, or for a CUDA
    ``device`` the memory torch's allocator hands out there.

    Resets Linux's high-water mark (``echo 5 > /proc/self/clear_refs``) and reads ``VmHWM`` afterwards;
    None where the kernel does not offer that. The output pool's free buffers are released first, so the
    outputs ``fn`` makes count, as they would in a process that had not run it before. Garbage is collected
    and the C heap's free pages handed back first too: a collection inside ``fn`` that freed earlier tensors,
    or an allocation served from free heap pages still resident, would hide ``fn``'s memory (a CI run read
    0 MB for a 64 MiB output three times in a row).
    """
    if device is not None and device.type == "cuda":
        return _cuda_peak_extra_mb(fn, device)
    gc.collect()
    buffers.release()
    release_freed_heap()
    try:
        before = status_kb("VmRSS")
        CLEAR_REFS.write_text("5")
        result = fn()
        peak = status_kb("VmHWM")
        del result
    except OSError:
        return None
    if before is None or peak is None:
        return None
    return max(0.0, (peak - before) / 1024)


def _cuda_peak_extra_mb(fn: Callable[[], object], device: torch.device) -> float:
    torch.cuda.synchronize(device)
    torch.cuda.reset_peak_memory_stats(device)
    before = torch.cuda.memory_allocated(device)
    result = fn()
    torch.cuda.synchronize(device)
    del result
    return (torch.cuda.max_memory_allocated(device) - before) / 1024**2


def copy_gbps(device: torch.device, megabytes: int = 1024, repeat: int = 10) -> float:
    """Device-to-device copy bandwidth, bytes read plus bytes written per second in GB/s (best of ``repeat``
    copies of ``megabytes``): the bound a gather-bound kernel's GB/s is read against."""
    source = torch.empty(megabytes * 2**20 // 4, device=device)
    target = torch.empty_like(source)
    ms = best_ms(lambda: target.copy_(source), repeat)
    return 2 * source.numel() * 4 / ms / 1e6
