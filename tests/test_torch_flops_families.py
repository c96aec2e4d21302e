"""Independent check of the layer-pattern families against torch's FlopCounterMode.

The transformers class of each new catalog model is built from the shipped
config.json on the meta device (bf16: the MoE classes call ``grouped_mm``,
which wants it), cut to its first few layers, and run on ``B x S`` tokens.
FlopCounterMode counts matmuls (2 per MAC) per module; we compare module by
module with our graph of the same layers:

* attention modules (``self_attn``): our q/k/v/o projections (and the output
  gate's half of Qwen3-Next's ``q_proj``) plus attention charged the *full*
  score matrix, because eager attention multiplies all of it and masks after
  (windows, chunks and causality do not change its count);
* dense MLPs, routers and shared experts: equal;
* routed experts: FlopCounterMode counts **nothing** for ``grouped_mm`` (gpt-oss,
  Qwen3-MoE, Qwen3-Next), so they are not compared; Llama 4's experts run every
  token through every expert (``bmm`` over ``E``), which is ``E/k`` times the
  routed work we charge, and that ratio is checked;
* Mamba-2 and gated delta-net mixers: the projections are compared; their scans
  run torch fallbacks that pad the sequence to a chunk and compute a different
  algorithm, so the scan itself is pinned to hand derivations elsewhere
  (tests/test_model_families.py).
"""

import json
from importlib import resources

import pytest

torch = pytest.importorskip("torch", reason="torch extra not installed")
transformers = pytest.importorskip("transformers", reason="transformers (torch extra) not installed")
from torch.utils.flop_counter import FlopCounterMode  # noqa: E402

from costmodel import op_cost  # noqa: E402
from costmodel.graph import COST, OP, PARAMS, REPEAT  # noqa: E402
from graphs import build_model  # noqa: E402
from models import get_model, param_counts  # noqa: E402

#: catalog model -> (config class, model class, layers built)
CLASSES = {
    "qwen3-8b": ("Qwen3Config", "Qwen3ForCausalLM", 1),
    "gemma-3-27b": ("Gemma3TextConfig", "Gemma3ForCausalLM", 6),
    "gpt-oss-20b": ("GptOssConfig", "GptOssForCausalLM", 2),
    "qwen3-30b-a3b": ("Qwen3MoeConfig", "Qwen3MoeForCausalLM", 1),
    "qwen3-next-80b-a3b": ("Qwen3NextConfig", "Qwen3NextForCausalLM", 4),
    "llama-4-scout": ("Llama4TextConfig", "Llama4ForCausalLM", 4),
    "mamba2-2.7b": ("Mamba2Config", "Mamba2ForCausalLM", 1),
}
_ATTN = {"q_proj", "q_gate_proj", "k_proj", "v_proj", "o_proj", "attention"}
#: HF module path (after the layer index) -> the local names of our nodes it covers
_MODULES = {
    "self_attn": _ATTN,
    "mlp.gate": {"router"},
    "mlp.router": {"router"},
    "feed_forward.router": {"router"},
    "mlp.shared_expert": {"shared.gate_proj", "shared.up_proj", "shared.down_proj"},
    "feed_forward.shared_expert": {"shared.gate_proj", "shared.up_proj", "shared.down_proj"},
    "linear_attn.in_proj_qkvz": {"in_proj_qkvz"},
    "linear_attn.in_proj_ba": {"in_proj_ba"},
    "linear_attn.out_proj": {"out_proj"},
    "mixer.in_proj": {"in_proj"},
    "mixer.out_proj": {"out_proj"},
}
_DENSE_MLP = {"mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"}


def _hf(name, layers):
    data = json.loads(resources.files("models").joinpath("configs", f"{name}.json").read_text())
    data = data.get("text_config", data)
    data = {k: v for k, v in data.items() if k not in ("architectures", "model_type", "quantization_config")}
    data["num_hidden_layers"] = layers
    if "layer_types" in data:
        data["layer_types"] = data["layer_types"][:layers]
    cfg_cls, model_cls, _ = CLASSES[name]
    config = getattr(transformers, cfg_cls)(**data)
    config._attn_implementation = "eager"  # QK^T and PV as plain bmm
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)
    try:
        with torch.device("meta"):
            return getattr(transformers, model_cls)(config)
    finally:
        torch.set_default_dtype(old)


