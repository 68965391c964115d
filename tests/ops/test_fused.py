import pytest
import torch
from torch.autograd import gradcheck

import featgraph as fg
from featgraph import ops
from featgraph.templates.kernel import default_target
from tests.conftest import assert_gpu_target_agrees, random_edges

N, E = 15, 70


@pytest.fixture(scope="module")
def graph():
    src, dst = random_edges(N, E, seed=51)  # has a self loop, a duplicate, isolated vertices
    src[-3], dst[-3] = src[2], dst[2]  # and a duplicated self loop
    return fg.Graph(src, dst, N)


def dense_gcn(g, x, w, add_self_loops=True, fill_value=1.0):
    """PyG's gcn_norm densely: with loops, each vertex gets one loop weighing its last existing loop's
    weight, else fill_value, and the existing loops leave the adjacency."""
    src, dst = g.coo()
    loop = src == dst
    keep = ~loop if add_self_loops else torch.ones_like(loop)
    a = torch.zeros(N, N, dtype=x.dtype).index_put_((dst[keep], src[keep]), w[keep], accumulate=True)
    if add_self_loops:
        diag = torch.full((N,), fill_value, dtype=x.dtype)
        for e in loop.nonzero().flatten().tolist():  # in edge order: the last loop wins
            diag[src[e]] = w[e]
        a = a + torch.diag(diag)
    deg = a.sum(1)
    dinv = deg.pow(-0.5).masked_fill(deg == 0, 0)
    return dinv.unsqueeze(1) * (a @ (dinv.unsqueeze(1) * x))


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("loops", [False, True])
@pytest.mark.parametrize("fill", [1.0, 2.0])
def test_gcn_aggregate_against_dense(graph, weighted, loops, fill):
    x = torch.randn(N, 5, dtype=torch.float64, requires_grad=True)
    w = (torch.rand(E, dtype=torch.float64) + 0.1).requires_grad_() if weighted else None
    out = ops.gcn_aggregate(graph, x, w, add_self_loops=loops, fill_value=fill)
    ones = torch.ones(E, dtype=torch.float64)
    ref = dense_gcn(graph, x.detach(), w.detach() if weighted else ones, loops, fill)
    torch.testing.assert_close(out, ref)
    inputs = (x, w) if weighted else (x,)
    assert gradcheck(
        lambda *t: ops.gcn_aggregate(graph, t[0], t[1] if weighted else None, loops, fill_value=fill), inputs
    )


@pytest.mark.parametrize(("loops", "normalize"), [(True, True), (False, True), (False, False)])
def test_gcn_aggregate_on_a_graph_without_edges_takes_empty_weights(loops, normalize):
    """E = 0 with weights of shape (0,) is valid input: every vertex gets only its loop (or nothing)."""
    g = fg.Graph(torch.zeros(0, dtype=torch.int64), torch.zeros(0, dtype=torch.int64), N)
    x = torch.randn(N, 3, dtype=torch.float64, requires_grad=True)
    w = torch.zeros(0, dtype=torch.float64, requires_grad=True)
    out = ops.gcn_aggregate(g, x, w, loops, normalize, fill_value=2.0)
    want = dense_gcn(g, x.detach(), w.detach(), loops, 2.0) if normalize else torch.zeros_like(x)
    torch.testing.assert_close(out, want)
    torch.testing.assert_close(out, x.detach() if loops else torch.zeros_like(x))
    assert gradcheck(lambda x, w: ops.gcn_aggregate(g, x, w, loops, normalize, fill_value=2.0), (x, w))


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("improved", [False, True])
def test_gcn_aggregate_matches_pyg_gcn_norm(graph, weighted, improved):
    pytest.importorskip("torch_geometric")
    from torch_geometric.nn.conv.gcn_conv import gcn_norm
    from torch_geometric.utils import scatter

    edge_index = torch.stack(graph.coo())  # duplicated self loops: PyG keeps one per vertex
    w = torch.rand(E) + 0.1 if weighted else None
    # PyG ignores `improved` when no edge weights are given (its loops then all weigh 1); with explicit
    # unit weights it applies A + 2I as documented, which is what featgraph always does
    pyg_w = torch.ones(E) if w is None and improved else w
    ei, norm = gcn_norm(edge_index, pyg_w, N, improved=improved, add_self_loops=True)
    x = torch.randn(N, 4)
    ref = scatter(x[ei[0]] * norm.unsqueeze(1), ei[1], 0, dim_size=N, reduce="sum")
    torch.testing.assert_close(ops.gcn_aggregate(graph, x, w, fill_value=2.0 if improved else 1.0), ref)


