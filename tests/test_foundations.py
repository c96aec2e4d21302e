"""Symbols, safe expression parsing, dtypes and tensors."""

import pytest
import sympy

from costmodel import (
    ExpressionSyntaxError,
    InvalidDimensionError,
    Tensor,
    UnknownDTypeError,
    dim,
    get_dtype,
    op_cost,
    parse_expr,
)
from costmodel.symbols import B, S, check_dim


def test_dims_are_positive_integers_with_hf_names():
    assert dim("d_model").name == "hidden_size"
    assert dim("n_kv_heads") is dim("num_key_value_heads")
    assert B.is_integer and B.is_positive
    with pytest.raises(InvalidDimensionError, match="not a valid identifier"):
        dim("2x")


@pytest.mark.parametrize("bad", [0, -3, 1.5, "4096", True, None, sympy.Rational(1, 2), -B])
def test_check_dim_rejects(bad):
    with pytest.raises(InvalidDimensionError, match="field_x must be a positive integer"):
        check_dim(bad, "field_x")


def test_rules_name_the_bad_field():
    with pytest.raises(InvalidDimensionError, match=r"^K must be"):
        op_cost("gemm", M=1, N=1, K=0)
    with pytest.raises(InvalidDimensionError, match=r"^head_dim must be"):
        op_cost("attention", heads=1, q_len=1, kv_len=1, head_dim=-64)


def test_parse_expr_is_safe_and_exact():
    assert parse_expr("B*S") == B * S
    assert parse_expr("1.555e12") == 1555000000000
    assert parse_expr("2**10 - 24") == 1000
    for bad in ("__import__('os').system('x')", "a.b", "[1]", "lambda: 1", "x if y else z", "'s'"):
        with pytest.raises(ExpressionSyntaxError):
            parse_expr(bad)
    with pytest.raises(ExpressionSyntaxError, match="division by zero"):
        parse_expr("1/0")
    with pytest.raises(ExpressionSyntaxError, match="not a valid expression"):
        parse_expr("2 *")


@pytest.mark.parametrize(
    ("name", "bits"),
    [
        ("fp32", 32),
        ("bf16", 16),
        ("fp16", 16),
        ("fp8_e4m3", 8),
        ("e5m2", 8),
        ("int8", 8),
        ("int4", 4),
        # NVFP4: 4 + 8/16 (one E4M3 scale per 16 values); MXFP4: 4 + 8/32 (one E8M0 per 32)
        ("nvfp4", sympy.Rational(9, 2)),
        ("mxfp4", sympy.Rational(17, 4)),
    ],
)
def test_dtype_bits(name, bits):
    assert get_dtype(name).bits == bits


def test_unknown_dtype_lists_allowed():
    with pytest.raises(UnknownDTypeError, match=r"allowed: .*bf16"):
        get_dtype("bf17")
    with pytest.raises(UnknownDTypeError, match="w_dtype"):
        op_cost("gemm", M=1, N=1, K=1, w_dtype="int3")


def test_tensor_bytes_exact_for_block_formats():
    t = Tensor("w", (4096, 4096), "mxfp4")
    assert t.bytes == 4096 * 4096 * 17 // 32  # 4.25 bits each
    assert Tensor("x", (B, S), "bf16").numel == B * S
    with pytest.raises(InvalidDimensionError, match=r"tensor 'x' shape\[1\]"):
        Tensor("x", (B, 0), "bf16")