def _forward_counts(model, ids, **kwargs):
    """FlopCounterMode's per-module counts of one forward pass (a forward count: no gradients).

    The parameters stop requiring gradients first: FlopCounterMode's module tracker hooks every input
    of a module that requires a gradient, and a view of a parameter taken under ``no_grad`` (transformers
    5's causal-conv1d path passes ``conv1d.weight.squeeze(1)`` to a hub-kernel module) requires one but
    has no gradient function, which torch's hook refuses (``Expected gradient function to be set``)."""
    model.requires_grad_(False)
    with FlopCounterMode(display=False, depth=None) as fc, torch.no_grad():
        model(ids, **kwargs)
    return fc.get_flop_counts()


def _hf_counts(model, batch, seq):
    ids = torch.zeros((batch, seq), dtype=torch.long, device="meta")
    return {k: sum(v.values()) for k, v in _forward_counts(model, ids).items()}


def _ours(name, layers, batch, seq):
    cfg = get_model(name)
    if cfg.layer_types is not None:
        cfg = cfg.replace(num_hidden_layers=layers, layer_types=cfg.layer_types[:layers])
    else:
        cfg = cfg.replace(num_hidden_layers=layers)
    g = build_model(cfg, "prefill", batch=batch, seq=seq, logits="all")
    by_local: dict[str, int] = {}
    for n, d in g.nodes(data=True):
        if d.get(OP) is None:
            continue
        cost = d[COST]
        if d[OP] == "attention":  # the full score matrix, as eager attention multiplies it
            p = {k: v for k, v in d[PARAMS].items() if k not in ("window", "chunk", "sinks")}
            cost = op_cost("attention", **{**p, "causal": False})
        local = n.split(".", 1)[1] if "." in n else n
        by_local[local] = by_local.get(local, 0) + int(cost.flops_on("tensor") * d[REPEAT])
    return by_local


def _sum_hf(counts, prefix, layers, path):
    return sum(counts.get(f"{prefix}.layers.{i}.{path}", 0) for i in range(layers))


@pytest.mark.parametrize("name", list(CLASSES))
def test_modules_match_flopcounter(name):
    batch, seq = 2, 48
    layers = CLASSES[name][2]
    hf = _hf(name, layers)
    counts = _hf_counts(hf, batch, seq)
    ours = _ours(name, layers, batch, seq)
    top = type(hf).__name__
    prefix = f"{top}.backbone" if name.startswith("mamba") else f"{top}.model"
    compared = 0
    for path, locals_ in _MODULES.items():
        theirs = _sum_hf(counts, prefix, layers, path)
        if theirs:
            assert theirs == sum(ours.get(n, 0) for n in locals_), path
            compared += 1
    dense = sum(_sum_hf(counts, prefix, layers, p) for p in _DENSE_MLP)
    if "feed_forward" not in " ".join(counts):
        assert dense == sum(ours.get(n, 0) for n in _DENSE_MLP)
    assert counts[f"{top}.lm_head"] == ours["lm_head"]
    assert compared >= 1


def test_routed_experts_are_not_counted_by_grouped_mm():
    """What FlopCounterMode misses, stated: ``grouped_mm`` experts count zero."""
    counts = _hf_counts(_hf("qwen3-30b-a3b", 1), 1, 16)
    layer = counts["Qwen3MoeForCausalLM.model.layers.0"]
    attn = counts["Qwen3MoeForCausalLM.model.layers.0.self_attn"]
    router = counts["Qwen3MoeForCausalLM.model.layers.0.mlp.gate"]
    assert layer == attn + router  # 128 experts x 8 active contributed nothing
    assert _ours("qwen3-30b-a3b", 1, 1, 16)["experts.up_proj"] == 2 * 16 * 8 * 2048 * 768


def test_llama4_experts_run_every_token_through_every_expert():
    """transformers' Llama 4 multiplies all ``E`` experts densely: ``E/k`` x our routed work."""
    counts = _hf_counts(_hf("llama-4-scout", 1), 1, 16)
    ours = _ours("llama-4-scout", 1, 1, 16)
    routed = sum(ours[f"experts.{p}"] for p in ("gate_proj", "up_proj", "down_proj"))
    assert counts["Llama4ForCausalLM.model.layers.0.feed_forward.experts"] == routed * 16 // 1


