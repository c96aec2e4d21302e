"""Every catalog model's weights are its named checkpoint's: the stored config.json carries the
checkpoint's ``quantization_config`` (or none, for a BF16/FP16 release), pinned here per model to a
written-down source, so a catalog model is never costed in a format its checkpoint does not ship.

DeepSeek-V3's config once lacked it, so the official FP8 block-quantised checkpoint was costed in
BF16 (1.34 TB of weights: "does not fit on 8xh200-sxm: needs >= 10 devices", where the real
deployment runs on 8 H200s)."""

from __future__ import annotations

import json
from importlib import resources

import pytest

from graphs.cli import main
from models import MODELS, get_model, param_counts
from models.params import param_bytes

_FP8_BLOCK = {"quant_method": "fp8", "activation_scheme": "dynamic", "weight_block_size": [128, 128]}
_MXFP4 = {"quant_method": "mxfp4"}

#: catalog model -> (the checkpoint's quantization_config fields, or None for an unquantised release;
#: where that is written down)
EXPECTED: dict[str, tuple[dict | None, str]] = {
    "deepseek-v3": (
        {**_FP8_BLOCK, "fmt": "e4m3"},
        "deepseek-ai/DeepSeek-V3 config.json quantization_config (the model card: FP8 weights, 128x128 "
        "block scales, its inference/README converts them to BF16 only on request)",
    ),
    "deepseek-v3-mtp": ({**_FP8_BLOCK, "fmt": "e4m3"}, "the same checkpoint (deepseek-ai/DeepSeek-V3)"),
    "deepseek-v3.2": ({**_FP8_BLOCK, "fmt": "e4m3"}, "deepseek-ai/DeepSeek-V3.2 config.json"),
    "kimi-k2": ({**_FP8_BLOCK, "fmt": "e4m3"}, "moonshotai/Kimi-K2-Instruct-0905 config.json (block FP8)"),
    "minimax-m2": ({**_FP8_BLOCK, "fmt": "float8_e4m3fn"}, "MiniMaxAI/MiniMax-M2 config.json (block FP8)"),
    "gpt-oss-120b": (_MXFP4, "openai/gpt-oss-120b config.json: MXFP4 routed experts, the rest BF16"),
    "gpt-oss-20b": (_MXFP4, "openai/gpt-oss-20b config.json: MXFP4 routed experts, the rest BF16"),
    # BF16 (Llama 2: FP16) releases: their quantised variants are separate repositories the catalog
    # does not name (e.g. meta-llama/Llama-3.1-405B-FP8, Qwen/Qwen3-8B-FP8, Qwen/Qwen3-235B-A22B-FP8,
    # Qwen/Qwen3-Next-80B-A3B-Instruct-FP8, meta-llama/Llama-4-Maverick-17B-128E-Instruct-FP8,
    # zai-org/GLM-4.5-FP8, Qwen/Qwen3.5-397B-A17B-FP8)
    **{
        name: (None, "an unquantised release: its config.json has no quantization_config")
        for name in (
            "llama-2-7b",
            "llama-2-13b",
            "llama-2-70b",
            "llama-3.1-8b",
            "llama-3.1-70b",
            "llama-3.2-1b",
            "llama-3.1-405b",
            "qwen2.5-7b",
            "qwen2.5-72b",
            "mistral-7b",
            "mixtral-8x7b",
            "qwen3-8b",
            "qwen3-32b",
            "qwen3-30b-a3b",
            "qwen3-235b-a22b",
            "qwen3-next-80b-a3b",
            "gemma-3-27b",
            "llama-4-scout",
            "llama-4-maverick",
            "mamba2-2.7b",
            "nemotron-h-8b",
            "jamba-v0.1",
            "glm-4.5",
            "glm-4.5-air",
            "qwen3.5-397b-a17b",
            "tiny",
        )
    },
}


def _stored(name: str) -> dict:
    cfg_file = MODELS[name].config or name
    return json.loads(resources.files("models").joinpath("configs", f"{cfg_file}.json").read_text())


def test_every_catalog_model_has_its_quantization_pinned():
    assert set(EXPECTED) == set(MODELS)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_stored_config_carries_the_checkpoints_quantization(name):
    want, _source = EXPECTED[name]
    data = _stored(name)
    q = data.get("quantization_config") or data.get("text_config", {}).get("quantization_config")
    if want is None:
        assert q is None
        cfg = get_model(name)
        assert cfg.matmul_dtype is None and cfg.expert_dtype is None
        assert cfg.dtype in ("bf16", "fp16", "fp32")
        return
    assert q is not None
    assert {k: q.get(k) for k in want} == want


