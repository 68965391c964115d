"""``Kernel``: a compiled template bound to one graph, called with torch tensors by placeholder name."""

from __future__ import annotations

import hashlib
import itertools
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import replace
from typing import Any

import torch

from ..backends import cpu, gpu
from ..backends.cpu import buffers
from ..backends.gpu.aot import compiling
from ..graph import Compressed, Graph
from ..kernel_spec import (
    HALF_DTYPES,
    TORCH_DTYPES,
    GraphRows,
    KernelSpec,
    indexed_by,
    output_dtype,
    placeholder_roles,
    stored_dtype,
)
from ..native import toolchain
from ..recent import Recent
from ..schedule import Schedule, build_schedule
from ..te.bounds import SubscriptCheck
from ..te.expr import ComputeOp, Var, per_op

TARGETS = ("cpu", "gpu")


_DEFAULT_TARGET: ContextVar[str | None] = ContextVar("featgraph_default_target", default=None)


@contextmanager
def default_target(target: str) -> Iterator[None]:
    """Inside the block, templates and ops given no target compile for ``target``: e.g. "gpu" runs every op
    through the Triton kernels, on CPU tensors when ``TRITON_INTERPRET=1``."""
    if target not in TARGETS:
        raise ValueError(f"target must be one of {TARGETS}, got {target!r}")
    token = _DEFAULT_TARGET.set(target)
    try:
        yield
    finally:
        _DEFAULT_TARGET.reset(token)


def resolve_target(graph: Graph, target: str | None) -> str:
    """``None`` takes the ``default_target`` in force, else follows the graph: "gpu" for a graph on a CUDA
    device, "cpu" otherwise."""
    return device_target(graph.device) if target is None else target


def device_target(device: torch.device) -> str:
    """The ``default_target`` in force, else "gpu" for a CUDA device and "cpu" otherwise."""
    return _DEFAULT_TARGET.get() or ("gpu" if device.type == "cuda" else "cpu")