@pytest.mark.slow
def test_nemotron_h_modules_match_flopcounter():
    """Nemotron-H names every layer's block ``mixer``: Mamba-2 (``in_proj``/``out_proj``), the MLP-only
    layers (``up_proj``/``down_proj``, squared ReLU) and attention (layer 7 of the first 8)."""
    CLASSES["nemotron-h-8b"] = ("NemotronHConfig", "NemotronHForCausalLM", 8)
    try:
        batch, seq, layers = 2, 48, 8
        counts = _hf_counts(_hf("nemotron-h-8b", layers), batch, seq)
        ours = _ours("nemotron-h-8b", layers, batch, seq)
    finally:
        del CLASSES["nemotron-h-8b"]
    p = "NemotronHForCausalLM.model"
    for hf_name, local in (
        ("in_proj", "in_proj"),
        ("out_proj", "out_proj"),
        ("up_proj", "mlp.up_proj"),
        ("down_proj", "mlp.down_proj"),
    ):
        assert _sum_hf(counts, p, layers, f"mixer.{hf_name}") == ours[local], hf_name
    assert counts[f"{p}.layers.7.mixer"] == sum(ours.get(n, 0) for n in _ATTN)
    assert counts["NemotronHForCausalLM.lm_head"] == ours["lm_head"]


# Every catalog model's parameter count against transformers on the meta device:
# tests/test_catalog_audit.py (all of them, this file's former 13 among them).


def test_jamba_mamba1_projections_match_flopcounter():
    """Jamba's Mamba-1 mixer (in/x/dt/out projections) and dense MLP, on a shrunk copy of the shipped
    config run on the CPU with random weights (its slow path calls ``.item()``, which meta tensors
    refuse); our graph is built from the same shrunk config."""
    from models import config_from_hf_dict

    data = json.loads(resources.files("models").joinpath("configs", "jamba-v0.1.json").read_text())
    small = {**data, "hidden_size": 64, "intermediate_size": 96, "num_attention_heads": 4}
    small |= {"num_key_value_heads": 2, "mamba_dt_rank": 8, "num_experts": 4, "vocab_size": 128}
    small |= {"num_hidden_layers": 1, "use_mamba_kernels": False}
    config = transformers.JambaConfig(
        **{k: v for k, v in small.items() if k not in ("architectures", "model_type")}
    )
    torch.manual_seed(0)
    model = transformers.JambaForCausalLM(config).eval()
    ids = torch.zeros((2, 48), dtype=torch.long)
    raw = _forward_counts(model, ids, use_cache=False)  # a Mamba-only stack has no attention cache to size
    counts = {k: sum(v.values()) for k, v in raw.items()}
    cfg = config_from_hf_dict(small, "jamba-small")
    assert sum(p.numel() for p in model.parameters()) == param_counts(cfg).total
    g = build_model(cfg, "prefill", batch=2, seq=48, logits="all")
    ours = {n.split(".", 1)[1]: int(d[COST].flops_on("tensor")) for n, d in g.nodes(data=True) if d.get(OP)}
    p = "JambaForCausalLM.model.layers.0"
    for proj in ("in_proj", "x_proj", "out_proj"):
        assert counts[f"{p}.mamba.{proj}"] == ours[proj], proj
    # dt_proj runs as a plain matmul of its weight inside the mixer: the mixer's matmul total holds it,
    # with the reference scan's readout y_t = C_t . h_t, a matmul of the state [B, d_inner, N] by
    # C_t [B, N, 1] per step: 2 * B * S * d_inner * N = 2 * 2 * 48 * 128 * 16 = 393,216 FLOPs.
    # Which matmuls lower to mm and which to bmm depends on the transformers version (5.x runs x_proj,
    # dt_proj and out_proj on 3-D transposed inputs: bmm), so both are summed; the conv is not a matmul.
    d_inner, d_state = small["mamba_expand"] * small["hidden_size"], small["mamba_d_state"]
    readout = 2 * 2 * 48 * d_inner * d_state
    mixer_mm = sum(raw[f"{p}.mamba"].get(op, 0) for op in (torch.ops.aten.mm, torch.ops.aten.bmm))
    assert mixer_mm == sum(ours[n] for n in ("in_proj", "x_proj", "dt_proj", "out_proj")) + readout
    for proj in ("gate_proj", "up_proj", "down_proj"):
        assert counts[f"{p}.feed_forward.{proj}"] == ours[f"mlp.{proj}"], proj
