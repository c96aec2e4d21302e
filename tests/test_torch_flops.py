"""Independent check: torch's FlopCounterMode on transformers models built from
the same config.json (random init on the meta device: no weights, no memory).

FlopCounterMode counts matmul FLOPs (mm/addmm/bmm, 2 per MAC) and ignores
causal masking: it charges attention the full S x S score matrix. Our graph
charges FlashAttention only the S(S+1)/2 unmasked pairs, so the comparison
adds the masked half back and pins that remainder separately. Bias adds,
norms, softmax and activations are vector/SFU work in our graph and are not
counted by FlopCounterMode either.
"""

import json
from importlib import resources

import pytest

torch = pytest.importorskip("torch", reason="torch extra not installed")
transformers = pytest.importorskip("transformers", reason="transformers (torch extra) not installed")
from torch.utils.flop_counter import FlopCounterMode  # noqa: E402

from costmodel import op_cost  # noqa: E402
from costmodel.graph import COST, OP, PARAMS  # noqa: E402
from graphs import build_layer, build_model  # noqa: E402
from models import get_model  # noqa: E402

CLASSES = {
    "llama-3.1-8b": ("LlamaConfig", "LlamaForCausalLM"),
    "qwen2.5-7b": ("Qwen2Config", "Qwen2ForCausalLM"),
}


def _hf_model(name, layers=1):
    cfg_json = json.loads(resources.files("models").joinpath("configs", f"{name}.json").read_text())
    cfg_json["num_hidden_layers"] = layers
    cfg_cls, model_cls = (getattr(transformers, c) for c in CLASSES[name])
    config = cfg_cls(**{k: v for k, v in cfg_json.items() if k not in ("architectures", "model_type")})
    config._attn_implementation = "eager"  # plain matmuls: QK^T and PV as bmm
    with torch.device("meta"):
        return model_cls(config)


def _flop_counts(model, batch, seq):
    ids = torch.zeros((batch, seq), dtype=torch.long, device="meta")
    with FlopCounterMode(display=False, depth=None) as fc, torch.no_grad():
        model(ids)
    return fc.get_total_flops(), {k: sum(v.values()) for k, v in fc.get_flop_counts().items()}


def _matmul_flops_full_attention(g):
    """Tensor FLOPs of the graph with attention charged for the full score matrix."""
    total = 0
    for _n, d in g.nodes(data=True):
        if d.get(OP) == "attention":
            total += op_cost("attention", **{**d[PARAMS], "causal": False}).flops_on("tensor") * d["repeat"]
        elif d.get(OP) is not None:
            total += d[COST].flops_on("tensor") * d["repeat"]
    return total


@pytest.mark.parametrize("name", list(CLASSES))
@pytest.mark.parametrize(("batch", "seq"), [(1, 32), (2, 96)])
def test_layer_and_model_match_flopcounter(name, batch, seq):
    cfg = get_model(name)
    hf = _hf_model(name)
    total, by_module = _flop_counts(hf, batch, seq)
    layer_fc = by_module[f"{type(hf).__name__}.model.layers.0"]

    layer = build_layer(cfg, "prefill", batch=batch, seq=seq)
    assert _matmul_flops_full_attention(layer) == layer_fc
    # the remainder our causal count leaves out is exactly the masked half of QK^T and PV
    causal = sum(d[COST].flops_on("tensor") for _, d in layer.nodes(data=True) if d.get(OP) is not None)
    H, hd = cfg.num_attention_heads, cfg.head_dim
    assert layer_fc - causal == 4 * batch * H * hd * seq * (seq - 1) // 2

    model = build_model(cfg.replace(num_hidden_layers=1), "prefill", batch=batch, seq=seq, logits="all")
    assert _matmul_flops_full_attention(model) == total
