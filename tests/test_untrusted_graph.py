"""A graph from a file is untrusted: no attribute value is ever evaluated as Python."""

import pytest

from costmodel import get_device
from costmodel.errors import CostModelError
from costmodel.fusion import check_plan, ideal_cost, plan_cost, unfused_plan
from costmodel.fusion_audit import suggest_fusions
from costmodel.graph import (
    BYTES,
    OP,
    PARAMS,
    REPEAT,
    TENSOR,
    classify_graph,
    expand,
    graph_to_dict,
    graph_total,
    validate_graph,
)
from costmodel.passes import Pipeline, bind_dims, classify
from costmodel.tensor import Tensor
from graphs import build_model, summarize
from models import get_model


def _payload(marker):
    return f"__import__('pathlib').Path({str(marker)!r}).touch() or 0"


def _poisoned(tmp_path, where):
    g = build_model(get_model("tiny"), "decode", batch=1, ctx=8)
    marker = tmp_path / f"ran-{where}"
    if where == "repeat":
        node = next(n for n, d in g.nodes(data=True) if d.get(REPEAT, 1) != 1)
        g.nodes[node][REPEAT] = _payload(marker)
    elif where == "bytes":
        u, v = next(iter(g.edges))
        g.edges[u, v][BYTES] = _payload(marker)
    elif where == "params":  # a rule parameter, as a file would carry it
        node = next(n for n, d in g.nodes(data=True) if d.get(OP) == "gemm")
        g.nodes[node][PARAMS] = {**g.nodes[node][PARAMS], "M": _payload(marker)}
    elif where == "shape":  # a tensor dimension on an edge
        u, v = next(iter(g.edges))
        t = g.edges[u, v][TENSOR]
        g.edges[u, v][TENSOR] = Tensor.__new__(Tensor)
        object.__setattr__(g.edges[u, v][TENSOR], "name", t.name)
        object.__setattr__(g.edges[u, v][TENSOR], "shape", (_payload(marker),))
        object.__setattr__(g.edges[u, v][TENSOR], "dtype", t.dtype)
    else:  # the layer group's repeat, read by expand
        g.graph["groups"]["layers"]["repeat"] = _payload(marker)
    return g, marker


CALLS = {
    "validate_graph": lambda g: validate_graph(g),
    "classify_graph": lambda g: classify_graph(g, get_device("h100")),
    "ideal_cost": lambda g: ideal_cost(g),
    "check_plan": lambda g: check_plan(g, unfused_plan(g)),
    "plan_cost": lambda g: plan_cost(g, unfused_plan(g)),
    "suggest_fusions": lambda g: suggest_fusions(g, get_device("h100")),
    "expand": lambda g: expand(g),
    "graph_total": lambda g: graph_total(g),
    "summarize": lambda g: summarize(g),
    "graph_to_dict": lambda g: graph_to_dict(g),
    "bind_dims pass": lambda g: Pipeline([bind_dims({"B": 2})])(g),
    "classify pass": lambda g: Pipeline([classify("h100")])(g),
}


@pytest.mark.parametrize("where", ["repeat", "bytes", "group", "params", "shape"])
@pytest.mark.parametrize("call", sorted(CALLS))
def test_payloads_in_graph_attributes_never_run(tmp_path, where, call):
    g, marker = _poisoned(tmp_path, where)
    try:
        CALLS[call](g)
    except CostModelError:  # refused with a message, never run
        pass
    assert not marker.exists(), f"{call} executed a {where} payload"
