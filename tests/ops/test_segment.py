import pytest
import torch
from torch.autograd import gradcheck

from featgraph import ops


@pytest.mark.parametrize("reducer", ["sum", "mean", "max", "min"])
def test_segment_reduce_against_loop(reducer):
    seglen = torch.tensor([2, 0, 3, 1])
    value = torch.randn(6, 3, dtype=torch.float64, requires_grad=True)
    out = ops.segment_reduce(seglen, value, reducer)
    expected = torch.zeros(4, 3, dtype=torch.float64)
    start = 0
    for i, n in enumerate(seglen.tolist()):
        if n:
            chunk = value.detach()[start : start + n]
            expected[i] = {
                "sum": chunk.sum(0),
                "mean": chunk.mean(0),
                "max": chunk.max(0).values,
                "min": chunk.min(0).values,
            }[reducer]
        start += n
    torch.testing.assert_close(out, expected)
    assert gradcheck(lambda v: ops.segment_reduce(seglen, v, reducer), (value,))


def test_segment_reduce_of_1d_values_is_1d():
    """As DGL: (B,) values per segment for 1-D values, not (B, 1)."""
    out = ops.segment_reduce(torch.tensor([2, 0, 1]), torch.tensor([1.0, 3.0, 5.0]), "sum")
    torch.testing.assert_close(out, torch.tensor([4.0, 0.0, 5.0]))


def test_segment_errors():
    with pytest.raises(ValueError, match="sums to 3"):
        ops.segment_reduce(torch.tensor([1, 2]), torch.randn(4, 2))
    with pytest.raises(ValueError, match="non-negative integer"):
        ops.segment_reduce(torch.tensor([1.0, 2.0]), torch.randn(3, 2))
