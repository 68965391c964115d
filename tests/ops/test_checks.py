"""Every public op, given a wrong graph, type, dtype, shape, row count or device, raises an error that names
the caller's argument (not a kernel's placeholder, not an IndexError from inside the op)."""

import pytest
import torch

import featgraph as fg
from featgraph import ops

N, E = 5, 4
X, W, S = torch.randn(N, 3), torch.randn(E, 3), torch.randn(E)
INT = torch.ones(N, 3, dtype=torch.int64)
META = torch.empty(N, 3, device="meta")  # a device the graph is not on
ATTN = torch.randn(2, 3)
REL, ET = torch.randn(3, 3, 2), torch.tensor([0, 2, 2, 1])  # relational ops: weights, edge types


def graph() -> fg.Graph:
    return fg.Graph(torch.tensor([0, 1, 2, 3]), torch.tensor([1, 2, 0, 0]), N)


def feat(rows: int = N, **kwargs) -> torch.Tensor:
    return torch.randn(rows, 2, 3, **kwargs)


# (op name, call, error, message): the message starts with (or quotes) the argument at fault
CASES = [
    ("gspmm", lambda g: ops.gspmm(None, "copy_lhs", "sum", X, None), TypeError, "^g: expected a featgraph.Graph"),
    ("gspmm", lambda g: ops.gspmm(g, "copy_lhs", "sum", X.tolist(), None), TypeError, "^lhs: expected a torch.Tensor"),
    ("gspmm", lambda g: ops.gspmm(g, "copy_lhs", "sum", INT, None), TypeError, "^lhs: expected a floating"),
    ("gspmm", lambda g: ops.gspmm(g, "copy_lhs", "max", torch.tensor(1.0), None), ValueError, "^lhs: "),
    ("gspmm", lambda g: ops.gspmm(g, "copy_lhs", "sum", X[:4], None), ValueError, "^lhs is u-data and needs 5 rows"),
    ("gspmm", lambda g: ops.gspmm(g, "mul", "sum", X, X), ValueError, "^rhs is e-data and needs 4 rows"),
    ("gspmm", lambda g: ops.gspmm(g, "mul", "min", X, W.double()), TypeError, "lhs and rhs must share one dtype"),
    ("gspmm", lambda g: ops.gspmm(g, "copy_lhs", "sum", META, None), ValueError, "^lhs: .* got a tensor on meta"),
    ("gspmm", lambda g: ops.gspmm(g, "copy_lhs", "prod", X, None), ValueError, "^reduce must be one of"),
    ("gsddmm", lambda g: ops.gsddmm(g, "dot", X[:4], X), ValueError, "^lhs is u-data and needs 5 rows"),
    ("gsddmm", lambda g: ops.gsddmm(g, "add", X, X, "u", "e"), ValueError, "^rhs is e-data and needs 4 rows"),
    ("gsddmm", lambda g: ops.gsddmm(g, "add", X, None), ValueError, "needs rhs"),
    ("gsddmm", lambda g: ops.gsddmm(g, "add", X, INT), TypeError, "^rhs: expected a floating"),
    ("gsddmm", lambda g: ops.gsddmm(g, "dot", X, META), ValueError, "^rhs: .* got a tensor on meta"),
    ("edge_softmax", lambda g: ops.edge_softmax(g, torch.tensor(1.0)), ValueError, "^scores: expected at least 1"),
    ("edge_softmax", lambda g: ops.edge_softmax(g, torch.randn(N)), ValueError, r"^scores: expected 4 rows"),
    ("edge_softmax", lambda g: ops.edge_softmax(g, S.long()), TypeError, "^scores: expected a floating"),
    ("edge_softmax", lambda g: ops.edge_softmax(g, S.tolist()), TypeError, "^scores: expected a torch.Tensor"),
    ("edge_softmax", lambda g: ops.edge_softmax(g, S.to("meta")), ValueError, "^scores: .* got one on meta"),
    ("edge_softmax", lambda g: ops.edge_softmax(S, S), TypeError, "^g: expected a featgraph.Graph"),
    ("segment_reduce", lambda g: ops.segment_reduce(torch.tensor([1, 2]), torch.tensor(1.0)), ValueError, "^value: "),
    ("segment_reduce", lambda g: ops.segment_reduce([1, 2], X[:3].long()), TypeError, "^value: expected a floating"),
    ("segment_reduce", lambda g: ops.segment_reduce([1, 2], X[:3], "prod"), ValueError, "^reducer must be one of"),
    ("segment_reduce", lambda g: ops.segment_reduce([1.0, 2.0], X[:3]), ValueError, "^seglen must be"),
    ("segment_reduce", lambda g: ops.segment_reduce([1, 1], X[:3]), ValueError, "^seglen sums to 2 but value"),
    ("dropout", lambda g: ops.dropout(X.tolist(), 0.5), TypeError, "^x: expected a torch.Tensor"),
    ("dropout", lambda g: ops.dropout(INT, 0.5), TypeError, "^x: expected a floating"),
    ("dropout", lambda g: ops.dropout(X, 1.5), ValueError, r"^p: .* in \[0, 1\]"),
    ("dropout", lambda g: ops.dropout(X, "0.5"), TypeError, r"^p: .* a number in \[0, 1\], got str"),
    ("gat_attention", lambda g: ops.gat_attention(g, feat(4), ATTN, ATTN), ValueError, "^feat: expected 5 rows"),
    ("gat_attention", lambda g: ops.gat_attention(g, X, ATTN, ATTN), ValueError, "^feat: expected 3 dimensions"),
    ("gat_attention", lambda g: ops.gat_attention(g, feat(), ATTN.T, ATTN), ValueError, r"^attn_src: .*\(2, 3\)"),
    ("gat_attention", lambda g: ops.gat_attention(g, feat(), ATTN, ATTN.double()), TypeError, "^attn_dst: "),
    ("gat_attention", lambda g: ops.gat_attention(g, feat().long(), ATTN, ATTN), TypeError, "^feat: .*floating"),
    ("gat_attention", lambda g: ops.gat_attention(g, feat(device="meta"), ATTN, ATTN), ValueError, "^feat: .*meta"),
    ("gat_attention", lambda g: ops.gat_attention(g, feat(), ATTN, ATTN, dropout=1.0), ValueError, "dropout"),
    ("gcn_aggregate", lambda g: ops.gcn_aggregate(g, X[:4]), ValueError, "^x: expected 5 rows"),
    ("gcn_aggregate", lambda g: ops.gcn_aggregate(g, INT), TypeError, "^x: expected a floating"),
    ("gcn_aggregate", lambda g: ops.gcn_aggregate(g, META), ValueError, "^x: .* got one on meta"),
    ("gcn_aggregate", lambda g: ops.gcn_aggregate(g, X, S[:3]), ValueError, "^edge_weight: expected 4 rows"),
    ("gcn_aggregate", lambda g: ops.gcn_aggregate(g, X, W), ValueError, "^edge_weight: expected 1 dimension"),
    ("gcn_aggregate", lambda g: ops.gcn_aggregate(g, X, S.long()), TypeError, "^edge_weight: expected a floating"),
    ("gcn_aggregate", lambda g: ops.gcn_aggregate(g, X, S.double()), TypeError, "^edge_weight: expected torch.float32"),
    ("gcn_aggregate", lambda g: ops.gcn_aggregate(g, X, S.to("meta")), ValueError, "^edge_weight: .* on meta"),
    ("tc_spmm", lambda g: ops.tc_spmm(g, X[:4]), ValueError, "^x: expected 5 rows"),
    ("tc_spmm", lambda g: ops.tc_spmm(g, X, S[:3]), ValueError, "^edge_weight: expected 4 rows"),
    ("tc_sddmm", lambda g: ops.tc_sddmm(g, X, INT), TypeError, "^x_dst: expected a floating"),
    ("tc_sddmm", lambda g: ops.tc_sddmm(g, X, torch.randn(N, 4)), ValueError, "x_src and x_dst must match"),
    ("gather_mm", lambda g: ops.gather_mm(X, REL, torch.tensor([0, 1, 0, 3, 0])), IndexError, "^idx_b: type ids"),
    ("gather_mm", lambda g: ops.gather_mm(INT, REL, torch.zeros(N, dtype=torch.int64)), TypeError, "^a: expected a f"),
    ("segment_mm", lambda g: ops.segment_mm(X, REL, [2, 2, 2]), ValueError, "^seglen_a: sums to 6, but a has 5"),
    ("segment_mm", lambda g: ops.segment_mm(X, REL.double(), [2, 2, 1]), TypeError, "^b: expected torch.float32"),
    ("segment_matmul", lambda g: ops.segment_matmul(X, [0, 2, 5], REL), ValueError, "^ptr: expected 4 offsets"),
    ("relational_aggregate", lambda g: ops.relational_aggregate(None, X, REL, ET), TypeError, "^g: expected a f"),
    ("relational_aggregate", lambda g: ops.relational_aggregate(g, X[:4], REL, ET), ValueError, "^x: expected 5 rows"),
    ("relational_aggregate", lambda g: ops.relational_aggregate(g, META, REL, ET), ValueError, "^x: .* on meta"),
    ("relational_aggregate", lambda g: ops.relational_aggregate(g, X, REL, ET[:3]), ValueError, "^etype: expected 4"),
    ("relational_aggregate", lambda g: ops.relational_aggregate(g, X, REL[:1], ET), IndexError, "^etype: relation ids"),
    ("relational_aggregate", lambda g: ops.relational_aggregate(g, X, REL, ET, "max"), ValueError, "^reduce must be"),
    ("linear", lambda g: ops.linear(X, torch.randn(3, 7)), ValueError, "^x: expected 7 features"),
    ("linear", lambda g: ops.linear(INT, W), TypeError, "^x: expected a floating"),
    ("linear", lambda g: ops.linear(X, REL), ValueError, "^weight: expected 2 dimensions"),
    ("linear", lambda g: ops.linear(X, W.double()), TypeError, "^weight: expected x's dtype"),
    ("linear", lambda g: ops.linear(X, W, torch.zeros(2)), ValueError, "^bias: expected 4 rows"),
    ("linear", lambda g: ops.linear(X, W.to("meta")), ValueError, "^weight: expected a tensor on cpu"),
    ("copy_u_sum", lambda g: ops.copy_u_sum(g), TypeError, "^copy_u_sum takes the graph and 1 tensor, got 0"),
    ("u_mul_e_max", lambda g: ops.u_mul_e_max(g, X), TypeError, "^u_mul_e_max takes the graph and 2 tensors"),
    ("u_dot_v", lambda g: ops.u_dot_v(g, X, X, X), TypeError, "^u_dot_v takes the graph and 2 tensors, got 3"),
    ("copy_v", lambda g: ops.copy_v(g, X[:4]), ValueError, "^lhs is v-data and needs 5 rows"),
    ("copy_e_mean", lambda g: ops.copy_e_mean(g, X), ValueError, "^rhs is e-data and needs 4 rows"),
]


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize(("name", "call", "error", "message"), CASES, ids=[f"{c[0]}-{n}" for n, c in enumerate(CASES)])
def test_errors_name_the_argument(name, call, error, message):
    with pytest.raises(error, match=message):
        call(graph())


def test_every_public_op_is_covered():
    ops_and_a_shortcut_of_each_kind = {"copy_u_sum", "u_mul_e_max", "u_dot_v", "copy_v", "copy_e_mean"}
    assert {name for name, *_ in CASES} == {
        *(set(ops.__all__) - set(ops.SHORTCUTS) - {"SHORTCUTS"}),
        *ops_and_a_shortcut_of_each_kind,
    }