def dense_gat(g, feat, a_src, a_dst, slope):
    src, dst = g.coo()
    scores = torch.nn.functional.leaky_relu((feat * a_src).sum(-1)[src] + (feat * a_dst).sum(-1)[dst], slope)
    out = torch.zeros_like(feat)
    for v in range(N):
        into = dst == v
        if into.any():
            alpha = torch.softmax(scores[into], 0)  # (k, heads)
            out[v] = (alpha.unsqueeze(-1) * feat[src[into]]).sum(0)
    return out


@pytest.mark.parametrize("path", ["fused", "per-edge weights"])
def test_gat_attention_against_dense_and_gradcheck(graph, path):
    heads, d = 3, 4
    feat = torch.randn(N, heads, d, dtype=torch.float64, requires_grad=True)
    a_src = torch.randn(heads, d, dtype=torch.float64, requires_grad=True)
    a_dst = torch.randn(heads, d, dtype=torch.float64, requires_grad=True)
    per_edge = path == "per-edge weights"

    def gat(f, s, t):
        result = ops.gat_attention(graph, f, s, t, 0.2, return_attention=per_edge)
        return result[0] if per_edge else result

    torch.testing.assert_close(
        gat(feat, a_src, a_dst), dense_gat(graph, feat.detach(), a_src.detach(), a_dst.detach(), 0.2)
    )
    assert gradcheck(gat, (feat, a_src, a_dst))


def dense_bipartite_gat(src, dst, feat, feat_dst, a_src, a_dst, slope):
    """Softmax over each destination's in-edges of leaky(a_src . feat[u] + a_dst . feat_dst[v]), densely."""
    scores = torch.nn.functional.leaky_relu((feat * a_src).sum(-1)[src] + (feat_dst * a_dst).sum(-1)[dst], slope)
    out = torch.zeros(feat_dst.shape, dtype=feat.dtype)
    for v in range(feat_dst.shape[0]):
        into = dst == v
        if into.any():
            out[v] = (torch.softmax(scores[into], 0).unsqueeze(-1) * feat[src[into]]).sum(0)
    return out


@pytest.mark.parametrize("separate", [False, True], ids=["destinations lead the sources", "own features"])
def test_gat_attention_on_a_block_against_dense_and_gradcheck(separate):
    """A sampled block: 9 sources, of which the first 4 are its destinations (``feat_dst`` None), or the
    destinations' own features; the logits' gradients enter the features' gradient in place."""
    src = torch.tensor([0, 5, 8, 8, 1, 6, 7, 3, 2, 2, 4])
    dst = torch.tensor([0, 0, 0, 1, 1, 1, 2, 2, 2, 2, 2])  # vertex 3 has no in-edge, 2 a duplicate edge
    g = fg.Graph(src, dst, num_nodes=(9, 4))
    heads, d = 2, 3
    feat = torch.randn(9, heads, d, dtype=torch.float64, requires_grad=True)
    own = torch.randn(4, heads, d, dtype=torch.float64, requires_grad=True)
    a_src = torch.randn(heads, d, dtype=torch.float64, requires_grad=True)
    a_dst = torch.randn(heads, d, dtype=torch.float64, requires_grad=True)
    copies = [t.detach().clone() for t in (feat, own, a_src, a_dst)]

    def gat(f, o, s, t):
        return ops.gat_attention(g, f, s, t, 0.2, feat_dst=o if separate else None)

    destinations = own if separate else feat[:4]
    expected = dense_bipartite_gat(src, dst, feat, destinations, a_src, a_dst, 0.2)
    torch.testing.assert_close(gat(feat, own, a_src, a_dst), expected)
    inputs = (feat, own, a_src, a_dst)
    got = torch.autograd.grad(gat(*inputs).square().sum(), inputs, allow_unused=True)
    wanted = torch.autograd.grad(expected.square().sum(), inputs, allow_unused=True)
    for a, b in zip(got, wanted, strict=True):
        assert (a is None) == (b is None)
        if a is not None:
            torch.testing.assert_close(a, b)
    assert gradcheck(gat, inputs)
    for t, copy in zip(inputs, copies, strict=True):
        assert torch.equal(t, copy)  # the caller's tensors are left as they were


def test_gat_attention_dropout_only_in_training(graph):
    feat, a = torch.randn(N, 2, 3), torch.randn(2, 3)
    torch.manual_seed(0)
    _, alpha = ops.gat_attention(graph, feat, a, a, dropout=0.5, training=True, return_attention=True)
    assert (alpha == 0).any()
    evaluation = ops.gat_attention(graph, feat, a, a, dropout=0.5, training=False)
    torch.testing.assert_close(evaluation, dense_gat(graph, feat, a, a, 0.2))


