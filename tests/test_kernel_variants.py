"""A kernel whose dispatcher switches implementation by shape is fitted per variant, and
priced only by the variant that runs the row (TensorRT-LLM's decode attention by the query
heads per KV head, ``costmodel.measured.heldout.kernel_variant``)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from costmodel.measured.applied import fastest
from costmodel.measured.corpus import MeasuredDataError
from costmodel.measured.efficiency import PARAMS, Features, Fit
from costmodel.measured.heldout import group_of, kernel_variant


def _rows(heads: list[int], kv: list[int], source: str) -> pd.DataFrame:
    n = len(heads)
    return pd.DataFrame(
        {
            "heads": heads,
            "kv_heads": kv,
            "kernel_source": [source] * n,
            "attn_dtype": ["bfloat16"] * n,
            "kv_dtype": ["fp8"] * n,
        }
    )


def test_variants_follow_query_heads_per_kv_head() -> None:
    # g = H / H_kv: 32/32 = 1 (MHA), 32/8 = 4 and 64/2 = 32 (GQA), 64/1 = 64 (wide MQA)
    df = _rows([32, 32, 64, 64], [32, 8, 2, 1], "torch_flow")
    assert kernel_variant("generation_attention", df).tolist() == ["g=1", "g<=32", "g<=32", "g>32"]
    assert group_of("generation_attention", df).tolist() == [
        "bfloat16/fp8@torch_flow#g=1",
        "bfloat16/fp8@torch_flow#g<=32",
        "bfloat16/fp8@torch_flow#g<=32",
        "bfloat16/fp8@torch_flow#g>32",
    ]
    # FlashAttention-3 (one kernel for every g) and other families keep one group
    fa3 = _rows([32, 64], [32, 1], "vllm_flash_attn_fa3")
    assert kernel_variant("generation_attention", fa3).tolist() == ["", ""]
    assert group_of("generation_attention", fa3).tolist() == ["bfloat16/fp8@vllm_flash_attn_fa3"] * 2
    assert kernel_variant("context_attention", df).tolist() == [""] * 4


def _fit(group: str, t0: float) -> Fit:
    """A fit whose prediction is ``t0`` plus tiny terms (every other parameter at its floor)."""
    params = {name: lo for name, _, lo, _ in PARAMS["roofline"]}
    params["t0_s"] = t0
    return Fit("generation_attention", group, "roofline", params, dict.fromkeys(params, 0.0), 1, 0.0)


def _features(n: int) -> Features:
    z = np.zeros(n)
    return Features(z, z, np.ones(n), z, z, z, z, z, z, z, z)


def test_each_row_is_priced_by_the_variant_that_runs_it() -> None:
    df = _rows([32, 32, 64], [32, 8, 1], "torch_flow")
    fits = {
        "bfloat16/fp8@torch_flow#g=1": _fit("a", 3e-5),
        "bfloat16/fp8@torch_flow#g<=32": _fit("b", 1e-5),
        "bfloat16/fp8@torch_flow#g>32": _fit("c", 9e-5),
    }
    t = fastest(fits, "bfloat16/fp8", _features(3), df=df, family="generation_attention")
    # not the fastest of the three everywhere (1e-5): the dispatcher's variant per row
    assert t == pytest.approx([3e-5, 1e-5, 9e-5], rel=1e-3)


def test_a_missing_variant_is_refused_not_priced_by_another() -> None:
    df = _rows([64], [1], "torch_flow")
    fits = {"bfloat16/fp8@torch_flow#g<=32": _fit("b", 1e-5)}
    with pytest.raises(MeasuredDataError, match="variant"):
        fastest(fits, "bfloat16/fp8", _features(1), df=df, family="generation_attention")
    with pytest.raises(MeasuredDataError, match="needs the rows"):
        fastest(fits, "bfloat16/fp8", _features(1))
