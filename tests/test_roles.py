"""Node roles: every op a block builds says what it is for, and analyses select by role."""

from __future__ import annotations

from collections import Counter

import pytest
import sympy

from costmodel.graph import op_nodes
from costmodel.keys import GROUP, OP, REPEAT, ROLE, Role
from costmodel.symbols import B, ctx
from graphs import build_model
from graphs.serving.step.totals import attention_flops
from models import get_model, model_names


@pytest.mark.parametrize("name", model_names())
def test_every_op_node_of_every_catalog_model_has_a_role(name):
    cfg = get_model(name)
    for phase in ("decode", "prefill"):
        g = build_model(cfg, phase)
        missing = [n for n in op_nodes(g) if not isinstance(g.nodes[n].get(ROLE), Role)]
        assert not missing, f"{name} {phase}: op nodes without a role: {missing[:5]}"


def _roles(g, group):
    return Counter(g.nodes[n][ROLE] for n in op_nodes(g) if g.nodes[n][GROUP] == group)


def test_llama_decoder_layer_roles_by_hand():
    g = build_model(get_model("llama-3.1-8b"), "decode")
    layer = _roles(g, "layers")
    # q, k, v, o, gate, up, down projections; attention; input and post-attention norms;
    # two residual adds; rope on q and k; K and V cache writes; the SwiGLU activation
    assert layer == {
        Role.LINEAR: 7,
        Role.ATTENTION: 1,
        Role.NORM: 2,
        Role.RESIDUAL: 2,
        Role.ROPE: 2,
        Role.CACHE_WRITE: 2,
        Role.ACTIVATION: 1,
    }
    assert _roles(g, "head") == {Role.NORM: 1, Role.HEAD: 1}
    assert _roles(g, "embed") == {Role.EMBEDDING: 1}


def test_moe_and_tensor_parallel_roles():
    g = build_model(get_model("mixtral-8x7b"), "decode", tp=2)
    layer = _roles(g, "moe")
    # gate/up/down expert GEMMs; router logits (a linear tagged router), its softmax and top-k;
    # the combine; two all-reduces (o_proj and the experts' sum)
    assert layer[Role.EXPERT] == 3
    assert layer[Role.ROUTER] == 3
    assert layer[Role.COMBINE] == 1
    assert layer[Role.COLLECTIVE] == 2
    # the embedding's all-reduce and the logits' all-gather
    assert _roles(g, "embed")[Role.COLLECTIVE] == 1
    assert _roles(g, "head")[Role.COLLECTIVE] == 1


def test_attention_flops_select_by_role_not_by_rule_name():
    g = build_model(get_model("llama-3.1-8b"), "decode")
    # per head and query over ctx keys: 4*ctx*d (QK^T, PV) + 5*ctx (softmax) FLOPs;
    # L = 32 layers x H = 32 heads x d = 128: 32*32*(4*128 + 5) = 529408 per token
    assert sympy.expand(attention_flops(g) - 529408 * B * ctx) == 0
    # renaming the attention node's rule leaves the selection unchanged: it reads the role
    for n in op_nodes(g):
        if g.nodes[n][ROLE] == Role.ATTENTION:
            g.nodes[n][OP] = "some_new_attention_rule"
    assert sympy.expand(attention_flops(g) - 529408 * B * ctx) == 0
    # and a node that is not attention is not counted whatever its rule is called
    for n in op_nodes(g):
        if g.nodes[n][ROLE] == Role.LINEAR:
            g.nodes[n][OP] = "attention"
            break
    assert sympy.expand(attention_flops(g) - 529408 * B * ctx) == 0
    assert all(g.nodes[n][REPEAT] in (1, 32) for n in op_nodes(g))
