"""The catalog's entries: each real model's ``config.json`` shipped as data
(``models/configs``), with its source and the published parameter figures it is checked against.

A new catalog model is one entry here and its config file. Pure data (no sympy, nothing of
:mod:`models` imported), so the file readers (:mod:`models.sources`) look names up here and
:func:`models.catalog.get_model` builds them through :func:`models.resolver.resolve_model`.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["CatalogModel", "MODELS", "model_names"]


@dataclass(frozen=True)
class CatalogModel:
    """A catalog entry: where its config comes from and what was published."""

    name: str
    source: str
    published_total: float | None = None
    published_non_embedding: float | None = None
    published_active: float | None = None
    published_source: str = ""
    #: the shipped config file (``configs/<config>.json``); default the entry's name
    config: str = ""
    #: keep the multi-token-prediction modules (DeepSeek-V3's MTP)
    mtp: bool = False
    #: what the published active count includes: "all" parameters a token uses, "no_embedding"
    #: (the input table left out: gpt-oss's card, DeepSeek-V3's README_WEIGHTS.md) or "non_embedding" (embedding and head left out)
    active_counts: str = "all"


_HF = "https://huggingface.co/{}/blob/main/config.json"

MODELS: dict[str, CatalogModel] = {
    m.name: m
    for m in (
        CatalogModel(
            "llama-2-7b",
            _HF.format("meta-llama/Llama-2-7b-hf"),
            6.74e9,
            published_source="Hugging Face model page parameter count (6.74B)",
        ),
        CatalogModel(
            "llama-2-13b",
            _HF.format("meta-llama/Llama-2-13b-hf"),
            13.0e9,
            published_source="Llama 2 paper (Touvron et al. 2023), 13B",
        ),
        CatalogModel(
            "llama-2-70b",
            _HF.format("meta-llama/Llama-2-70b-hf"),
            69.0e9,
            published_source="Hugging Face model page parameter count (69B)",
        ),
        CatalogModel(
            "llama-3.1-8b",
            _HF.format("meta-llama/Llama-3.1-8B"),
            8.03e9,
            published_source="Llama 3.1 model card (8.03B)",
        ),
        CatalogModel(
            "llama-3.1-70b",
            _HF.format("meta-llama/Llama-3.1-70B"),
            70.6e9,
            published_source="Llama 3.1 model card (70.6B)",
        ),
        CatalogModel(
            "llama-3.2-1b",
            _HF.format("meta-llama/Llama-3.2-1B"),
            1.23e9,
            published_source="Llama 3.2 model card: 1B (1.23B), tied embeddings; a draft for Llama 3.1 "
            "(the same 128,256-token vocabulary)",
        ),
        CatalogModel(
            "llama-3.1-405b",
            _HF.format("meta-llama/Llama-3.1-405B"),
            405e9,
            published_source="Llama 3.1 model card (405B)",
        ),
        CatalogModel(
            "qwen2.5-7b",
            _HF.format("Qwen/Qwen2.5-7B"),
            7.61e9,
            6.53e9,
            published_source="Qwen2.5-7B model card: 7.61B, 6.53B non-embedding",
        ),
        CatalogModel(
            "qwen2.5-72b",
            _HF.format("Qwen/Qwen2.5-72B"),
            72.7e9,
            70.0e9,
            published_source="Qwen2.5-72B model card: 72.7B, 70.0B non-embedding",
        ),
        CatalogModel(
            "mistral-7b",
            _HF.format("mistralai/Mistral-7B-v0.3"),
            7.25e9,
            published_source="Hugging Face model page parameter count (7.25B)",
        ),
        CatalogModel(
            "mixtral-8x7b",
            _HF.format("mistralai/Mixtral-8x7B-v0.1"),
            46.7e9,
            None,
            12.9e9,
            published_source="Mistral AI, 'Mixtral of experts' (2023): 46.7B total, 12.9B active",
        ),
        CatalogModel(
            "deepseek-v3",
            _HF.format("deepseek-ai/DeepSeek-V3"),
            671e9,
            None,
            36.6e9,
            published_source="DeepSeek-V3 technical report (arXiv:2412.19437): 671B total, 37B "
            "activated per token (the 14B multi-token-prediction module excluded); the model's "
            "README_WEIGHTS.md states the main model's activated count to a further digit, 36.6B "
            "including the 0.9B output head, i.e. the input embedding left out. FP8 block-scaled "
            "weights (128x128, W8A8) as published: the config's quantization_config",
            active_counts="no_embedding",
        ),
        CatalogModel(
            "deepseek-v3-mtp",
            _HF.format("deepseek-ai/DeepSeek-V3"),
            685e9,
            published_source="DeepSeek-V3 model card: 685B on Hugging Face, 671B main model and 14B "
            "multi-token-prediction module",
            config="deepseek-v3",
            mtp=True,
        ),
        CatalogModel(
            "deepseek-v3.2",
            _HF.format("deepseek-ai/DeepSeek-V3.2"),
            671.88e9,
            published_source="DeepSeek-V3.2 model card and DeepSeek-V3.2-Exp report (DeepSeek Sparse Attention "
            "on the DeepSeek-V3.1-Terminus backbone): 685B on Hugging Face with the 14B multi-token-prediction "
            "module, i.e. DeepSeek-V3's 671B main model plus the lightning indexer (61 x 13,959,424 = 0.85B; "
            "transformers' DeepseekV32ForCausalLM on the meta device: 671,877,944,064); the cards state no "
            "activated count of their own. FP8 block-scaled weights as published",
        ),
        CatalogModel(
            "gpt-oss-120b",
            _HF.format("openai/gpt-oss-120b"),
            116.83e9,
            None,
            5.13e9,
            published_source="gpt-oss-120b & gpt-oss-20b model card (OpenAI, arXiv:2508.10925), table 1: "
            "116.83B total, 5.13B active (the unembedding counted, the embedding not)",
            active_counts="no_embedding",
        ),
        CatalogModel(
            "gpt-oss-20b",
            _HF.format("openai/gpt-oss-20b"),
            20.91e9,
            None,
            3.61e9,
            published_source="gpt-oss model card (arXiv:2508.10925), table 1: 20.91B total, 3.61B active",
            active_counts="no_embedding",
        ),
        CatalogModel(
            "qwen3-8b",
            _HF.format("Qwen/Qwen3-8B"),
            8.2e9,
            6.95e9,
            published_source="Qwen3-8B model card: 8.2B, 6.95B non-embedding",
        ),
        CatalogModel(
            "qwen3-32b",
            _HF.format("Qwen/Qwen3-32B"),
            32.8e9,
            31.2e9,
            published_source="Qwen3-32B model card: 32.8B, 31.2B non-embedding",
        ),
        CatalogModel(
            "qwen3-30b-a3b",
            _HF.format("Qwen/Qwen3-30B-A3B"),
            30.5e9,
            29.9e9,
            3.3e9,
            published_source="Qwen3-30B-A3B model card: 30.5B total, 3.3B activated, 29.9B non-embedding",
        ),
        CatalogModel(
            "qwen3-235b-a22b",
            _HF.format("Qwen/Qwen3-235B-A22B"),
            235e9,
            234e9,
            22e9,
            published_source="Qwen3-235B-A22B model card: 235B total, 22B activated, 234B non-embedding",
        ),
        CatalogModel(
            "qwen3-next-80b-a3b",
            _HF.format("Qwen/Qwen3-Next-80B-A3B-Instruct"),
            80e9,
            79e9,
            3e9,
            published_source="Qwen3-Next-80B-A3B-Instruct model card: 80B total, 3B activated, 79B "
            "non-embedding (its active count read as non-embedding: 3.25B counted)",
            active_counts="non_embedding",
        ),
        CatalogModel(
            "gemma-3-27b",
            _HF.format("google/gemma-3-27b-it"),
            None,
            25.6e9,
            published_source="Gemma 3 technical report (arXiv:2503.19786), table 1: 27B has 1,416M "
            "embedding and 25,600M non-embedding parameters (and a 417M vision encoder, not built)",
        ),
        CatalogModel(
            "llama-4-scout",
            _HF.format("meta-llama/Llama-4-Scout-17B-16E"),
            109e9,
            None,
            17e9,
            published_source="Llama 4 model card: Scout 17B active, 109B total (the vision encoder included)",
        ),
        CatalogModel(
            "llama-4-maverick",
            _HF.format("meta-llama/Llama-4-Maverick-17B-128E"),
            400e9,
            None,
            17e9,
            published_source="Llama 4 model card: Maverick 17B active, 400B total (the vision encoder included)",
        ),
        CatalogModel(
            "mamba2-2.7b",
            "https://huggingface.co/state-spaces/mamba2-2.7b/blob/main/config.json",
            2.7e9,
            published_source="state-spaces/mamba2-2.7b: 2.7B (Dao & Gu 2024, pretrained models). Its mamba_ssm "
            "config (d_model 2560, n_layer 64, d_state 128, headdim 64, expand 2, ngroups 1, vocab 50277 "
            "padded to a multiple of 16: 50288) is shipped in the field names of transformers' Mamba2Config",
        ),
        CatalogModel(
            "nemotron-h-8b",
            _HF.format("nvidia/Nemotron-H-8B-Base-8K"),
            8e9,
            published_source="Nemotron-H-8B-Base-8K model card (8B; 52 layers, 4096 wide, 8K context: "
            "Megatron-Bridge's Nemotron-H page). Config values are NemotronHConfig's defaults, which its "
            "docstring states are the NemotronH-v0.1 (8B) model, with the 8K context",
        ),
        CatalogModel(
            "jamba-v0.1",
            _HF.format("ai21labs/Jamba-v0.1"),
            52e9,
            None,
            12e9,
            published_source="Jamba-v0.1 model card (AI21): 12B active and 52B total parameters; Lieber et al., "
            "'Jamba' (arXiv:2403.19887): one attention layer in eight, MoE every other layer, 16 experts top-2",
        ),
        CatalogModel(
            "kimi-k2",
            _HF.format("moonshotai/Kimi-K2-Instruct-0905"),
            1e12,
            None,
            32e9,
            published_source="Kimi K2 model card (moonshotai/Kimi-K2-Instruct-0905), model summary: 1T total, "
            "32B activated; 61 layers (1 dense), 384 experts, 8 selected, 1 shared, MLA, 64 heads, 160K "
            "vocabulary. Its remote-code config is DeepSeek-V3's (model_type kimi_k2); FP8 block-scaled "
            "weights as published",
        ),
        CatalogModel(
            "glm-4.5",
            _HF.format("zai-org/GLM-4.5"),
            355e9,
            None,
            32e9,
            published_source="GLM-4.5 model card and report (arXiv:2508.06471), table 1: 355B total, 32B "
            "activated (read as non-embedding: 32.08B counted; with the embedding and head, 33.63B); the one "
            "MTP layer is not built (mtp=False, as transformers' Glm4MoeForCausalLM)",
            active_counts="non_embedding",
        ),
        CatalogModel(
            "glm-4.5-air",
            _HF.format("zai-org/GLM-4.5-Air"),
            106e9,
            None,
            12e9,
            published_source="GLM-4.5 model card (zai-org/GLM-4.5-Air): 106B total, 12B activated (read as "
            "non-embedding: 12.18B counted)",
            active_counts="non_embedding",
        ),
        CatalogModel(
            "minimax-m2",
            _HF.format("MiniMaxAI/MiniMax-M2"),
            230e9,
            None,
            10e9,
            published_source="MiniMax-M2 model card (transformers docs, model_doc/minimax_m2): 230B total, 10B "
            "active (read as non-embedding: 9.80B counted). Full GQA attention in all 62 layers (attn_type_list "
            "all 1), FP8 block-scaled weights as published; its 3 MTP modules are not built",
            active_counts="non_embedding",
        ),
        CatalogModel(
            "qwen3.5-397b-a17b",
            _HF.format("Qwen/Qwen3.5-397B-A17B"),
            397e9,
            None,
            17e9,
            published_source="Qwen3.5-397B-A17B model card: 397B total, 17B activated (the text model: 60 "
            "layers, 45 gated-delta-net and 15 gated-attention, 512 experts top-10 plus a shared one; its "
            "vision encoder is not built). The gated delta net is the linear_attention mixer (fp32 state of "
            "d_k x d_v per value head)",
        ),
        CatalogModel(
            "tiny",
            "costmodel test config (2 layers, d=64, GQA 4/2, head_dim 16; 131,072-token context so every default runs)",
        ),
    )
}


def model_names() -> tuple[str, ...]:
    """The catalog names, in catalog order.

    Returns
    -------
    tuple of str
        Every name :func:`get_model` takes from the catalog.
    """
    return tuple(MODELS)