@pytest.mark.parametrize(
    "name", sorted(n for n, (q, _) in EXPECTED.items() if q and q["quant_method"] == "fp8")
)
def test_fp8_checkpoints_load_as_w8a8_with_bf16_tables(name):
    cfg = get_model(name)
    assert (cfg.dtype, cfg.matmul_dtype) == ("fp8_e4m3", "fp8_e4m3")
    assert (cfg.embedding_weight_dtype, cfg.lm_head_weight_dtype) == ("bf16", "bf16")


@pytest.mark.parametrize("name", ["gpt-oss-20b", "gpt-oss-120b"])
def test_mxfp4_checkpoints_quantise_the_experts_only(name):
    cfg = get_model(name)
    assert (cfg.dtype, cfg.expert_dtype, cfg.matmul_dtype) == ("bf16", "mxfp4", None)


def test_gpt_oss_expert_biases_stay_bf16_in_the_ledger_as_in_the_graph():
    """gpt-oss-120b's checkpoint stores each expert's matrices as MXFP4 blocks and scales
    (4.25 bits a weight) and its biases in bf16. 36 layers x 128 experts x 3 x 2,880 x 2,880 matrix
    weights at 4.25 bits, and their 36 x 128 x (2 x 2,880 + 2,880) bias values at 2 bytes: the
    ledger priced the biases at 4.25 bits too, 58,475,520 bytes under the graph's resident weights
    (`decode` printed two full-weight reads, 19.460 and 19.477 ms). Now 65,248,815,744 bytes =
    60.77 GiB (OpenAI's model card: 60.8 GiB), equal to the graph's."""
    from costmodel.hardware import get_device
    from graphs.serving.analysis.phases import decode_report, near_far_memory

    cfg = get_model("gpt-oss-120b")
    biases = 36 * 128 * (2 * 2880 + 2880)
    matrices = 36 * 128 * 3 * 2880 * 2880
    old = 65_190_340_224  # biases at 4.25 bits
    assert param_bytes(cfg) == old + biases * 2 - biases * 17 // 32 == 65_248_815_744  # 4.25/8 = 17/32
    assert matrices * 4.25 / 8 < param_bytes(cfg)
    bw = float(get_device("h100").bandwidth())
    graph = decode_report(cfg, "h100", ctx=4096).read_every_weight_once_s * bw
    assert near_far_memory(cfg, "h100").weights_bytes == graph == 65_248_815_744


def test_deepseek_v3_weighs_its_fp8_checkpoint():
    """671,026,419,200 parameters (the card's 671B): the embedding and the head, V x d = 129,280 x 7,168
    = 926,679,040 each, in BF16, every other weight one FP8 byte (the 128x128 FP32 block scales,
    4/16,384 bytes a weight, are not counted): 669,173,061,120 + 2 x 926,679,040 x 2 = 672,879,777,280
    bytes, where the BF16 reading was twice the linears: 1,342,052,838,400."""
    cfg = get_model("deepseek-v3")
    total = param_counts(cfg).total
    assert total == 671_026_419_200
    table = 129_280 * 7_168
    assert param_bytes(cfg) == (total - 2 * table) * 1 + 2 * table * 2 == 672_879_777_280


def test_deepseek_v3_decodes_on_eight_h200s(capsys):
    """672.9 GB of FP8 weights over 8 devices of 141 GB (131.32 GiB) fit; the BF16 reading did not."""
    code = main(["decode", "deepseek-v3", "--device", "h200", "--tp", "8", "--batch", "4"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "does not fit" not in out and "TPOT bound" in out


def test_fp8_block_scales_are_named(capsys):
    """Issue 45: the FP8 checkpoint's block size was read and checked but never printed. DeepSeek-V3's
    config.json: "weight_block_size": [128, 128]."""
    from graphs.cli import main
    from models.resolver import resolve_model

    assert resolve_model("deepseek-v3").weight_scale_block == (128, 128)
    assert resolve_model("llama-3.1-8b").weight_scale_block is None
    assert main(["decode", "deepseek-v3", "--device", "h200", "--tp", "8", "--batch", "4"]) == 0
    assert "linears fp8_e4m3 in 128x128 blocks (one FP32 scale each)" in capsys.readouterr().out
