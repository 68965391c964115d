"""The search space of one kernel: template parameters and the FDS split factor, as coordinates.

A ``Config`` is everything the tuner may change about a compiled kernel. The space is a list of
coordinates (one parameter, or a pair that interacts, such as source partitions x feature tiles, the
paper's Figure 14); the search walks them one at a time. Parameters the caller fixed are left out.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

import torch

from ..backends.gpu.templates import hub_capacity
from ..schedule import AxisPlan, Schedule
from ..te.expr import Var
from ..templates.kernel import Kernel
from ..templates.params import SDDMMParams, SpMMParams

PARTITIONS = (1, 2, 4, 8)  # CPU only: source partitions are an L3 technique
ROWS_PER_PROGRAM = (1, 4, 16)  # GPU only: destination rows packed into one program
FEATURE_TILES = (1, 2, 4)
SPLIT_FACTORS = (None, 8, 32)  # None: the axis is not split (the compiler vectorises it whole)
EDGE_ORDERS = ("hilbert", "user", "csr")


@dataclass(frozen=True)
class Config:
    """Template parameters plus the split factor of the schedule's vectorised feature axis."""

    params: SpMMParams | SDDMMParams
    split: int | None

    def to_json(self) -> dict[str, Any]:
        """The configuration as JSON data, read back by ``from_json``."""
        return {"params": asdict(self.params), "split": self.split}

    @classmethod
    def from_json(cls, kind: str, data: dict[str, Any]) -> Config:
        params_class = SpMMParams if kind == "spmm" else SDDMMParams
        return cls(params_class(**data["params"]), data["split"])

    def describe(self) -> str:
        """Only what differs from the class defaults, e.g. ``num_partitions=2 split=8``."""
        default = type(self.params)()
        changed = [
            f"{f.name}={getattr(self.params, f.name)}"
            for f in fields(self.params)
            if f.name != "num_threads" and getattr(self.params, f.name) != getattr(default, f.name)
        ]
        return " ".join([*changed, f"split={self.split}"] if self.split else changed) or "defaults"


@dataclass(frozen=True)
class Coordinate:
    """One direction of the search: the fields it sets and the values (tuples, one per field) it tries."""

    names: tuple[str, ...]
    values: tuple[tuple[Any, ...], ...]


def vector_axis(schedule: Schedule) -> Var:
    """The axis the schedule vectorises (the default schedule's choice), else the innermost output axis."""
    for axis in (*schedule.op.reduce_axis, *schedule.op.axis):
        plan = schedule.plans.get(axis.name)
        if plan is not None and plan.vectorize:
            return axis
    return schedule.op.axis[-1]


def with_split(schedule: Schedule, factor: int | None) -> Schedule:
    """A copy of ``schedule`` whose vectorised axis is split by ``factor`` (None: not split)."""
    axis = vector_axis(schedule)
    plans = {name: replace(plan) for name, plan in schedule.plans.items()}
    copy = Schedule(schedule.op, plans, list(schedule.order) if schedule.order else None)
    plan = copy.plans.setdefault(axis.name, AxisPlan())
    plan.factor = factor
    if factor is not None:
        plan.vectorize = True
    return copy


def current_config(kernel: Kernel) -> Config:
    """The configuration ``kernel`` was compiled with."""
    schedule = kernel.spec.schedule
    plan = schedule.plans.get(vector_axis(schedule).name, AxisPlan())
    return Config(kernel.spec.params, plan.factor)


def apply(kernel: Kernel, config: Config) -> Kernel:
    """``kernel`` rebuilt with ``config`` (compiled, or taken from the kernel cache)."""
    if config == current_config(kernel):
        return kernel
    return kernel.reconfigured(config.params, with_split(kernel.spec.schedule, config.split))


