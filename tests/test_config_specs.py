"""ModelConfig's structure: shared fields plus the plug-ins' typed specs nested in it."""

import dataclasses

import pytest
import sympy
from hypothesis import given
from hypothesis import strategies as st

from models import (
    AttentionSpec,
    DSASpec,
    LinearAttentionSpec,
    MLASpec,
    ModelConfig,
    ModelConfigError,
    MoESpec,
    SSMSpec,
    get_model,
)
from models.params import moe_params
from models.specs import SpecMap, flat_fields, spec_classes


def _moe(**kw):
    return ModelConfig("m", 64, 2, 4, 128, 100, **kw)


def test_model_config_holds_the_registered_specs():
    # 29 shared fields (weight_scale_block the latest) + the specs mapping (main had 66 flat fields
    # before the nesting, 69 with DSA's; 35 with one field per built-in spec)
    names = [f.name for f in dataclasses.fields(ModelConfig)]
    assert len(names) == 30 and "specs" in names
    builtin = {
        "attention": AttentionSpec,
        "mla": MLASpec,
        "dsa": DSASpec,
        "moe": MoESpec,
        "ssm": SSMSpec,
        "linear_attention": LinearAttentionSpec,
    }
    assert builtin.items() <= spec_classes().items()  # filled from the registry, not listed
    assert not set(flat_fields()) & set(names)  # no spec field is also a shared field
    ds = get_model("deepseek-v3")
    assert set(ds.specs) == {"attention", "mla", "moe"}  # attention: every config carries it
    assert isinstance(ds.moe, MoESpec) and isinstance(ds.mla, MLASpec) and ds.ssm is None
    assert ds.spec(MoESpec) is ds.moe and ds.spec(SSMSpec) is None
    assert isinstance(get_model("jamba-v0.1").ssm, SSMSpec)
    assert isinstance(get_model("qwen3-next-80b-a3b").linear_attention, LinearAttentionSpec)
    assert get_model("gemma-3-27b").attention.sliding_window == 1024  # Gemma 3's config.json


def test_spec_map_is_canonical():
    a, m = AttentionSpec(qk_norm=True), MoESpec(4, 2, 32)
    one, two = SpecMap({"moe": m, "attention": a}), SpecMap({"attention": a, "moe": m})
    assert (
        one == two and hash(one) == hash(two) and repr(one) == repr(two) and list(one) == ["attention", "moe"]
    )
    with pytest.raises(ModelConfigError, match="spec slot 'mystery' not allowed"):
        _moe(specs={"mystery": a})


def test_slot_none_drops_a_spec_and_the_mapping_is_taken_whole():
    cfg = _moe(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32)
    assert cfg.replace(moe=None).moe is None
    assert ModelConfig("m", 64, 2, 4, 128, 100, specs=cfg.specs) == cfg


def test_flat_keywords_build_the_same_config_as_nested_specs():
    flat = _moe(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32, qk_norm=True)
    nested = _moe(
        moe=MoESpec(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32),
        attention=AttentionSpec(qk_norm=True),
    )
    assert flat == nested and hash(flat) == hash(nested)
    assert isinstance(flat.moe.num_experts, sympy.Integer)  # normalised to a sympy dimension
    # per expert 3 * 64 * 32 = 6144 (SwiGLU), 4 experts 24576, router 4 * 64 = 256
    assert moe_params(flat) == 24832


def test_restating_a_default_builds_no_spec():
    assert _moe(num_shared_experts=0, router_bias=False, ssm_conv_kernel=4).moe is None
    assert _moe(num_shared_experts=0).ssm is None


def test_replace_takes_flat_and_nested_fields():
    cfg = ModelConfig("g", 64, 2, 4, 128, 100)
    w = cfg.replace(sliding_window=16, layer_types=("sliding", "gqa"))
    assert w.attention.sliding_window == 16 and w.attention.rope  # other options kept
    q = w.replace(kv_dtype="fp8")
    assert q.attention == w.attention and q.kv_dtype == "fp8_e4m3"  # fp8 names e4m3
    assert w.replace(attention=AttentionSpec(sliding_window=8)).attention.sliding_window == 8


def test_bad_specs_are_refused_with_the_field():
    with pytest.raises(ModelConfigError, match="MoE config is missing moe_intermediate_size"):
        _moe(num_experts=4, num_experts_per_tok=2)
    with pytest.raises(ModelConfigError, match="need a MoE config"):
        _moe(first_k_dense_replace=1)
    with pytest.raises(ModelConfigError, match=r"m\.sliding_window"):
        _moe(sliding_window=-1)
    with pytest.raises(ModelConfigError, match=r"m\.moe must be a MoESpec or None"):
        _moe(moe=MLASpec(kv_lora_rank=8, qk_nope_head_dim=8, qk_rope_head_dim=8, v_head_dim=8))
    with pytest.raises(TypeError, match="num_expert"):
        _moe(num_expert=4)
    with pytest.raises(ModelConfigError, match="m: MLA layers need mla"):
        _moe().need(MLASpec)


def test_symbolic_bindings_reach_into_the_specs():
    cfg = get_model("mixtral-8x7b")
    sym = ModelConfig.symbolic(like=cfg)
    assert isinstance(sym.moe.num_experts, sympy.Symbol)
    b = cfg.bindings(sym)
    assert b[sym.moe.num_experts] == 8 and b[sym.moe.num_experts_per_tok] == 2  # Mixtral's config.json


@given(
    e=st.integers(1, 64),
    k=st.integers(1, 8),
    i=st.integers(1, 4096),
    shared=st.integers(0, 2),
)
def test_flat_and_nested_agree(e, k, i, shared):
    k = min(k, e)
    flat = _moe(num_experts=e, num_experts_per_tok=k, moe_intermediate_size=i, num_shared_experts=shared)
    nested = _moe(moe=MoESpec(e, k, i, shared))
    assert flat == nested and hash(flat) == hash(nested)
    assert moe_params(flat) == moe_params(nested)
