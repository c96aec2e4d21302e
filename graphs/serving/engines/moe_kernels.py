"""Which fused-MoE kernel an engine runs, where it is not the corpus's fastest (sourced rules).

The corpus (:mod:`costmodel.measured.moe`) times every fused-MoE kernel a framework's release
offers and the pricing takes the fastest measured, as a dispatcher would. An engine does not
always have that choice: vLLM picks its MXFP4 MoE backend from the GPU's compute capability and
from what is installed (``get_mxfp4_backend`` in ``vllm/model_executor/layers/quantization/mxfp4.py``),
and falls back to Marlin, a weight-only kernel that dequantises to BF16, where OpenAI's Triton
kernels are not available. A :class:`MoEKernelRule` says so for one corpus dtype on devices of
named architectures (or named catalog devices, where an architecture's name spans compute
capabilities: the catalog's "Blackwell" is SM 10.x and SM 12.x), with the kernel's word in the
corpus's ``kernel_source`` and the padding its weights take, each rule with its source. An engine
profile lists its rules (:attr:`~graphs.serving.engines.EngineProfile.moe_kernels`); the
predictor prices the MoE with that kernel's rows (:class:`costmodel.measured.moe.MoEShape`
``kernel``), and the KV pool gives up the padded weights' extra bytes (:func:`padded_expert_bytes`).

The rules here (vLLM's MXFP4 experts, gpt-oss):

* :data:`VLLM_MXFP4_MARLIN_PRE_HOPPER`: on a GPU of compute capability below 9 (Ampere, Ada
  Lovelace) every vLLM release with MXFP4 runs Marlin (``get_mxfp4_backend``: ``Marlin`` when
  ``current_platform.get_device_capability()[0] < 9``);
* :data:`VLLM_MXFP4_MARLIN_SM120`: on SM 12.x Blackwell cards (RTX 5090, RTX PRO 6000) vLLM runs
  Marlin too: its Triton and FlashInfer MXFP4 paths are SM 9.0 / 10.x only (vllm PR 37751,
  2026-03-21: "SM120 GPUs (RTX PRO 6000 Blackwell, RTX 5090) fall back to the slow Marlin
  backend for MXFP4 MoE models"; Triton fails there with a PTX codegen error), and the corpus's
  own vLLM 0.24.0 MXFP4 rows on the RTX PRO 6000 are Marlin's alone;
* :data:`VLLM_MXFP4_MARLIN_HOPPER`: on Hopper, vLLM 0.10.1-0.11.x ran Marlin as installed from
  PyPI, whose wheel did not bring OpenAI's ``triton_kernels`` (``get_mxfp4_backend``:
  ``Marlin`` when ``not has_triton_kernels()``; vllm PR 27370: "users have to install
  `triton_kernels` manually"; PR 27523: adding the dependency "caused SM90 to default to Triton
  instead of Marlin"; PR 28788 vendored it, merged 2025-11-18, after v0.11.0; vllm issue 23278's
  H100 log under 0.10.1: "Weight-only FP4 compression will be used leveraging the Marlin kernel").
  ASSUMED for a deployment of those releases without ``triton_kernels`` installed by hand
  (vLLM's own ``0.10.1+gptoss`` launch build ran Triton); ``--engine vllm@0.12`` prices the
  Triton kernel. vLLM 0.10.0 ran no MXFP4 at all. GPUStack's held-out gpt-oss runs on H100
  (vLLM 0.10.2 and 0.11.0), which took about twice as long as the Triton kernel prices them,
  are what sent this project to read that code: the rule states vLLM's sources, nothing in it is
  fitted, and those runs' pages do not say which kernel ran.

Marlin's padding (``Mxfp4MoEMethod.create_weights``: "The moe marlin kernel requires that for
each linear n % 256 == 0 and k % 128 == 0"): the hidden size rounded up to 256, each rank's
expert width to 128, so gpt-oss's 2,880 runs as 3,072 x 2,944 at TP 1.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from costmodel.errors import CostModelError

from .device_scope import check_scope, in_scope, scope_words

__all__ = [
    "KERNEL_WORD",
    "MoEKernelRule",
    "VLLM_MXFP4_MARLIN_HOPPER",
    "VLLM_MXFP4_MARLIN_PRE_HOPPER",
    "VLLM_MXFP4_MARLIN_SM120",
    "moe_kernel_for",
    "padded_expert_bytes",
]

#: a kernel's or dtype's name: a word of the corpus's ``kernel_source`` / ``moe_dtype`` (``marlin``;
#: :class:`costmodel.measured.moe.MoEShape` checks its own the same way, the core importing no wing)
KERNEL_WORD = re.compile(r"[a-z0-9_]{1,40}")


@dataclass(frozen=True, slots=True)
class MoEKernelRule:
    """An engine runs the fused-MoE ``kernel`` (a word of the corpus's ``kernel_source``) for
    experts of the corpus ``dtype`` (``w4a16_mxfp4`` ...) on devices whose architecture is one of
    ``architectures`` (the catalog's :attr:`~costmodel.hardware.Hardware.architecture`) or whose
    catalog name is one of ``devices``, its weights padded to ``pad`` = (hidden multiple,
    expert-width multiple); ``source`` says where the engine does so (module doc)."""

    dtype: str
    architectures: tuple[str, ...]
    kernel: str
    pad: tuple[int, int]
    source: str
    devices: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not KERNEL_WORD.fullmatch(self.dtype) or not KERNEL_WORD.fullmatch(self.kernel):
            raise CostModelError(
                f"MoE kernel rule: dtype {self.dtype!r} and kernel {self.kernel!r} must be corpus words "
                "(lower-case letters, digits, '_')"
            )
        check_scope(f"MoE kernel rule {self.kernel}", self.architectures, self.devices)
        if (
            not isinstance(self.pad, tuple)
            or len(self.pad) != 2
            or not all(isinstance(m, int) and not isinstance(m, bool) and 1 <= m <= 4096 for m in self.pad)
        ):
            raise CostModelError(
                f"MoE kernel rule {self.kernel}: pad must be a tuple of two multiples in [1, 4096], got {self.pad!r}"
            )
        if not isinstance(self.source, str) or not self.source.strip():
            raise CostModelError(f"MoE kernel rule {self.kernel} for {self.dtype}: no source")

    def applies(self, dtype: str, architecture: str, device: str = "") -> bool:
        """Whether the rule picks the kernel for experts of corpus ``dtype`` on ``device`` of
        ``architecture``.

        Parameters
        ----------
        dtype : str
            The experts' corpus dtype (``w4a16_mxfp4`` ...).
        architecture : str
            The device's architecture (``Hopper``; ``""``: not given).
        device : str
            The device's catalog name (``rtx-5090``; ``""``: not given).

        Returns
        -------
        bool
        """
        return dtype == self.dtype and in_scope(self.architectures, self.devices, architecture, device)

    def to_dict(self) -> dict[str, Any]:
        """The rule as plain values (for ``--json``).

        Returns
        -------
        dict
        """
        return {
            "dtype": self.dtype,
            "architectures": list(self.architectures),
            "devices": list(self.devices),
            "kernel": self.kernel,
            "pad": list(self.pad),
            "source": self.source,
        }

    @property
    def where(self) -> str:
        """Where it applies, in words (``Ampere/Ada Lovelace``, ``rtx-5090/rtx-pro-6000``)."""
        return scope_words(self.architectures, self.devices)


def moe_kernel_for(
    rules: tuple[MoEKernelRule, ...], dtype: str, architecture: str, device: str = ""
) -> MoEKernelRule | None:
    """The first of ``rules`` that picks a kernel for corpus ``dtype`` on ``device`` of
    ``architecture``, or None (the corpus's fastest prices it).

    Parameters
    ----------
    rules : tuple of MoEKernelRule
        An engine profile's rules.
    dtype : str
        The experts' corpus dtype (``w4a16_mxfp4`` ...).
    architecture : str
        The device's architecture (``Hopper``; ``""``: not given).
    device : str
        The device's catalog name (``""``: not given).

    Returns
    -------
    MoEKernelRule or None
    """
    return next((r for r in rules if r.applies(dtype, architecture, device)), None)


def padded_expert_bytes(
    rule: MoEKernelRule,
    *,
    hidden: int,
    inter_rank: int,
    experts_rank: int,
    moe_layers: int,
    weight_bits: float,
    gated: bool = True,
    bias_bytes: float = 0.0,
) -> float:
    """Bytes one device holds beyond the checkpoint's for its experts padded as ``rule`` pads
    them: per MoE layer and expert, the gate/up ``[u I', H']`` and down ``[H', I']`` matrices at
    the padded ``H' = ceil(H / p_H) p_H``, ``I' = ceil(I / p_I) p_I`` (``I`` the rank's expert
    width, ``u`` 2 gated or 1), less the unpadded ones, at ``weight_bits`` per element (the
    dtype's, its block scales included), plus the biases' growth at ``bias_bytes`` each:

    .. math:: \\Delta W = L_{moe}\\,E_r\\Big[\\frac{b}{8}(u+1)(I'H' - IH) + \\beta\\big(u(I'-I) + (H'-H)\\big)\\Big]

    Parameters
    ----------
    rule : MoEKernelRule
        The kernel's rule (its ``pad``).
    hidden, inter_rank : int
        The model's hidden size ``H`` and one rank's expert width ``I``.
    experts_rank : int
        Experts on the device ``E_r``.
    moe_layers : int
        Layers with routed experts ``L_moe``.
    weight_bits : float
        Bits per weight element ``b`` (MXFP4: 4 + 8 / 32 = 4.25).
    gated : bool
        Gate and up projections (``u`` = 2).
    bias_bytes : float
        Bytes per bias element ``beta`` (0: no expert biases).

    Returns
    -------
    float
        Bytes (>= 0).

    >>> from graphs.serving.engines.moe_kernels import VLLM_MXFP4_MARLIN_HOPPER as R
    >>> round(padded_expert_bytes(R, hidden=2880, inter_rank=2880, experts_rank=128, moe_layers=36,
    ...                           weight_bits=4.25, bias_bytes=2) / 1e9, 2)
    5.51
    """
    ph, pi = rule.pad
    h2, i2 = math.ceil(hidden / ph) * ph, math.ceil(inter_rank / pi) * pi
    u = 2 if gated else 1
    grow = weight_bits / 8 * (u + 1) * (i2 * h2 - inter_rank * hidden)
    grow += bias_bytes * (u * (i2 - inter_rank) + (h2 - hidden))
    return float(moe_layers * experts_rank * grow)


_MXFP4 = "vllm/model_executor/layers/quantization/mxfp4.py"
_PAD = (
    f"{_MXFP4} Mxfp4MoEMethod.create_weights: 'The moe marlin kernel requires that for each linear "
    "n % 256 == 0 and k % 128 == 0' (hidden rounded up to 256, the rank's expert width to 128)"
)

VLLM_MXFP4_MARLIN_PRE_HOPPER = MoEKernelRule(
    dtype="w4a16_mxfp4",
    architectures=("Ampere", "Ada Lovelace"),
    kernel="marlin",
    pad=(256, 128),
    source=f"{_MXFP4} get_mxfp4_backend: Marlin when get_device_capability()[0] < 9; {_PAD}",
)

VLLM_MXFP4_MARLIN_SM120 = MoEKernelRule(
    dtype="w4a16_mxfp4",
    architectures=(),
    devices=("rtx-5090", "rtx-pro-6000"),
    kernel="marlin",
    pad=(256, 128),
    source=(
        f"{_MXFP4} get_mxfp4_backend: Triton and FlashInfer MXFP4 on SM 9.0 / 10.x only, Marlin on SM 12.x "
        "(vllm PR 37751: 'SM120 GPUs (RTX PRO 6000 Blackwell, RTX 5090) fall back to the slow Marlin backend'; "
        f"the corpus's vLLM 0.24.0 MXFP4 rows on the RTX PRO 6000 are Marlin's alone); {_PAD}"
    ),
)

VLLM_MXFP4_MARLIN_HOPPER = MoEKernelRule(
    dtype="w4a16_mxfp4",
    architectures=("Hopper",),
    kernel="marlin",
    pad=(256, 128),
    source=(
        f"{_MXFP4} get_mxfp4_backend: Marlin when not has_triton_kernels(); ASSUMED for a PyPI install of "
        "vLLM 0.10.1-0.11.x, whose wheel did not bring triton_kernels (vllm PR 27370 'users have to install "
        "triton_kernels manually'; PR 27523: the dependency 'caused SM90 to default to Triton instead of Marlin'; "
        "PR 28788 vendored it, merged 2025-11-18, after v0.11.0; vllm issue 23278's H100 log under 0.10.1: "
        "'Weight-only FP4 compression will be used leveraging the Marlin kernel'; vLLM's 0.10.1+gptoss build "
        f"ran Triton: --engine vllm@0.12 prices that); {_PAD}"
    ),
)