def coordinates(kernel: Kernel) -> list[Coordinate]:
    """The coordinates the tuner may move for this kernel, minus the parameters the caller fixed."""
    spec, fixed = kernel.spec, kernel.fixed_params
    inner = spec.op.axis[-1].extent
    tiles = tuple(t for t in FEATURE_TILES if t <= inner)
    extent = vector_axis(spec.schedule).extent
    splits = tuple((s,) for s in SPLIT_FACTORS if s is None or s < extent)
    found: list[Coordinate] = []
    if spec.kind == "spmm":
        on_gpu = kernel.target == "gpu"
        parts = (1,) if on_gpu else tuple(p for p in PARTITIONS if p <= max(kernel.graph.num_src_nodes, 1))
        grid = tuple(
            itertools.product(
                parts if "num_partitions" not in fixed else (spec.params.num_partitions,),
                tiles if "num_feature_tiles" not in fixed else (spec.params.num_feature_tiles,),
            )
        )
        found.append(Coordinate(("num_partitions", "num_feature_tiles"), grid))
        found.append(Coordinate(("row_order",), (("natural",), ("degree",))))
        if on_gpu:
            found.append(Coordinate(("rows_per_program",), tuple((r,) for r in ROWS_PER_PROGRAM)))
            threshold = hub_threshold_candidate(kernel)
            if threshold and spec.params.strategy == "gar":
                found.append(Coordinate(("hub_threshold",), ((0,), (threshold,))))
        if spec.reducer in ("sum", "mean") and not fixed & {"num_partitions", "row_order"}:
            found.append(Coordinate(("strategy",), (("gar",), ("gas",))))
    else:
        found.append(Coordinate(("edge_order",), tuple((o,) for o in EDGE_ORDERS)))
        if spec.kind == "sddmm" and kernel.target == "cpu" and spec.params.edge_order == "csr":
            parts = tuple((p,) for p in PARTITIONS if p <= max(kernel.graph.num_src_nodes, 1))
            found.append(Coordinate(("num_partitions",), parts))  # the CSR walk's source segments
        found.append(Coordinate(("num_feature_tiles",), tuple((t,) for t in tiles)))
        if spec.params.write_buckets:  # the default stages scattered writes; the search may write directly
            found.append(Coordinate(("write_buckets",), ((spec.params.write_buckets,), (0,))))
    found = [
        Coordinate(c.names, c.values) for c in found if not all(name in fixed for name in c.names) and len(c.values) > 1
    ]
    if len(splits) > 1:
        found.append(Coordinate(("split",), splits))
    return found


def hub_threshold_candidate(kernel: Kernel) -> int:
    """The out-degree that fills the staged hub tile (hybrid partitioning) with the highest-degree sources,
    if those are hubs at all (at least four times the average degree); 0 where nothing qualifies."""
    degrees = kernel.graph.out_degrees()
    capacity = hub_capacity(kernel.spec)
    if degrees.numel() == 0:
        return 0
    kth = int(torch.topk(degrees, min(capacity, degrees.numel())).values[-1])
    threshold = max(kth, 4 * math.ceil(kernel.graph.num_edges / max(kernel.graph.num_src_nodes, 1)), 1)
    return threshold if int(degrees.max()) >= threshold else 0


def moved(config: Config, coordinate: Coordinate, value: tuple[Any, ...]) -> Config:
    """``config`` with the coordinate's fields set to ``value``."""
    changes = dict(zip(coordinate.names, value, strict=True))
    split = changes.pop("split", config.split)
    if isinstance(config.params, SDDMMParams):  # only the CSR walk takes segments, and it stages in one
        order = changes.get("edge_order", config.params.edge_order)
        parts = changes.get("num_partitions", config.params.num_partitions)
        if order != "csr":
            changes["num_partitions"] = 1
        elif "num_partitions" in changes and parts > 1:
            changes["write_buckets"] = 0  # a move to segments drops the staging
        elif changes.get("write_buckets", config.params.write_buckets):
            changes["num_partitions"] = 1  # a move to staging walks in one segment
    params = replace(config.params, **changes)
    if isinstance(params, SpMMParams) and params.strategy == "gas":
        # GAS walks the COO: no partitions, row order or staged hubs apply
        params = replace(params, num_partitions=1, row_order="natural", hub_threshold=0)
    return Config(params, split)