def test_gat_attention_dropout_is_fused_and_agrees_with_the_per_edge_path(graph):
    heads, d = 3, 4
    feat = torch.randn(N, heads, d, dtype=torch.float64, requires_grad=True)
    a_src, a_dst = torch.randn(heads, d, dtype=torch.float64), torch.randn(heads, d, dtype=torch.float64)

    def gat(f, per_edge):
        torch.manual_seed(11)  # one seed for both paths: the same hashed mask
        out = ops.gat_attention(graph, f, a_src, a_dst, 0.2, 0.5, True, return_attention=per_edge)
        return out[0] if per_edge else out

    fused, per_edge = gat(feat, False), gat(feat, True)
    torch.testing.assert_close(fused, per_edge)
    assert not torch.allclose(fused, ops.gat_attention(graph, feat, a_src, a_dst, 0.2))  # something dropped
    assert gradcheck(lambda f: gat(f, False), (feat,))
    with pytest.raises(ValueError, match="dropout must be in"):
        ops.gat_attention(graph, feat, a_src, a_dst, dropout=1.0, training=True)


def test_gat_attention_shape_errors(graph):
    with pytest.raises(ValueError, match="heads, d"):
        ops.gat_attention(graph, torch.randn(N, 2, 3), torch.randn(2, 4), torch.randn(2, 3))


def test_gat_inference_builds_only_the_forward_kernels():
    g = fg.Graph(*random_edges(N, E, seed=53), N)
    with torch.no_grad():
        ops.gat_attention(g, torch.randn(N, 2, 4), torch.randn(2, 4), torch.randn(2, 4))
    built = sorted(key[1] for key in g._cache if key[0] == "gat-kernel")
    assert built == ["aggregate", "log_total"] and ("reverse",) not in g._cache


@pytest.mark.parametrize("weighted", [False, True])
def test_gcn_aggregate_through_the_triton_kernels(gpu, graph, weighted):
    x = torch.randn(N, 5, dtype=torch.float64, requires_grad=True)
    w = (torch.rand(E, dtype=torch.float64) + 0.1).requires_grad_()
    inputs = (x, w) if weighted else (x,)
    out = assert_gpu_target_agrees(
        lambda g, *t: ops.gcn_aggregate(g, t[0], t[1] if weighted else None), graph, inputs, gpu
    )
    torch.testing.assert_close(out, dense_gcn(graph, x.detach(), w.detach() if weighted else torch.ones(E).double()))


def test_gat_attention_through_the_triton_kernels(gpu, graph):
    feat = torch.randn(N, 3, 4, dtype=torch.float64, requires_grad=True)
    a_src = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    a_dst = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    out = assert_gpu_target_agrees(
        lambda g, f, s, t: ops.gat_attention(g, f, s, t, 0.2), graph, (feat, a_src, a_dst), gpu
    )
    torch.testing.assert_close(out, dense_gat(graph, feat.detach(), a_src.detach(), a_dst.detach(), 0.2))


def test_gat_attention_dropout_on_the_triton_kernels_is_the_cpu_mask(gpu, graph):
    feat, a_src, a_dst = torch.randn(N, 2, 3), torch.randn(2, 3), torch.randn(2, 3)
    results = []
    for target, device in (("cpu", torch.device("cpu")), ("gpu", gpu)):
        torch.manual_seed(5)
        args = (t.to(device) for t in (feat, a_src, a_dst))
        with fg.default_target(target):
            results.append(ops.gat_attention(graph.to(device), *args, 0.2, dropout=0.5, training=True).cpu())
    torch.testing.assert_close(results[0], results[1])


def test_gat_attention_weights_under_compile_fall_back_to_eager(graph):
    gen = torch.Generator().manual_seed(4)
    feat, attn_src, attn_dst = (torch.randn(*s, generator=gen) for s in ((N, 2, 3), (2, 3), (2, 3)))

    def attend(f):
        return ops.gat_attention(graph, f, attn_src, attn_dst, return_attention=True)

    out, alpha = torch.compile(attend, backend="aot_eager")(feat)  # not traceable: the weights are per edge
    expected_out, expected_alpha = attend(feat)
    torch.testing.assert_close(out, expected_out)
    torch.testing.assert_close(alpha, expected_alpha)


