"""ONNX shape inference is bounded: a small hostile model cannot make the importer allocate a
tensor it declares, nor carry shape arithmetic that doubles at every node (review of the
importers, hostile inputs)."""

from __future__ import annotations

import tracemalloc

import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from costmodel.graph import graph_total  # noqa: E402
from graphs.importers import from_onnx  # noqa: E402
from graphs.importers.onnx import MAX_SHAPE_DATA  # noqa: E402


def _model(nodes, inits, inputs=()):
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    graph = helper.make_graph(nodes, "g", list(inputs), [y], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_an_int64_constant_of_shape_is_priced_without_being_built() -> None:
    """onnxruntime's inference built ``np.ones(shape)`` for an int64 ConstantOfShape: a 16384 x
    16384 one held 2.35 GB during import (a model of a few hundred bytes). Here 4096 x 4096
    (128 MiB if built) imports in well under that, and the Neg over it is priced by hand."""
    import numpy as np

    n = 4096
    assert n * n > MAX_SHAPE_DATA
    shape = numpy_helper.from_array(np.array([n, n], np.int64), "shape")
    one = numpy_helper.from_array(np.array([1], np.int64), "one")
    nodes = [
        helper.make_node("ConstantOfShape", ["shape"], ["c"], value=one),
        helper.make_node("Neg", ["c"], ["d"]),
        helper.make_node("Cast", ["d"], ["y"], to=TensorProto.FLOAT),
    ]
    model = _model(nodes, [shape])
    from_onnx(model)  # its imports (onnxruntime's tools import torch) before the count
    tracemalloc.start()
    try:
        g = from_onnx(model)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 32 * 2**20  # the int64 tensor alone is 128 MiB
    neg = graph_total(g.subgraph(["Neg_1"]))
    # Neg over n*n int64 elements: one op each, read 8 and write 8 bytes each
    assert neg.flops == n * n and neg.bytes == 2 * 8 * n * n


def _doubling_chain(rounds: int):
    """``s = s * (s + 1)`` ``rounds`` times on the symbolic batch, then a tensor of that shape:
    the expression's tree doubles each round (at 16 rounds printing it took a minute)."""
    import numpy as np

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch"])
    one = numpy_helper.from_array(np.array([1], np.int64), "one")
    nodes = [helper.make_node("Shape", ["x"], ["s0"])]
    for i in range(rounds):
        nodes.append(helper.make_node("Add", [f"s{i}", "one"], [f"p{i}"]))
        nodes.append(helper.make_node("Mul", [f"s{i}", f"p{i}"], [f"s{i + 1}"]))
    nodes.append(helper.make_node("ConstantOfShape", [f"s{rounds}"], ["c"]))
    nodes.append(helper.make_node("Relu", ["c"], ["y"]))
    return _model(nodes, [one], [x])


def test_shape_arithmetic_that_doubles_each_node_stops_at_an_opaque_size() -> None:
    g = from_onnx(_doubling_chain(14))
    relu = f"Relu_{2 * 14 + 2}"
    (out,) = g.nodes[relu]["outputs"]
    # the carried value was dropped once too large: the size is one opaque symbol named after
    # the tensor, visible in the totals, not a 2**14-term polynomial in batch
    assert len(out.shape) == 1 and len(out.shape[0].free_symbols) == 1
    assert str(out.shape[0]).startswith("ConstantOfShape")
    # a short chain is still carried exactly: s * (s + 1) of the batch (``batch`` is the symbol B)
    g1 = from_onnx(_doubling_chain(1))
    (out1,) = g1.nodes["Relu_4"]["outputs"]
    assert str(out1.shape[0]) == "B*(B + 1)"


def test_shape_values_beyond_int64_are_not_carried() -> None:
    """2**62 squared 40 times ran 103 s before running out of memory (each square doubles the
    integer's digits); ONNX shape values are int64, so one beyond it is left unknown."""
    import numpy as np

    from graphs.importers.onnx import _shape_value_ok

    assert _shape_value_ok([2**63 - 1, 7]) and not _shape_value_ok([7, 2**63])
    assert not _shape_value_ok(list(range(MAX_SHAPE_DATA + 1)))

    s = numpy_helper.from_array(np.array([2**62], np.int64), "s")
    nodes = [helper.make_node("Mul", ["s", "s"], ["m0"])]
    for i in range(1, 40):
        nodes.append(helper.make_node("Mul", [f"m{i - 1}", f"m{i - 1}"], [f"m{i}"]))
    nodes.append(helper.make_node("ConstantOfShape", ["m39"], ["y"]))
    g = from_onnx(_model(nodes, [s]))
    (out,) = g.nodes["ConstantOfShape_40"]["outputs"]
    assert all(not d.is_Number for d in out.shape)  # the square of 2**62 is already beyond int64


def test_a_megabyte_node_name_gives_a_short_one_line_error() -> None:
    """A cyclic graph whose node, op type and input names are each a megabyte (with an escape and
    a newline): the error quotes 100 characters of each, escaped, on one line."""
    from costmodel.errors import CostModelError

    long = "n\x1b[2J\n" + "x" * 2**20
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])
    nodes = [helper.make_node("Add", ["x", long], ["y"], name=long)]
    with pytest.raises(CostModelError) as err:
        from_onnx(_model(nodes, [], [x]))
    msg = str(err.value)
    assert "\n" not in msg and "\x1b" not in msg and len(msg) < 600
    assert msg.startswith("ONNX node 'n\\x1b[2J\\nxxxx") and "(Add) reads 'n\\x1b[2J" in msg


