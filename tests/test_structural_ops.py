"""The structural ops (ir/structural.py) are declared once, and every consumer has its rule
for each: the interpreter runs it, the ONNX exporter lowers or refuses it with a reason,
the dump parser reads it or refuses it by name, the passes read its effects."""
from __future__ import annotations

import pytest

from tracejit.capture import interpreter
from tracejit.ir import effects, structural
from tracejit.ir.graph import Graph, Node
from tracejit.ir.parser import ParseError, parse_graph
from tracejit.ops import OPS
from tracejit.onnx import exporter

KNOWN_EFFECTS = {structural.CHECK, structural.RANDOM_DRAW, structural.BINDS,
                 structural.LIST_STATE, structural.INDICES, structural.DATA_SIZE,
                 structural.REGIONS, structural.STRUCTURAL}


def missing_rules(ops) -> dict:
    """{op: [consumers without a rule for it]}."""
    interpreted = set(interpreter._SCRIPT_STEPS) | {structural.GUARD, structural.FUSED}
    exported = set(exporter._CONTROL) | set(exporter._STRUCTURAL_REFUSED)
    out = {}
    for name, op in ops.items():
        lacking = []
        if name not in interpreted:
            lacking.append("interpreter")
        if name not in exported:
            lacking.append("onnx")
        if not op.effects or not op.effects <= KNOWN_EFFECTS:
            lacking.append("effects")
        if op.script and not (op.control or op.lists or op.arity is not None):
            lacking.append("verifier")
        if lacking:
            out[name] = lacking
    return out


def test_every_structural_op_has_each_consumers_rule():
    assert missing_rules(structural.STRUCTURAL_OPS) == {}


def test_a_new_structural_op_without_rules_is_reported():
    new = dict(structural.STRUCTURAL_OPS)
    new["scan"] = structural.StructuralOp("scan", frozenset({structural.REGIONS}), None,
                                          True, control=True)
    assert missing_rules(new) == {"scan": ["interpreter", "onnx"]}


def test_no_structural_op_shadows_an_op_of_the_table():
    assert not [name for name in structural.STRUCTURAL_OPS if name in OPS]


def test_the_derived_sets_follow_the_table():
    ops = structural.STRUCTURAL_OPS
    assert structural.CONTROL == {structural.IF, structural.LOOP}
    assert structural.LIST_OPS == {n for n in ops if n.startswith("list")}
    assert structural.SCRIPT_OPS == set(ops) - {structural.GUARD, structural.FUSED}
    for name in (structural.GUARD, structural.FUSED, structural.IF, structural.LOOP,
                 structural.BIND, structural.SIZE, structural.RAISE, structural.LIST,
                 structural.LIST_APPEND, structural.LIST_GET, structural.LIST_LEN,
                 structural.LIST_STACK):
        assert name in ops


@pytest.mark.parametrize("name", sorted(structural.SCRIPT_OPS))
def test_the_parser_refuses_script_ops_by_name(name):
    text = f"graph(%x: f32[2]) -> (f32[2]):\n  %0: f32[2] = {name}(%x)\n  return %0\n"
    with pytest.raises(ParseError, match=f"`{name}` nodes"):
        parse_graph(text)


@pytest.mark.parametrize("name", sorted(structural.STRUCTURAL_OPS))
def test_the_passes_read_the_declared_effects(name):
    node = Node(name, [], {}, [])
    assert effects.effects(node) == structural.STRUCTURAL_OPS[name].effects
    # a structural op is never merged, folded or hoisted unless it is pure
    pure = not structural.STRUCTURAL_OPS[name].effects
    assert effects.movable(node) == pure
    assert not effects.foldable(node)


def test_an_op_of_the_table_keeps_its_own_effects():
    assert effects.effects(Node("add", [], {}, [])) == frozenset()
    assert structural.RANDOM_DRAW in effects.effects(Node("rand", [], {}, []))
    assert effects.effects(Node("no_such_op", [], {}, [])) == {structural.STRUCTURAL}


def test_the_verifier_checks_the_declared_arity():
    from tracejit.core import dtypes as dt
    from tracejit.ir.verifier import VerificationError, verify

    g = Graph("g")
    x = g.add_node("size", [], {"lhs": 2, "op": None, "rhs": None}, [(dt.int64, ())]).output
    g.add_node(structural.BIND, [x, x], {"symbol": "u0"}, [])  # two inputs: takes one
    g.outputs = [x]
    with pytest.raises(VerificationError, match="takes 1 inputs"):
        verify(g)