def gat_reference(g, feat, attn_src, attn_dst, slope=0.2):
    """GAT in float64 from the logits the fused op reads (its GEMMs in the features' dtype, rounded once):
    scores, a per-destination softmax and the weighted sum, the weights summing to 1 exactly."""
    from featgraph.ops.fused import vertex_logits

    src, dst = g.coo()
    left, right = vertex_logits(feat, attn_src).double(), vertex_logits(feat, attn_dst).double()
    scores = torch.nn.functional.leaky_relu(left[src] + right[dst], slope)
    top = torch.full((g.num_nodes, scores.shape[1]), -torch.inf, dtype=torch.float64)
    top = top.scatter_reduce(0, dst.unsqueeze(1).expand_as(scores), scores, "amax")
    weights = (scores - top[dst]).exp()
    total = torch.zeros_like(top).index_add_(0, dst, weights)
    alpha = weights / total[dst]
    terms = alpha.unsqueeze(-1) * feat.double()[src]
    out = torch.zeros(g.num_nodes, *feat.shape[1:], dtype=torch.float64).index_add_(0, dst, terms)
    return out, torch.zeros_like(out).index_add_(0, dst, terms.abs())


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("case", ["all equal", "large", "cancelling"])
def test_gat_attention_in_half_precision_keeps_the_softmax_in_float32(dtype, case):
    """Adversarial logits: every score 30 over all-ones features (each output exactly 1: kept in 16 bits
    between the two passes, the log-sum-exp gave 0.945 and 1.008 in bfloat16), scores in the hundreds, and
    terms that cancel; within the documented bound of a float64 reference from the same 16-bit inputs."""
    src, dst = random_edges(40, 600, seed=7)
    g = fg.Graph(src, dst, 40)
    heads, d = 2, 6
    gen = torch.Generator().manual_seed(3)
    if case == "all equal":
        feat = torch.ones(40, heads, d)
        attn = torch.full((heads, d), 15.0 / d)
    elif case == "large":
        feat = torch.randn(40, heads, d, generator=gen)
        attn = 40 * torch.randn(heads, d, generator=gen)
    else:
        feat = torch.where(torch.arange(40) % 2 == 0, 1.0, -1.0).view(40, 1, 1).expand(40, heads, d).clone()
        attn = 1e-3 * torch.randn(heads, d, generator=gen)
    feat, attn = feat.to(dtype), attn.to(dtype)
    out = ops.gat_attention(g, feat, attn, attn)
    ref, magnitude = gat_reference(g, feat, attn, attn)
    u = 2.0**-8 if dtype == torch.bfloat16 else 2.0**-11
    degree = g.in_degrees().view(-1, 1, 1).double()
    bound = 16 * (degree + 1) * 2.0**-24 * magnitude + u * ref.abs() + 1e-30
    assert out.dtype == dtype
    assert bool(((out.double() - ref).abs() <= bound).all()), ((out.double() - ref).abs() / bound).max()
    if case == "all equal":
        assert bool((out[g.in_degrees() > 0] == 1).all())


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("weighted", [False, True])
def test_gcn_aggregate_in_half_precision_rounds_once(dtype, weighted):
    """Terms that cancel (alternating signs, degrees that are not powers of 4): D^-1/2 rounded to 16 bits
    before the kernel erred 100-1000x past the accumulation bound; computed in float32, the result is the
    float64 reference's from the same 16-bit inputs within ``k 2^-24 sum|terms| + u |result|``."""
    src, dst = random_edges(60, 900, seed=11)
    g = fg.Graph(src, dst, 60)
    gen = torch.Generator().manual_seed(4)
    sign = torch.where(torch.arange(60) % 2 == 0, 1.0, -1.0).unsqueeze(1)
    x = (sign * (1 + 1e-2 * torch.rand(60, 5, generator=gen))).to(dtype)
    w = (0.5 + torch.rand(g.num_edges, generator=gen)).to(dtype) if weighted else None
    out = ops.gcn_aggregate(g, x, w)
    ref = dense_gcn_on(g, x.double(), None if w is None else w.double())
    magnitude = dense_gcn_on(g, x.double().abs(), None if w is None else w.double())
    u = 2.0**-8 if dtype == torch.bfloat16 else 2.0**-11
    degree = (g.in_degrees() + 2).double().unsqueeze(1)
    bound = 16 * degree * 2.0**-24 * magnitude + u * ref.abs()
    assert out.dtype == dtype
    assert bool(((out.double() - ref).abs() <= bound).all()), ((out.double() - ref).abs() / bound).max()
    if weighted:
        w = w.clone().requires_grad_()
        ops.gcn_aggregate(g, x, w).float().sum().backward()
        assert w.grad.dtype == dtype