def _peak(model) -> tuple[object, int]:
    """``from_onnx(model)`` and the most memory Python held during it (imports done first)."""
    from_onnx(model)  # its imports (onnxruntime's tools import torch) before the count
    tracemalloc.start()
    try:
        g = from_onnx(model)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return g, peak


@pytest.mark.parametrize("op", ["Max", "Min"])
def test_a_constant_of_shape_sized_by_shape_arithmetic_is_not_built(op: str) -> None:
    """``Max(shape, shape)`` gives sympy integers, not ints: the guard counted them as 1, and
    onnxruntime built ``np.ones`` of 8192 x 8192 int64 (1 GB peak; 16384 x 16384 is 2 GiB). Any
    dim it reads as a number now counts: the import stays small, the tensor keeps its exact
    n x n shape (only its values are not carried), and the Neg over it is priced by hand."""
    import numpy as np

    n = 16384
    shape = numpy_helper.from_array(np.array([n, n], np.int64), "shape")
    one = numpy_helper.from_array(np.array([1], np.int64), "one")
    nodes = [
        helper.make_node(op, ["shape", "shape"], ["s2"]),
        helper.make_node("ConstantOfShape", ["s2"], ["c"], value=one),
        helper.make_node("Neg", ["c"], ["d"]),
        helper.make_node("Cast", ["d"], ["y"], to=TensorProto.FLOAT),
    ]
    g, peak = _peak(_model(nodes, [shape]))
    assert peak < 50 * 2**20  # the int64 tensor alone is 2 GiB
    (out,) = g.nodes["ConstantOfShape_1"]["outputs"]
    assert tuple(out.shape) == (n, n)
    neg = graph_total(g.subgraph(["Neg_2"]))
    # Neg over n*n int64 elements: one op each, read 8 and write 8 bytes each
    assert neg.flops == n * n and neg.bytes == 2 * 8 * n * n


def test_a_concat_that_doubles_each_node_is_not_carried() -> None:
    """onnxruntime's Concat stores ``[]`` (small enough) and then extends it in place: 12 chained
    ``Concat(c, c)`` of 4096 values held 392 MB, doubling each node. The value is dropped once
    larger than MAX_SHAPE_DATA; 20 rounds import small, the last copy priced by hand."""
    import numpy as np

    rounds, n0 = 20, 4096
    init = numpy_helper.from_array(np.arange(n0, dtype=np.int64) % 7 + 1, "c0")
    nodes = [helper.make_node("Concat", [f"c{i}", f"c{i}"], [f"c{i + 1}"], axis=0) for i in range(rounds)]
    nodes.append(helper.make_node("Cast", [f"c{rounds}"], ["y"], to=TensorProto.FLOAT))
    g, peak = _peak(_model(nodes, [init]))
    assert peak < 50 * 2**20  # carried, the last value alone is 4096 * 2**20 Python ints
    (out,) = g.nodes[f"Concat_{rounds - 1}"]["outputs"]
    assert tuple(out.shape) == (n0 * 2**rounds,)  # sizes are still exact
    cast = graph_total(g.subgraph([f"Cast_{rounds}"]))
    # Cast int64 -> fp32 of n0 * 2**20 elements: reads 8 and writes 4 bytes each
    assert cast.bytes == (8 + 4) * n0 * 2**rounds
