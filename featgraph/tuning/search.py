"""``tune(kernel)``: find the fastest template parameters and FDS split for one graph and shape.

Coordinate descent from the kernel's own (default) configuration: each coordinate's values are measured
with the others held at the best so far, the fastest is kept, and the sweep repeats until nothing
improves or the time budget runs out. Candidates sharing generated code share one compiled library, so
most of them cost a measurement, not a compile. The winner is stored on disk (``store``); tuning the same
kernel again on the same machine reads it back with no search.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import torch

from ..native.compiler import CompileError
from ..progress import Progress
from ..templates.kernel import TORCH_DTYPES, Kernel
from ..timing import best_ms
from . import store
from .space import Config, apply, coordinates, current_config, moved


@dataclass(frozen=True)
class TuneResult:
    """What the tuner found: the configuration, its time, the starting configuration's time."""

    config: Config
    ms: float
    default_ms: float
    tried: int
    from_cache: bool

    @property
    def speedup(self) -> float:
        """Starting (default) time over tuned time."""
        return self.default_ms / self.ms


def synthetic_inputs(kernel: Kernel, seed: int = 0) -> dict[str, torch.Tensor]:
    """Random inputs of the placeholders' shapes and dtypes (integer placeholders are zeros) on the kernel's
    graph's device: the kernel's speed depends on the graph and shapes, not on the values."""
    generator = torch.Generator().manual_seed(seed)
    device = kernel.graph.device
    inputs = {}
    for p in kernel.spec.op.placeholders:
        dtype, shape = TORCH_DTYPES[p.dtype], kernel.input_shape(p.name)
        if dtype == torch.int64:
            inputs[p.name] = torch.zeros(shape, dtype=dtype, device=device)
        else:
            inputs[p.name] = torch.randn(shape, generator=generator).to(device, dtype)
    return inputs


def _from_record(kernel: Kernel, name: str, record: dict[str, Any]) -> Kernel | None:
    """``kernel`` configured as the stored ``record`` says, or None (reported) when the record does not
    describe a configuration of this kernel, e.g. one written in another version's format."""
    try:
        config = Config.from_json(kernel.spec.kind, record["config"])
        result = TuneResult(
            config, float(record["ms"]), float(record["default_ms"]), int(record["tried"]), from_cache=True
        )
        tuned = apply(kernel, config)
    except (KeyError, TypeError, ValueError) as error:
        store.discard(name, f"not a configuration of this kernel: {type(error).__name__} {error}")
        return None
    tuned.tuning = result
    return tuned


def tune(
    kernel: Kernel,
    inputs: dict[str, torch.Tensor] | None = None,
    budget_s: float = 60.0,
    repeat: int = 3,
    progress: bool = True,
    use_cache: bool = True,
) -> Kernel:
    """The fastest variant of ``kernel`` for its graph and shapes, with ``.tuning`` describing the search.

    ``inputs`` by placeholder name (default: random tensors of the right shapes); each candidate is timed
    as the best of ``repeat`` runs after one warm-up; the search stops after ``budget_s`` seconds, keeping
    the best found. Parameters the caller passed to ``spmm``/``sddmm`` explicitly are not searched.
    """
    if repeat < 1 or budget_s < 0:
        raise ValueError(f"tune needs repeat >= 1 and budget_s >= 0, got repeat={repeat}, budget_s={budget_s}")
    tensors = synthetic_inputs(kernel) if inputs is None else inputs
    threads = kernel._threads()
    name = store.key(kernel, threads)
    record = store.load(name) if use_cache else None
    if record is not None:
        tuned = _from_record(kernel, name, record)
        if tuned is not None:
            return tuned

    def measure(candidate: Kernel) -> float:
        return best_ms(lambda: candidate.evaluate(tensors, want_arg=False), repeat)

    deadline = time.perf_counter() + budget_s
    best, best_kernel = current_config(kernel), kernel
    best_time = default_ms = measure(kernel)
    tried: dict[Config, float] = {best: best_time}
    space = coordinates(kernel)
    total = sum(len(c.values) for c in space)
    with Progress(total, "tune", enabled=progress) as bar:
        improved = True
        while improved and time.perf_counter() < deadline:
            improved = False
            for coordinate in space:
                for value in coordinate.values:
                    config = moved(best, coordinate, value)
                    bar.update(status=f"best {best_time:.2f} ms ({best.describe()})")
                    if config in tried or time.perf_counter() >= deadline:
                        continue
                    try:
                        candidate = apply(kernel, config)
                    except (ValueError, CompileError):
                        continue  # a combination the template rejects
                    tried[config] = measure(candidate)
                    if tried[config] < best_time:
                        best, best_kernel, best_time, improved = config, candidate, tried[config], True
            bar.total += total if improved else 0
    result = TuneResult(best, best_time, default_ms, len(tried), from_cache=False)
    if use_cache:
        store.save(name, {"config": best.to_json(), "ms": best_time, "default_ms": default_ms, "tried": len(tried)})
    best_kernel.tuning = result
    return best_kernel
