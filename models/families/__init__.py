"""The Hugging Face families the loader maps, one module each (each registers its reader with
:func:`models.hf_families.register_family`). A new family is a module here and one line below;
the modules load in this order, the loader's order of ``model_type`` values
(:data:`models.hf_read.SUPPORTED_MODEL_TYPES`, ties of :func:`models.family_fit.nearest_families`).
"""

from __future__ import annotations

# isort: off
from . import gpt_oss
from . import qwen3_moe
from . import qwen3_next
from . import gemma3
from . import llama4
from . import mamba2
from . import nemotron_h
from . import jamba
from . import phi3
from . import phi
from . import falcon
from . import gemma2
from . import olmo2
from . import granite
from . import cohere
from . import glm
from . import glm4
from . import starcoder2
from . import internlm2
from . import exaone
from . import glm4_moe
from . import minimax_m2
from . import qwen3_5
from . import deepseek_v32

# isort: on
from ..hf_families import FAMILIES

__all__ = [
    "MODEL_TYPES",
    "gpt_oss",
    "qwen3_moe",
    "qwen3_next",
    "gemma3",
    "llama4",
    "mamba2",
    "nemotron_h",
    "jamba",
    "phi3",
    "phi",
    "falcon",
    "gemma2",
    "olmo2",
    "granite",
    "cohere",
    "glm",
    "glm4",
    "starcoder2",
    "internlm2",
    "exaone",
    "glm4_moe",
    "minimax_m2",
    "qwen3_5",
    "deepseek_v32",
]

#: every model_type a family module here registers, in load order
MODEL_TYPES: tuple[str, ...] = tuple(FAMILIES)
