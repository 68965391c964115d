import pytest
import torch

from featgraph.ops import gather_mm, segment_matmul, segment_mm


def _operands(rows=11, types=4, d1=5, d2=3, dtype=torch.float64):
    gen = torch.Generator().manual_seed(0)
    a = torch.randn(rows, d1, generator=gen, dtype=dtype, requires_grad=True)
    b = torch.randn(types, d1, d2, generator=gen, dtype=dtype, requires_grad=True)
    return a, b


def test_gather_mm_is_a_row_times_its_types_matrix():
    a, b = _operands()
    idx = torch.tensor([3, 0, 0, 2, 3, 3, 0, 2, 2, 0, 3])  # type 1 unused
    want = torch.stack([a[i] @ b[idx[i]] for i in range(a.shape[0])])
    torch.testing.assert_close(gather_mm(a, b, idx), want)
    assert torch.autograd.gradcheck(lambda a, b: gather_mm(a, b, idx), (a, b))


def test_segment_mm_multiplies_consecutive_segments():
    a, b = _operands()
    seglen = torch.tensor([4, 0, 6, 1])  # an empty segment
    bounds = [0, 4, 4, 10, 11]
    want = torch.cat([a[bounds[k] : bounds[k + 1]] @ b[k] for k in range(4)])
    torch.testing.assert_close(segment_mm(a, b, seglen), want)
    assert torch.autograd.gradcheck(lambda a, b: segment_mm(a, b, seglen), (a, b))
    grad_b = torch.autograd.grad(segment_mm(a, b, seglen).sum(), b)[0]
    assert torch.equal(grad_b[1], torch.zeros(5, 3, dtype=torch.float64))


def test_segment_matmul_is_pygs_offsets_form():
    a, b = _operands(types=3)
    ptr = torch.tensor([0, 2, 2, 11])
    torch.testing.assert_close(segment_matmul(a, ptr, b), segment_mm(a, b, torch.tensor([2, 0, 9])))


def test_float32_and_no_rows():
    a, b = _operands(rows=0, dtype=torch.float32)
    assert segment_mm(a, b, torch.zeros(4, dtype=torch.int64)).shape == (0, 3)
    assert gather_mm(a, b, torch.zeros(0, dtype=torch.int64)).shape == (0, 3)


def test_the_callers_tensors_are_left_alone():
    a, b = _operands()
    idx = torch.tensor([1, 0] * 5 + [3])
    copies = (a.detach().clone(), b.detach().clone(), idx.clone())
    gather_mm(a, b, idx).sum().backward()
    for x, copy in zip((a, b, idx), copies, strict=True):
        assert torch.equal(x.detach(), copy)


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda a, b: gather_mm(a, b, torch.tensor([0] * 10 + [4])), IndexError, r"idx_b: type ids must lie in"),
        (lambda a, b: gather_mm(a, b, torch.zeros(3, dtype=torch.int64)), ValueError, "idx_b: expected 11 entries"),
        (lambda a, b: gather_mm(a, b, torch.zeros(11)), ValueError, "idx_b: expected a 1-D integer"),
        (lambda a, b: gather_mm(a, b[:, :4], torch.zeros(11, dtype=torch.int64)), ValueError, "b: a has 5 columns"),
        (lambda a, b: gather_mm(a, b.float(), torch.zeros(11, dtype=torch.int64)), TypeError, "b: expected torch.f"),
        (lambda a, b: gather_mm(a[0], b, torch.zeros(11, dtype=torch.int64)), ValueError, "a: expected 2 dimensions"),
        (lambda a, b: segment_mm(a, b, torch.tensor([1, 1, 1, 1])), ValueError, "seglen_a: sums to 4, but a has 11"),
        (lambda a, b: segment_mm(a, b, torch.tensor([12, -1, 0, 0])), ValueError, "seglen_a: segment lengths"),
        (lambda a, b: segment_mm(a, b, torch.tensor([11])), ValueError, "seglen_a: expected 4 entries"),
        (lambda a, b: segment_matmul(a, torch.tensor([0, 5, 11]), b), ValueError, "ptr: expected 5 offsets"),
        (lambda a, b: segment_matmul(a, torch.tensor([0, 5, 3, 11, 11]), b), ValueError, "ptr: offsets must not"),
    ],
)  # fmt: skip
def test_bad_arguments_are_named(call, error, match):
    a, b = _operands()
    with pytest.raises(error, match=match):
        call(a, b)


def test_compiled_graphs_call_the_same_operators():
    a, b = _operands(dtype=torch.float32)
    idx = torch.tensor([3, 0, 0, 2, 3, 3, 0, 2, 2, 0, 3])
    compiled = torch.compile(lambda a, b: gather_mm(a, b, idx), backend="eager", fullgraph=False)
    torch.testing.assert_close(compiled(a, b), gather_mm(a, b, idx))


@pytest.mark.parametrize("name", ["segment_mm", "gather_mm"])
def test_operators_pass_opcheck(name):
    a, b = _operands()
    index = torch.tensor([4, 0, 6, 1]) if name == "segment_mm" else torch.tensor([3, 0, 0, 2, 3, 3, 0, 2, 2, 0, 3])
    result = torch.library.opcheck(getattr(torch.ops.featgraph, name).default, (a, b, index))
    assert set(result.values()) == {"SUCCESS"}, result


@pytest.mark.parametrize("blocks", [None, 3])
def test_segments_of_gathered_rows_equal_the_gathered_matrixs(blocks):
    """``a_rows``/``grad_rows`` gather a segment at a time: the products and weight gradients equal those of
    the gathered matrices (rows repeated, skipped, an empty segment), against a dense per-row reference."""
    from featgraph.ops.grouped_mm import segment_products, segment_weight_gradient

    gen = torch.Generator().manual_seed(2)
    a = torch.randn(9, 6, generator=gen, dtype=torch.float64)
    grad = torch.randn(11, 9, generator=gen, dtype=torch.float64)
    rows = torch.tensor([4, 4, 0, 8, 2, 7, 1, 1, 3, 5, 6])
    lengths = [3, 0, 5, 3]
    b = torch.randn((4, 3, 2, 3) if blocks else (4, 6, 9), generator=gen, dtype=torch.float64)
    types = torch.repeat_interleave(torch.arange(4), torch.tensor(lengths))
    dense = torch.stack([torch.block_diag(*m.unbind(0)) for m in b]) if blocks else b
    expected = torch.einsum("ri,rio->ro", a[rows], dense[types])
    torch.testing.assert_close(segment_products(a, b, lengths, a_rows=rows), expected)
    torch.testing.assert_close(segment_products(a[rows], b, lengths), expected)
    g = grad[rows]
    got = segment_weight_gradient(a, grad, lengths, 4, blocks, a_rows=rows, grad_rows=rows)
    reference = segment_weight_gradient(a[rows], g, lengths, 4, blocks)
    torch.testing.assert_close(got, reference)
    per_type = torch.zeros(4, 6, 9, dtype=torch.float64).index_add_(0, types, a[rows].unsqueeze(2) * g.unsqueeze(1))
    if blocks:
        per_type = torch.stack([per_type[:, j * 2 : (j + 1) * 2, j * 3 : (j + 1) * 3] for j in range(3)], 1)
    torch.testing.assert_close(got, per_type)
