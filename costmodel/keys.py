"""Typed names: execution units, memory levels, phases, node kinds, links, and every
graph/node/edge attribute key.

The enums are ``StrEnum`` s, so a member *is* its string (``Unit.TENSOR ==
"tensor"``): JSON, TOML files and user flags keep working, while code names
the member and a typo fails at import time instead of silently missing a key.

>>> Unit.TENSOR == "tensor", Phase("decode") is Phase.DECODE
(True, True)
>>> sorted(str(k) for k in NodeKind.sources())
['input', 'kv_cache', 'weight']
"""

from __future__ import annotations

from enum import StrEnum

__all__ = [
    "Unit",
    "Level",
    "Phase",
    "NodeKind",
    "LinkName",
    "Role",
    "memory_kind",
    # node attributes
    "OP",
    "COST",
    "PARAMS",
    "KIND",
    "PHASE",
    "GROUP",
    "LAYER",
    "REPEAT",
    "INPUTS",
    "OUTPUTS",
    "UNKNOWN",
    "ROLE",
    "FRONTEND_OP",
    "MEASURED_S",
    "KV_CAP",
    "MERGED",
    "EXPERT_PLAN",
    "SCALE_BLOCK",
    # edge attributes
    "TENSOR",
    "BYTES",
    # graph attributes
    "G_PHASE",
    "G_GROUPS",
    "GROUP_ENTRY",
    "GROUP_EXIT",
    "G_EXIT",
    "G_TOKENS",
    "G_BATCH",
    "G_UNKNOWN_OPS",
    "G_SYMBOLS",
]


class Unit(StrEnum):
    """Execution units: matrix engines, ordinary ALUs, transcendental units."""

    TENSOR = "tensor"
    VECTOR = "vector"
    SFU = "sfu"


class Level(StrEnum):
    """Memory levels a cost can charge bytes to (off-chip first)."""

    DRAM = "dram"
    L2 = "l2"
    SMEM = "smem"


class Phase(StrEnum):
    """Inference phases: prefill (``T = B*S`` tokens) and decode (``T = B`` over ``ctx``)."""

    PREFILL = "prefill"
    DECODE = "decode"


class NodeKind(StrEnum):
    """What a graph node is: an op, or a source whose cost is its residency."""

    OP = "op"
    WEIGHT = "weight"
    KV_CACHE = "kv_cache"
    INPUT = "input"

    @classmethod
    def sources(cls) -> frozenset[NodeKind]:
        return frozenset({cls.WEIGHT, cls.KV_CACHE, cls.INPUT})


class LinkName(StrEnum):
    """Interconnect links: within a scale-up domain (NVLink) and across it (network)."""

    SCALE_UP = "scale_up"
    SCALE_OUT = "scale_out"


class Role(StrEnum):
    """What an op node is for in the model, set by the block that builds it.

    Analyses select nodes by role, never by the op's rule name: a new attention
    rule built with ``Role.ATTENTION`` is priced, shared out and fused as
    attention with no edit outside its module (STYLE convention 13).
    """

    ATTENTION = "attention"  #: scores, softmax and values over the context (any rule, any variant)
    LINEAR = "linear"  #: a dense projection (q/k/v/o, MLP up/gate/down, latent up-projections)
    EXPERT = "expert"  #: a routed expert's grouped matmul
    ROUTER = "router"  #: router logits' normalisation and top-k selection
    COMBINE = "combine"  #: the weighted sum of a token's expert outputs
    NORM = "norm"  #: RMSNorm / LayerNorm
    ACTIVATION = "activation"  #: an MLP activation or an elementwise gate
    RESIDUAL = "residual"  #: a residual (or branch) add
    ROPE = "rope"  #: rotary position embedding
    EMBEDDING = "embedding"  #: the token-embedding gather
    HEAD = "head"  #: the lm_head (or an MTP head) producing logits
    CACHE_WRITE = "cache_write"  #: copy of the new tokens' K/V (or latent) into the cache
    COLLECTIVE = "collective"  #: an all-reduce / all-gather across devices
    SCAN = "scan"  #: a recurrent state update (selective scan, delta rule)
    CONV = "conv"  #: a causal depthwise convolution
    VIEW = "view"  #: a view, slice or concat (data movement only)
    OTHER = "other"  #: an imported op the importer could not place


