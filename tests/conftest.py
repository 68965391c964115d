"""Shared test helpers: random multigraphs with the awkward cases every kernel must handle."""

from __future__ import annotations

import os

import numpy as np
import pytest
import scipy.sparse as sp
import torch
from hypothesis import strategies as st

if "PYTEST_XDIST_WORKER_COUNT" in os.environ:
    # pytest-xdist's workers share the cores: each runs its kernels on its share, since OpenMP threads that spin
    # waiting for work on a core another worker is using slow many small kernel calls down tenfold
    SHARE = max(1, (os.cpu_count() or 1) // int(os.environ["PYTEST_XDIST_WORKER_COUNT"]))
    os.environ.setdefault("OMP_NUM_THREADS", str(SHARE))
    torch.set_num_threads(SHARE)

if not torch.cuda.is_available():
    # GPU kernels run in Triton's interpreter on CPU tensors; Triton reads this when it is first imported, which
    # may be inside the first import of featgraph (through torch_geometric, say), so it is set before that
    os.environ.setdefault("TRITON_INTERPRET", "1")

from featgraph import Graph  # noqa: E402 - after TRITON_INTERPRET
from featgraph.graph.interop import stub_dgl_graphbolt  # noqa: E402

# pytest-xdist's controller imports the module of a warning a worker reports: a DGL module must import there too
stub_dgl_graphbolt()


@st.composite
def typed_edges(
    draw: st.DrawFn,
    relations: list[tuple[str, str, str]],
    max_vertices: int,
    max_edges: int,
    min_vertices: int = 0,
    min_relations: int = 2,
    required: tuple[tuple[str, str, str], ...] = (),
) -> tuple[dict[tuple[str, str, str], tuple[list[int], list[int]]], dict[str, int]]:
    """A typed graph as (per relation its (src, dst) id lists, vertices per type): ``relations``' types of
    ``min_vertices``-``max_vertices`` vertices, the ``required`` relations and others of ``relations`` (at least
    ``min_relations`` in all), each 0-``max_edges`` edges drawn with repeats, so duplicate edges, empty
    relations and isolated vertices occur."""
    types = sorted({t for relation in relations for t in (relation[0], relation[2])})
    counts = {t: draw(st.integers(min_vertices, max_vertices)) for t in types}
    optional = [relation for relation in relations if relation not in required]
    least = max(0, min_relations - len(required))
    chosen = [
        *required,
        *draw(st.lists(st.sampled_from(optional), min_size=least, max_size=len(optional), unique=True)),
    ]
    edges = {}
    for src_type, rel, dst_type in chosen:
        ids = st.tuples(st.integers(0, max(counts[src_type] - 1, 0)), st.integers(0, max(counts[dst_type] - 1, 0)))
        pairs = draw(st.lists(ids, max_size=max_edges if counts[src_type] and counts[dst_type] else 0))
        edges[(src_type, rel, dst_type)] = ([u for u, _ in pairs], [v for _, v in pairs])
    return edges, counts


def random_edges(num_nodes: int, num_edges: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Random edges over the first 3/4 of the ids (the rest stay isolated), plus duplicates and self loops."""
    gen = torch.Generator().manual_seed(seed)
    active = max(1, (3 * num_nodes) // 4)
    src = torch.randint(0, active, (num_edges,), generator=gen)
    dst = torch.randint(0, active, (num_edges,), generator=gen)
    if num_edges >= 4:
        src[-2:], dst[-2:] = src[:2], dst[:2]  # duplicate edges
        dst[2] = src[2]  # a self loop
    return src, dst


def adjacency(src: torch.Tensor, dst: torch.Tensor, num_nodes: int, values: np.ndarray | None = None) -> sp.csr_matrix:
    """scipy reference: A[dst, src] summed over duplicates, so A @ X aggregates in-neighbours."""
    data = np.ones(src.numel()) if values is None else values
    return sp.coo_matrix((data, (dst.numpy(), src.numpy())), shape=(num_nodes, num_nodes)).tocsr()


@pytest.fixture(params=[(0, 0), (1, 0), (7, 3), (40, 200), (257, 3000)], ids=lambda p: f"n{p[0]}-e{p[1]}")
def graph_case(request) -> tuple[Graph, torch.Tensor, torch.Tensor]:
    num_nodes, num_edges = request.param
    src, dst = random_edges(num_nodes, num_edges, seed=num_nodes + num_edges)
    return Graph(src, dst, num_nodes), src, dst


@pytest.fixture
def gpu() -> torch.device:
    """Where ``target="gpu"`` kernels run in this test: the CUDA device when there is one, else CPU tensors
    through Triton's interpreter (CI's case; keep such graphs to a few hundred vertices)."""
    pytest.importorskip("triton")
    if torch.cuda.is_available():
        return torch.device("cuda", torch.cuda.current_device())
    if os.environ.get("TRITON_INTERPRET") != "1":
        pytest.skip("no CUDA GPU, and Triton's interpreter was not enabled before triton was imported")
    return torch.device("cpu")


@pytest.fixture
def cuda(gpu: torch.device) -> torch.device:
    """The CUDA device, for tests that need compiled kernels (whole training runs, torch.compile on the GPU,
    timings): skipped under Triton's interpreter."""
    if gpu.type != "cuda":
        pytest.skip("needs a CUDA GPU (compiled Triton kernels)")
    return gpu


@pytest.fixture
def interpreted_gpu(gpu: torch.device) -> None:
    """For tests whose bodies run CPU tensors through ``default_target("gpu")``: only under Triton's
    interpreter (on a CUDA machine the tests that take ``gpu`` run the compiled kernels on CUDA tensors)."""
    if gpu.type != "cpu":
        pytest.skip("runs CPU tensors through the GPU kernels, which needs Triton's interpreter")


def assert_gpu_target_agrees(fn, graph: Graph, inputs: tuple[torch.Tensor, ...], device: torch.device) -> torch.Tensor:
    """Run ``fn(graph, *inputs)`` forward and backward on the CPU target, and on the GPU target with the graph
    and inputs on ``device`` (the ``gpu`` fixture: CUDA, or CPU tensors through Triton's interpreter); the
    outputs and the gradients of every input must agree (the CPU ops are gradchecked against dense
    references). Returns the GPU target's output, on the CPU."""
    import featgraph as fg

    results = []
    for target, dev in (("cpu", torch.device("cpu")), ("gpu", device)):
        args = tuple(x.detach().to(dev).requires_grad_(x.requires_grad) for x in inputs)
        with fg.default_target(target):
            out = fn(graph.to(dev), *args)
            upstream = torch.linspace(-1, 1, out.numel(), dtype=out.dtype, device=dev).view_as(out)
            grads = torch.autograd.grad(out, args, upstream, allow_unused=True)
        results.append((out.detach().cpu(), [None if g is None else g.cpu() for g in grads]))
    (cpu_out, cpu_grads), (gpu_out, gpu_grads) = results
    torch.testing.assert_close(gpu_out, cpu_out)
    for got, want in zip(gpu_grads, cpu_grads, strict=True):
        assert (got is None) == (want is None)
        if got is not None:
            torch.testing.assert_close(got, want)
    return gpu_out


# what the slow marker covers: the doc build, torchrun launches, fuzz searches, bench commands
SLOW = ("tests/test_docs.py", "tests/distributed/test_launch.py", "test_fuzz.py", "tests/bench/")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests that run the GPU target (they take the ``gpu`` fixture, directly or through ``interpreted_gpu``)
    carry the ``gpu`` marker (``pytest -m gpu``: the device check's test run, ``featgraph bench gpu-check``);
    the files in ``SLOW`` the ``slow`` marker (``make test-fast`` leaves them out)."""
    for item in items:
        if "gpu" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.gpu)
        path = item.path.as_posix()
        if any(part in path for part in SLOW):
            item.add_marker(pytest.mark.slow)
