"""``TypedLinear`` against a row-by-row product with each type's dense weight, and against DGL's where it
installs."""

from __future__ import annotations

import pytest
import torch
from torch.autograd import gradcheck

from featgraph.graph.interop import import_dgl
from featgraph.nn import TypedLinear
from featgraph.ops import gather_mm
from tests.nn.reference import dense_weights

CASES = [(None, None), ("basis", 2), ("bdd", 3)]


def reference(layer: TypedLinear, x: torch.Tensor, x_type: torch.Tensor) -> torch.Tensor:
    weights = dense_weights(layer)
    return (
        torch.stack([x[i] @ weights[x_type[i]] for i in range(x.shape[0])])
        if x.shape[0]
        else x.new_zeros(0, layer.out_size)
    )


@pytest.mark.parametrize(("regularizer", "num_bases"), CASES)
@pytest.mark.parametrize("rows", [0, 1, 37])
@pytest.mark.parametrize("sorted_by_type", [False, True])
def test_forward_and_gradients_match_the_row_by_row_product(regularizer, num_bases, rows, sorted_by_type):
    """Odd sizes (9 in, 15 out), types absent from the rows, rows of one type; x is left alone."""
    torch.manual_seed(rows)
    layer = TypedLinear(9, 15, 5, regularizer, num_bases).double()
    x = torch.randn(rows, 9, dtype=torch.float64, requires_grad=True)
    x_type = torch.randint(0, 4, (rows,))  # type 4 never occurs
    if sorted_by_type:
        x_type = x_type.sort().values
    before = x.detach().clone()
    out = layer(x, x_type, sorted_by_type=sorted_by_type)
    if rows == 0:
        assert out.shape == (0, 15)
        out.sum().backward()  # a batch without rows trains too: zero gradients
        assert all(p.grad is None or not p.grad.any() for p in layer.parameters())
        return
    want = reference(layer, x, x_type)
    torch.testing.assert_close(out, want)
    grad = torch.randn_like(out)
    got_grads = torch.autograd.grad(out, [x, *layer.parameters()], grad, allow_unused=True)
    want_grads = torch.autograd.grad(want, [x, *layer.parameters()], grad, allow_unused=True)
    for got, expected in zip(got_grads, want_grads, strict=True):
        torch.testing.assert_close(got, expected)
    assert torch.equal(x.detach(), before)


@pytest.mark.parametrize(("regularizer", "num_bases"), CASES)
def test_gradcheck(regularizer, num_bases):
    torch.manual_seed(1)
    layer = TypedLinear(6, 9, 3, regularizer, num_bases).double()
    x = torch.randn(11, 6, dtype=torch.float64, requires_grad=True)
    x_type = torch.randint(0, 3, (11,))
    assert gradcheck(lambda a, *params: layer(a, x_type), (x, *layer.parameters()))


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"regularizer": "tucker"}, ValueError, "^regularizer: expected one of"),
        ({"regularizer": "basis"}, ValueError, "^num_bases: the 'basis' regularizer needs"),
        ({"regularizer": "bdd", "num_bases": 4}, ValueError, "^num_bases: in_size 6 and out_size 9 must be multiples"),
    ],
)
def test_bad_construction_names_the_argument(kwargs, error, message):
    with pytest.raises(error, match=message):
        TypedLinear(6, 9, 3, **kwargs)


def test_bad_inputs_name_the_argument():
    layer = TypedLinear(6, 9, 3)
    x = torch.randn(4, 6)
    with pytest.raises(ValueError, match="^x: expected 6 features"):
        layer(torch.randn(4, 5), torch.zeros(4, dtype=torch.int64))
    with pytest.raises(ValueError, match="^x_type: expected 4 integer type ids"):
        layer(x, torch.zeros(3, dtype=torch.int64))
    with pytest.raises(IndexError, match=r"^x_type: type ids must lie in \[0, 3\)"):
        layer(x, torch.tensor([0, 1, 2, 3]))
    with pytest.raises(ValueError, match="not in ascending order"):
        layer(x, torch.tensor([2, 0, 1, 1]), sorted_by_type=True)


@pytest.mark.parametrize(("regularizer", "num_bases"), CASES)
def test_dgls_layer_with_the_same_state_gives_the_same_output(regularizer, num_bases):
    dgl = import_dgl()
    if dgl is None:
        pytest.skip("DGL is not installed")
    torch.manual_seed(2)
    theirs = dgl.nn.pytorch.TypedLinear(12, 6, 4, regularizer, num_bases)
    ours = TypedLinear(12, 6, 4, regularizer, num_bases)
    ours.load_state_dict(theirs.state_dict())
    x, x_type = torch.randn(50, 12), torch.randint(0, 4, (50,))
    torch.testing.assert_close(ours(x, x_type), theirs(x, x_type), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("regularizer", [None, "basis", "bdd"])
@pytest.mark.parametrize("sorted_by_type", [False, True])
@pytest.mark.parametrize(
    "x_type",
    [
        torch.tensor([False, True, True, False]),
        torch.tensor([0.0, 1.0, 1.0, 0.0]),
        torch.tensor([0j, 1j, 1j, 0j]),
        torch.zeros(4, 1, dtype=torch.int64),
    ],
)
def test_type_ids_that_are_no_integer_vector_are_refused_as_gather_mm_refuses_them(regularizer, sorted_by_type, x_type):
    """A bool mask is no type ids (DGL's layer, gather_mm and relational_aggregate refuse it too): the same
    error as gather_mm's, naming x_type."""
    layer = TypedLinear(6, 9, 3, regularizer, None if regularizer is None else 3)
    x = torch.randn(4, 6)
    with pytest.raises(ValueError, match=r"^x_type: expected a 1-D integer tensor, got torch\.") as raised:
        layer(x, x_type, sorted_by_type)
    with pytest.raises(ValueError) as from_gather_mm:
        gather_mm(x, torch.randn(3, 6, 9), x_type)
    assert str(raised.value) == str(from_gather_mm.value).replace("idx_b", "x_type")