def dense_gcn_on(g, x, w):
    """``dense_gcn`` for a graph of any size (float64)."""
    n = g.num_nodes
    src, dst = g.coo()
    w = torch.ones(g.num_edges, dtype=x.dtype) if w is None else w
    keep = src != dst
    a = torch.zeros(n, n, dtype=x.dtype).index_put_((dst[keep], src[keep]), w[keep], accumulate=True)
    diag = torch.ones(n, dtype=x.dtype)
    for e in (~keep).nonzero().flatten().tolist():
        diag[src[e]] = w[e]
    a = a + torch.diag(diag)
    deg = a.sum(1)
    dinv = deg.pow(-0.5).masked_fill(deg == 0, 0)
    return dinv.unsqueeze(1) * (a @ (dinv.unsqueeze(1) * x))


@pytest.mark.parametrize("fastest", ["kernel", "tensor cores 16x16", "tensor cores 8x1"])
def test_tuned_gcn_aggregate_runs_on_tensor_cores_only_where_timed_faster(gpu, graph, monkeypatch, fastest):
    """``tune=True`` on the GPU times both tensor-core formats against the tuned kernel once per graph and width
    (the times stubbed here: the interpreter's say nothing) and keeps the fastest: either way the aggregation
    and its gradient are the dense reference's, to TF32's precision."""
    from featgraph.ops import fused
    from featgraph.tuning import tunable

    monkeypatch.setattr(tunable, "search", lambda kernel: kernel)  # the kernel's own search: tested in tuning
    timings, used = [], []
    times = {name: 1.0 if name == fastest else 2.0 for name in ["kernel", *fused.TENSOR_CORE_TILES]}
    monkeypatch.setattr(fused, "interleaved_best_ms", lambda fns, repeat: timings.append(sorted(fns)) or times)
    original = fused.tc_spmm
    monkeypatch.setattr(
        fused, "tc_spmm", lambda g, x, tile_rows: used.append(tile_rows) or original(g, x, None, tile_rows)
    )  # noqa: E501
    src, dst = graph.coo()
    g = fg.Graph(src.to(gpu), dst.to(gpu), N)
    x = torch.randn(N, 5)
    grad = torch.randn(N, 5)
    previous = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("high")  # TF32 allowed: tensor cores take float32
    try:
        with default_target("gpu"):
            for _ in range(2):  # the second call reuses the decision
                leaf = x.clone().to(gpu).requires_grad_()
                out = ops.gcn_aggregate(g, leaf, tune=True)
                out.backward(grad.to(gpu))
    finally:
        torch.set_float32_matmul_precision(previous)
    reference_leaf = x.double().requires_grad_()
    reference = dense_gcn(graph, reference_leaf, torch.ones(E, dtype=torch.float64))
    reference.backward(grad.double())
    torch.testing.assert_close(out.detach().cpu().double(), reference.detach(), rtol=1e-2, atol=1e-2)
    torch.testing.assert_close(leaf.grad.cpu().double(), reference_leaf.grad, rtol=1e-2, atol=1e-2)
    assert timings == [sorted(times)]
    assert set(used) == ({fused.TENSOR_CORE_TILES[fastest]} if fastest != "kernel" else set())


@pytest.mark.parametrize("case", ["highest precision", "float64", "weighted", "untuned"])
def test_tuned_gcn_aggregate_keeps_the_kernel_where_tensor_cores_would_change_the_result(gpu, graph, monkeypatch, case):
    """No tensor cores (nor their timing) where they would round float32 to TF32 against torch's setting,
    cannot take the dtype, would rebuild tiles for the given weights every call, or tuning was not asked for."""
    from featgraph.ops import fused
    from featgraph.tuning import tunable

    monkeypatch.setattr(tunable, "search", lambda kernel: kernel)  # the kernel's own search: tested in tuning
    monkeypatch.setattr(fused, "interleaved_best_ms", lambda *_: pytest.fail("tensor cores were timed"))
    src, dst = graph.coo()
    g = fg.Graph(src.to(gpu), dst.to(gpu), N)
    dtype = torch.float64 if case == "float64" else torch.float32
    x = torch.randn(N, 5, dtype=dtype, device=gpu)
    weight = torch.rand(E, dtype=dtype, device=gpu) + 0.1 if case == "weighted" else None
    previous = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("highest" if case == "highest precision" else "high")
    try:
        with default_target("gpu"):
            out = ops.gcn_aggregate(g, x, weight, tune=case != "untuned")
    finally:
        torch.set_float32_matmul_precision(previous)
    w = torch.ones(E, dtype=torch.float64) if weight is None else weight.cpu().double()
    torch.testing.assert_close(out.cpu().double(), dense_gcn(graph, x.cpu().double(), w), rtol=1e-4, atol=1e-4)
