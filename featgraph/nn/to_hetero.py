"""The sums over relations in a model made by PyG's ``to_hetero``, rewritten into one ``sum_of_relation_parts``
call each: ``to_hetero`` calls a copy of each layer per edge type and adds the outputs per destination type
(``aggr="sum"``, its default); where those layers give relation terms (featgraph's ``SAGEConv`` and
``GraphConv``), the relations into a node type then share one dense product (``relation_sum``). Each layer's
``relation_part`` stays where the layer was called, so layers that run their own forward (lazy ones on their
first call) run in to_hetero's order."""

from __future__ import annotations

import operator

import torch
from torch.fx import GraphModule, Node

from .relation_sum import relation_part, sum_of_relation_parts

ADDS = (torch.add, operator.add)


def fuse_relation_sums(model: GraphModule) -> list[str]:
    """Rewrite, in place, every sum of two or more per-relation layer calls in ``model``'s graph whose layers
    give relation terms; returns a line per rewritten sum (its layers)."""
    graph = model.graph
    fused: list[str] = []
    for root in [n for n in graph.nodes if _is_add(n) and not _feeds_an_add(n)]:
        adds, leaves = _add_tree(root)
        if len(leaves) < 2 or not all(_is_relation_call(model, leaf) for leaf in leaves):
            continue
        parts = []
        for leaf in leaves:  # each layer's part where it was called: lazy layers draw their weights in that order
            with graph.inserting_before(leaf):
                conv = graph.get_attr(leaf.target)
                parts.append(graph.call_function(relation_part, (conv, leaf.args[0], leaf.args[1])))
        with graph.inserting_before(root):
            summed = graph.call_function(sum_of_relation_parts, (tuple(parts),))
        root.replace_all_uses_with(summed)
        for node in [*adds, *leaves]:  # each one's only user is erased before it
            graph.erase_node(node)
        fused.append(", ".join(str(leaf.target) for leaf in leaves))
    if fused:
        graph.lint()
        model.recompile()
    return fused


def _is_add(node: Node) -> bool:
    return node.op == "call_function" and node.target in ADDS and len(node.args) == 2 and not node.kwargs


def _feeds_an_add(node: Node) -> bool:
    return len(node.users) == 1 and _is_add(next(iter(node.users)))


def _add_tree(root: Node) -> tuple[list[Node], list[Node]]:
    """The adds of the tree under ``root`` (root first, each before its operands) and its leaves: operands
    that are not adds used only there."""
    adds, leaves, pending = [], [], [root]
    while pending:
        node = pending.pop(0)
        adds.append(node)
        for operand in node.args:
            if isinstance(operand, Node) and _is_add(operand) and len(operand.users) == 1:
                pending.append(operand)
            else:
                leaves.append(operand)
    return adds, leaves


def _is_relation_call(model: GraphModule, node: object) -> bool:
    """A call ``layer(x, edge_index)`` of a submodule that gives relation terms, used only by the sum."""
    if not isinstance(node, Node) or node.op != "call_module" or len(node.users) != 1:
        return False
    return len(node.args) == 2 and not node.kwargs and hasattr(model.get_submodule(node.target), "relation_term")