# node attributes
OP = "op"  #: rule name of an op node
COST = "cost"  #: Cost of one instance
PARAMS = "params"  #: rule parameters
KIND = "kind"  #: a NodeKind
PHASE = "phase"  #: a Phase
GROUP = "group"  #: layer group name ("embed", "layers", "dense", "moe", "head")
LAYER = "layer"  #: index of the layer copy a node belongs to, after expand()
REPEAT = "repeat"  #: identical copies this node stands for
INPUTS = "inputs"  #: tuple of Tensors an op consumes
OUTPUTS = "outputs"  #: tuple of Tensors a node produces
UNKNOWN = "unknown"  #: True on an imported op the importer table has no mapper for
ROLE = "role"  #: a :class:`Role`: what an op node is for (set by the block that builds it)
FRONTEND_OP = "frontend_op"  #: the importer's own op name (``aten.mm.default``, ``MatMul``)
MEASURED_S = "measured_s"  #: a profiler's measured time of the node (attach_profile)
KV_CAP = "kv_cap"  #: on a cache write: positions per sequence its layer keeps at most (window, chunk)
#: on a linear op built by a block: the one GEMM the served engines run it in with its siblings
#: (``qkv_proj``, ``gate_up_proj``, ``fused_qkv_a_proj``), or ``""`` when they run it alone
MERGED = "merged"
#: on a routed-expert node costed as the busiest EP rank's: ``(ep, routing kind, Zipf exponent)``
EXPERT_PLAN = "expert_plan"
#: on a linear or routed-expert node of FP8 block-quantised weights: the ``(rows, columns)`` each scale
#: covers (:attr:`models.config.ModelConfig.weight_scale_block`, DeepSeek-V3's ``(128, 128)``)
SCALE_BLOCK = "scale_block"
# edge attributes
TENSOR = "tensor"  #: the logical tensor on the edge
BYTES = "bytes"  #: bytes moved over the edge per instance of the consumer
# graph attributes
G_PHASE = "phase"  #: the graph's Phase
G_GROUPS = "groups"  #: layer groups of a model graph: name -> {GROUP_ENTRY, GROUP_EXIT, REPEAT}
GROUP_ENTRY = "entry"  #: edges (src, dst, attrs) entering a layer group
GROUP_EXIT = "exit"  #: the node whose output leaves a layer group
G_EXIT = "exit"  #: a layer graph's output node
G_TOKENS = "tokens"  #: tokens the step processes (prefill B*S, decode B)
G_BATCH = "batch"  #: sequences the step processes (B)
G_UNKNOWN_OPS = "unknown_ops"  #: importer ops with no mapper: name -> count
G_SYMBOLS = "symbols"  #: importer renames of frontend symbols to ours


def memory_kind(description: str) -> str:
    """A device's memory kind from its catalog description: ``GDDR`` (workstation and PCIe
    cards), ``SRAM`` (weights on chip), ``HBM``, else ``other``.

    Parameters
    ----------
    description : str
        The device's catalog description (:attr:`costmodel.hardware.Hardware.description`).

    Returns
    -------
    str
        ``GDDR``, ``SRAM``, ``HBM`` or ``other``.

    >>> memory_kind("NVIDIA L40S 48GB (Ada Lovelace AD102, GDDR6, PCIe)"), memory_kind("AMD MI300X (HBM3)")
    ('GDDR', 'HBM')
    """
    if "GDDR" in description:
        return "GDDR"
    if "SRAM" in description or "no HBM" in description:
        return "SRAM"
    return "HBM" if "HBM" in description else "other"