def in_dtype(tensor: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``tensor.to(dtype)``, skipping the call where the dtype already matches (it costs microseconds, which
    small graphs' kernels pay on every input and output)."""
    return tensor if tensor.dtype == dtype else tensor.to(dtype)


def cached_kernel(graph: Graph, key: tuple, build: Callable[[], Kernel]) -> Kernel:
    """A kernel kept on the graph under ``key`` and the target it is built for; it holds the graph weakly
    (``Kernel.owned_by_graph``), so the graph and its kernels go with the graph's last reference."""

    def owned() -> Kernel:
        kernel = build()
        kernel.owned_by_graph()
        return kernel

    return graph.cached((*key, resolve_target(graph, None)), owned)


Udf = Callable[[Var, Var, Var], ComputeOp]
UdfOrOp = Udf | ComputeOp  # what the templates take: a UDF, or one traced already (``shared_op``'s)
Fds = Callable[[Schedule, ComputeOp], None] | Schedule | None
# a search returning the fastest configuration of a kernel (``featgraph.tuning.tune``), handed in from above
Tuner = Callable[["Kernel"], "Kernel"]


def trace_udf(udf: Udf) -> ComputeOp:
    """Call the UDF once with the symbolic graph variables; it must return ``te.compute(...)``."""
    op = udf(Var("src", "src"), Var("dst", "dst"), Var("eid", "eid"))
    if not isinstance(op, ComputeOp):
        raise TypeError(f"a UDF must return te.compute(...), got {type(op).__name__}")
    return op


_shared_ops: Recent[ComputeOp] = Recent(1024)  # traced UDFs ``shared_op`` keeps (a few kB each)


def shared_op(key: tuple, udf: Udf) -> ComputeOp:
    """``trace_udf(udf)``, kept process-wide under ``key`` for the 1,024 most recent keys.

    Its vertex and edge placeholders must have no row count (``te.placeholder((None, ...))``): the op then
    describes the same kernel on every graph, and each mini-batch's fresh block binds the op traced for the
    first block, whose checks, description and gradients are derived once and kept on it (``te.expr.per_op``)
    instead of costing every block's kernels again (``featgraph bench minibatch``'s format share). ``key``
    must name everything the UDF depends on but the graph."""

    def trace() -> ComputeOp:
        op = trace_udf(udf)
        roles = placeholder_roles(op)
        counted = [p.name for p in (*roles.vertex, *roles.edge) if p.shape[0] is not None]
        if counted:
            raise ValueError(
                f"shared_op: placeholders {counted} have a row count, which would bind one graph's rows to "
                "every graph: give vertex and edge placeholders None as their first dimension"
            )
        return op

    return _shared_ops.get(key, trace)


@per_op
def compute_dtype(op: ComputeOp) -> str:
    """float64 if any input is float64, else float32: float16/bfloat16 inputs are read in their own dtype
    and accumulate in float32 registers."""
    return "float64" if op.dtype == "float64" or any(p.dtype == "float64" for p in op.placeholders) else "float32"


def graph_rows(graph: Graph) -> GraphRows:
    """(source vertices, destination vertices, edges): the rows of placeholders without a row count."""
    return (graph.num_src_nodes, graph.num_dst_nodes, graph.num_edges)


def check_placeholder_rows(op: ComputeOp, graph: Graph) -> None:
    """Source data must have one row per source vertex, destination data one per destination vertex,
    edge data one per edge (a placeholder without a row count has them by definition)."""
    for kind, rows, what in (
        ("src", graph.num_src_nodes, "source vertices" if graph.is_bipartite else "nodes"),
        ("dst", graph.num_dst_nodes, "destination vertices" if graph.is_bipartite else "nodes"),
        ("eid", graph.num_edges, "edges"),
    ):
        for p in indexed_by(op, kind):
            if p.shape[0] is not None and p.shape[0] != rows:
                raise ValueError(
                    f"placeholder {p.name!r} is indexed by {kind} so needs {rows} rows (the graph's {what}), "
                    f"but its shape is {p.shape}"
                )


def edge_list(graph: Graph, order: str, index: torch.dtype, target: str) -> list[torch.Tensor | None]:
    """(srcs, dsts, user edge ids) in the given edge order, as edge-parallel templates of ``target`` read
    them; cached on the graph, so every kernel of the graph (forward and gradients) shares one copy. In the
    user's order the CPU's ids are None: its templates take the j-th edge as user edge j (``FG_EID``), which
    saves an array of one index per edge."""

    def build() -> list[torch.Tensor | None]:
        src, dst = graph.coo()
        if order == "user":  # the COO as it is: no gathers, the sources shared with ``edge_sources``
            ids = None if target == "cpu" else torch.arange(graph.num_edges, dtype=index, device=src.device)
            return [edge_sources(graph, index), graph.coo_row(1, index), ids]
        if order == "csr":  # the kernels' CSR's own sources and edge ids (``visit_order``), beside each row
            csr = graph.csr(graph.index_dtype)
            rows = torch.arange(graph.num_dst_nodes, dtype=index, device=src.device)
            rows = rows.repeat_interleave(csr.indptr.diff(), output_size=graph.num_edges)
            return [csr.indices.to(index), rows, csr.edge_ids.to(index)]
        ids = graph.edge_order(order)  # the Hilbert order is kept in the graph's index type: shared, not copied
        return [src[ids].to(index), dst[ids].to(index), ids.to(index)]

    key = ("edge_list", order, index, target == "cpu" and order == "user")  # the other orders' lists are shared
    return graph.cached(key, build)


def visit_order(graph: Graph, order: str) -> torch.Tensor:
    """User edge ids in the order an edge template visits them in ``order``: for "csr", the kernels' CSR's
    (``walked_csr``, ``edge_list``), which lists a row's sources in ascending order on the CPU."""
    return graph.csr(graph.index_dtype).edge_ids if order == "csr" else graph.edge_order(order)


def walked_csr(graph: Graph, parts: int, index: torch.dtype) -> Compressed:
    """The kernels' CSR (``visit_order(graph, "csr")``) as a CPU SDDMM in CSR order walks it, in ``parts``
    source segments: their pointers into it (``Graph.source_partitions``), or its own ``indptr`` for one; index
    arrays in ``index``. Nothing per edge is copied where ``index`` is the graph's own index type."""
    if parts > 1:
        return graph.source_partitions(parts, index).csr
    return Compressed(*(t.to(index) for t in graph.csr(graph.index_dtype)))


def edge_sources(graph: Graph, index: torch.dtype) -> torch.Tensor:
    """The source vertex of each user edge id (the graph's own array where it has one of that type,
    ``Graph.coo_row``), cached on the graph."""
    return graph.cached(("edge-sources", index), lambda: graph.coo_row(0, index))


def divide_by_in_degree(graph: Graph, values: torch.Tensor) -> torch.Tensor:
    """``values[v] / max(in_degree(v), 1)``: a sum turned into a mean (or a mean's gradient)."""
    degree = graph.in_degrees().clamp(min=1).to(values.dtype)
    return values / degree.view(-1, *[1] * (values.dim() - 1))


def value_range(t: torch.Tensor) -> tuple[int, int] | None:
    """(min, max) of an int64 tensor's values, None when it is empty."""
    if t.numel() == 0:
        return None
    low, high = torch.aminmax(t)
    return int(low), int(high)


# every live kernel by its ``key``, which the ``featgraph::kernel`` operator takes in place of the object
_KERNELS: weakref.WeakValueDictionary[str, Kernel] = weakref.WeakValueDictionary()
_SERIALS = itertools.count()


class Kernel:
    """One fused kernel: template + UDF + schedule, lowered and compiled for ``target``.

    Under ``torch.compile`` a call is the ``featgraph::kernel`` operator, named by ``key`` (template, source
    hash, serial: a kernel is bound to its graph), with a fake implementation and a gradient operator."""

    def __init__(
        self,
        graph: Graph,
        spec: KernelSpec,
        target: str,
        fixed_params: frozenset[str] = frozenset(),
        tuner: Tuner | None = None,
    ) -> None:
        if target not in TARGETS:
            raise ValueError(f"target must be one of {TARGETS}, got {target!r}")
        if target == "gpu":
            gpu.check_device(graph.device)
        elif graph.device.type != "cpu":
            raise ValueError(f"target='cpu' needs a graph on the CPU, this one is on {graph.device}")
        placeholder_roles(spec.op)  # validates how placeholders are indexed
        check_placeholder_rows(spec.op, graph)
        # each placeholder's shape on this graph (the graph's rows where the placeholder has no row count)
        self._shapes = {p.name: spec.placeholder_shape(p) for p in spec.op.placeholders}
        self._subscripts = SubscriptCheck(spec.op, graph.num_src_nodes, graph.num_dst_nodes, graph.num_edges)
        self._graph: Graph | None = graph
        self._graph_ref = weakref.ref(graph)
        self.spec = spec
        self.target = target
        self.fixed_params = fixed_params  # template parameters the caller chose; the tuner leaves them alone
        self.tuner = tuner  # tunes this kernel's gradient kernels too when they are built
        self.tuning = None  # the tuner's record (featgraph.tuning.TuneResult) once tuned
        self._backend = gpu if target == "gpu" else cpu
        self.source = self._backend.source(spec)
        self._run = self._backend.compile_source(self.source)  # build (or fetch from the disk cache) now
        self.key = f"{spec.kind}-{hashlib.sha256(self.source.encode()).hexdigest()[:16]}-{next(_SERIALS)}"
        _KERNELS[self.key] = self
        self._names = tuple(p.name for p in spec.op.placeholders)
        self._out_dtype = TORCH_DTYPES[output_dtype(spec.op)]
        self._compute = TORCH_DTYPES[spec.dtype]
        self._stored = TORCH_DTYPES[stored_dtype(spec)]  # the output buffer's dtype as the kernel writes it
        self._gradients: dict[tuple[str, str], list] = {}

    @property
    def graph(self) -> Graph:
        """The graph this kernel runs over."""
        graph = self._graph if self._graph is not None else self._graph_ref()
        if graph is None:
            raise RuntimeError(f"kernel {self.key}: its graph was freed (a kernel kept by a graph lives with it)")
        return graph

    @property
    def held_by_graph(self) -> bool:
        """Whether the graph keeps this kernel and the kernel holds the graph weakly (``owned_by_graph``)."""
        return self._graph is None

    def owned_by_graph(self) -> None:
        """Hold the graph weakly from now on, as the graph (or a graph it keeps, such as its ``reverse()``)
        keeps this kernel: a strong reference both ways would be a cycle that only Python's cyclic collector
        frees, keeping a mini-batch's formats and kernels alive for batches after it. The gradient kernels
        built for this one run over the same graph or its reverse, so they follow."""
        self._graph = None
        for parts in self._gradients.values():
            for _, part in parts:
                part.owned_by_graph()

    def reconfigured(self, params: object, schedule: Schedule) -> Kernel:
        """The same UDF on the same graph with other template parameters and FDS (a tuner candidate)."""
        spec = replace(self.spec, params=params, schedule=schedule)
        return type(self)(self.graph, spec, self.target, self.fixed_params, self.tuner)

    @property
    def placeholder_names(self) -> tuple[str, ...]:
        return self._names

    def input_shape(self, name: str) -> tuple[int, ...]:
        """The shape the tensor bound to placeholder ``name`` takes on this kernel's graph."""
        return self._shapes[name]

    def output_shape(self) -> tuple[int, ...]:
        """The output's shape: per destination (SpMM), per edge (SDDMM), or the dense shape of an edge sum
        or a winner scatter."""
        if self.spec.kind == "winner":
            return tuple(self.spec.params.shape)
        rows = {"spmm": (self.graph.num_dst_nodes,), "sddmm": (self.graph.num_edges,), "edge_sum": ()}
        return (*rows[self.spec.kind], *self.spec.op.shape)

    def _check_tensors(self, tensors: dict[str, Any]) -> None:
        """One tensor per placeholder, each on the graph's device (a tensor on the meta device would otherwise
        reach the operator's shape rule and come back as a result)."""
        if set(tensors) != set(self._names):
            missing, extra = sorted(set(self._names) - set(tensors)), sorted(set(tensors) - set(self._names))
            raise TypeError(f"kernel takes placeholders {sorted(self._names)}; missing {missing}, unexpected {extra}")
        for name in self._names:
            t = tensors[name]
            if not isinstance(t, torch.Tensor):
                raise TypeError(f"{name}: expected a torch.Tensor, got {type(t).__name__}")
            if t.device != self.graph.device:
                raise ValueError(
                    f"{name}: the kernel's graph is on {self.graph.device} (target={self.target!r}), "
                    f"got a tensor on {t.device}"
                )

    def _bind(self, tensors: dict[str, Any]) -> list[torch.Tensor]:
        """Validate the inputs and return them in placeholder order, contiguous; float16/bfloat16 data as it
        is (the kernel converts in registers), other floating data in the compute dtype."""
        self._check_tensors(tensors)
        bound = []
        for p in self.spec.op.placeholders:
            t = tensors[p.name]
            if t.dtype != TORCH_DTYPES[p.dtype]:
                raise TypeError(f"{p.name}: placeholder dtype is {p.dtype}, got a tensor of {t.dtype}")
            if tuple(t.shape) != self._shapes[p.name]:
                raise ValueError(f"{p.name}: expected shape {self._shapes[p.name]}, got {tuple(t.shape)}")
            keep = p.dtype == "int64" or p.dtype in HALF_DTYPES
            bound.append(buffers.contiguous(t.detach() if keep else in_dtype(t.detach(), self._compute)))
        if self._subscripts.deferred:  # only the ids the deferred checks read are scanned
            reads = self._subscripts.data_placeholders
            named = zip(self.spec.op.placeholders, bound, strict=True)
            self._subscripts.check_data({p.name: value_range(t) for p, t in named if p.name in reads})
        return bound

    def evaluate(self, tensors: dict[str, Any], want_arg: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Run the compiled kernel (no autograd): the output and, for max/min with ``want_arg``, the arg."""
        raise NotImplementedError

    def _apply(self, tensors: dict[str, Any], want_arg: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Like ``evaluate``, differentiable: the ``featgraph::kernel`` operator."""
        self._check_tensors(tensors)
        # the operator ``gradients`` registers with the gradients it derives (it sits above the templates)
        out, arg = torch.ops.featgraph.kernel.default(self.key, [tensors[n] for n in self._names])
        return out, (arg if want_arg else None)

    def __call__(self, **tensors: Any) -> torch.Tensor:
        """The kernel's output; differentiable in every floating input that requires grad."""
        return self._apply(tensors, want_arg=False)[0]

    def compile_for_gpu(self, arch: int = 90, **tensors: Any) -> list:
        """Compile the Triton launches this GPU kernel makes for ``tensors`` for an NVIDIA architecture
        (90: Hopper), without running them: a compile check that needs no GPU (on CPU tensors it needs
        ``TRITON_INTERPRET=1``, as the kernel's construction does). Returns ``gpu.aot.CompiledLaunch``es
        (registers, spills, shared memory)."""
        if self.target != "gpu":
            raise ValueError(f"compile_for_gpu needs a target='gpu' kernel, this one targets {self.target!r}")
        with compiling(arch) as launches:
            self.evaluate(tensors, want_arg=True)
        return launches

    def _threads(self) -> int:
        return self.spec.params.num_threads or toolchain.num_threads()

    def _new_output(self, shape: tuple[int, ...], dtype: torch.dtype, zero: bool = False) -> torch.Tensor:
        """A fresh output tensor on the graph's device; on the CPU a large one reuses a pooled buffer
        (``backends/cpu/buffers.py``: fresh pages cost a fault each)."""
        if self.graph.device.type == "cpu":
            return (buffers.zeros if zero else buffers.empty)(shape, dtype)
        return (torch.zeros if zero else torch.empty)(shape, dtype=dtype, device=self.graph.device)

    def _launch(self, pointers: list[torch.Tensor | None], scalars: list[int]) -> None:
        self._backend.launch(self._run, pointers, scalars)


def template_kernel(
    kind: str,
    graph: Graph,
    udf: UdfOrOp,
    reducer: str | None,
    target: str,
    fds: Fds,
    make_params: Callable[[ComputeOp, str], object],
    kernel_class: type[Kernel],
    fixed_params: frozenset[str] = frozenset(),
    tuner: Tuner | None = None,
) -> Kernel:
    """Shared front half of ``spmm``/``sddmm``: trace the UDF (an op traced already is taken as it is), build
    its schedule and parameters; with
    ``tuner`` the kernel it returns, its search free in the parameters the caller did not fix."""
    if not isinstance(graph, Graph):
        raise TypeError(f"expected a featgraph.Graph, got {type(graph).__name__}")
    target = resolve_target(graph, target)
    op = udf if isinstance(udf, ComputeOp) else trace_udf(udf)
    spec = KernelSpec(
        kind=kind,
        op=op,
        schedule=build_schedule(op, fds),
        reducer=reducer,
        params=make_params(op, target),
        dtype=compute_dtype(op),
        index_dtype="int32" if graph.index_dtype == torch.int32 else "int64",
        rows=graph_rows(graph),
    )
    kernel = kernel_class(graph, spec, target, fixed_params, tuner)
    return kernel if tuner is None else tuner(kernel)


def registered(key: str) -> Kernel:
    """The live kernel named ``key``."""
    kernel = _KERNELS.get(key)
    if kernel is None:
        raise KeyError(f"no live featgraph kernel is named {key!r}: a kernel runs while its Python object lives")
    return kernel
