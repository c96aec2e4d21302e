"""One op table serves every frontend: same mapper, same numbers, duplicates refused."""

import pytest
import sympy

from costmodel.errors import CostModelError
from costmodel.tensor import Tensor
from graphs.importers.table import Mapped, OpView, import_names, lookup, register_import


@pytest.mark.parametrize(
    ("aten", "onnx"),
    [
        ("mm", "MatMul"),
        ("pow", "Pow"),
        ("softmax", "Softmax"),
        ("add", "Add"),
        ("gelu", "Gelu"),
        ("sum", "ReduceSum"),
    ],
)
def test_frontends_share_one_mapper(aten, onnx):
    assert lookup("aten", aten) is not None
    assert lookup("aten", aten) is lookup("onnx", onnx) or (
        lookup("aten", aten).func is lookup("onnx", onnx).func  # functools.partial of one function
        and lookup("aten", aten).args == lookup("onnx", onnx).args
    )


def test_a_name_cannot_be_mapped_twice():
    with pytest.raises(CostModelError, match="already mapped"):
        register_import(aten="mm")(lambda v: Mapped("view", {}, []))


def test_unknown_names_have_no_mapper():
    assert lookup("onnx", "NoSuchOp") is None
    assert "MatMul" in import_names("onnx") and "linear" in import_names("aten")


def _view(a_shape, b_shape, scalars=None):
    a, b = Tensor("a", a_shape, "bf16"), Tensor("b", b_shape, "bf16")
    rows = sympy.Mul(*a_shape[:-1])
    n = b_shape[-1]
    out = Tensor("y", (*a_shape[:-1], n), "bf16")
    assert out.numel == rows * n
    return OpView(ins=[("a", a), ("b", b)], outs=[out], scalars=scalars or (lambda i, k: None))


def test_matmul_folds_the_batch_into_m():
    m = lookup("onnx", "MatMul")(_view((2, 8, 64), (64, 32)))
    # [2*8, 64] x [64, 32]: one GEMM of M = 16, F = 2*16*32*64 = 65536
    assert m.rule == "gemm" and m.params["M"] == 16
    from costmodel import op_cost

    assert op_cost(m.rule, **m.params).flops == 65536


@pytest.mark.parametrize(("exponent", "vector", "sfu"), [(2.0, 1, 0), (0.5, 0, 1), (-1.0, 1, 0), (3.0, 0, 2)])
def test_pow_counts_are_one_table_for_both_frontends(exponent, vector, sfu):
    # x**2 is a multiply, x**0.5 a sqrt on the SFU, x**-1 a reciprocal, any other exp(e*log x): 2 SFU ops
    x = Tensor("x", (4, 8), "fp32")
    for frontend, name in (("aten", "pow"), ("onnx", "Pow")):
        v = OpView(ins=[("x", x)], outs=[x], scalars=lambda i, k: exponent if i == 1 else None)
        p = lookup(frontend, name)(v).params
        assert (p["vector_ops"], p["sfu_ops"]) == (vector, sfu), frontend
