"""Which attention kernel an engine runs where the corpus's rows time another (sourced rules).

The corpus (:mod:`costmodel.measured`) times each framework's attention with the kernels its
collector ran, and not at every shape: vLLM's rows with a BF16 KV cache are FlashAttention's
(FA3 on H100 and H200, FA2 on L40S and the RTX PRO 6000; on A100 at head dim 128 only, none at
gpt-oss's 64) or FlashInfer's (B200, GB200, GB300), while its Triton rows (``vllm_triton_attn``:
L40S, RTX PRO 6000, B200, GB200, GB300) are of head dim 192 with an FP8 KV cache only. An engine does not always run the kernel whose rows price it: vLLM picks its
attention backend from the GPU and the model (``CudaPlatform.get_attn_backend_cls`` in
``vllm/platforms/cuda.py``), and for attention with learned sinks (gpt-oss) on a GPU that is
neither SM 9.0 nor SM 10.0 it runs its Triton kernel (``TRITON_ATTN``), which the corpus does
not time at such a shape. An :class:`AttentionKernelRule` says so for devices of named
architectures or named catalog devices; the predictor then still prices the attention from the
framework's measured rows, but counts it as a neighbour whose basis names the kernel that runs
(:func:`graphs.serving.pricing.predict.attention_kernel_note`), never as measured. Its prefill
(context) attention is scaled by the ratio of the two kernels' times where the corpus times
both at one shape (:mod:`costmodel.measured.backend_ratio`: Triton over FlashAttention 2 at head
dim 192 on the L40S and the RTX PRO 6000, about 2.0-2.7x from 1,024 tokens up; ASSUMED to carry
to gpt-oss's head dim and the priced device, said in the basis); its decode attention keeps the
rows' price (the Triton rows' FP8 cache says nothing of a BF16 one where the kernel streams it).

The rule here:

* :data:`VLLM_SINKS_TRITON`: vLLM 0.11.0's ``get_attn_backend_cls`` (read in the 0.11.0 wheel
  from PyPI): Blackwell SM 10.0 takes FlashInfer when it is installed (a dependency of the
  wheel); otherwise on SM 8.0 and later, ``if (has_sink or use_fp8_kv_cache) and not
  cls.is_device_capability(90)``: "Using Triton backend on V1 engine" (``TRITON_ATTN``;
  ``is_device_capability`` tests the capability exactly). So attention with sinks runs Triton on
  Ampere (SM 8.0, 8.6), Ada Lovelace (SM 8.9), B300 and GB300 (SM 10.3) and the SM 12.x
  Blackwell cards (RTX 5090, RTX PRO 6000), FlashAttention 3 with sinks on Hopper. The vLLM
  recipe for gpt-oss says the same ("GPT-OSS works on Ampere devices by default, using the
  ``TRITON_ATTN`` attention backend"). The argument came with gpt-oss's support in 0.10.1; the
  0.10 profile carries the rule as ASSUMED for 0.10.1-0.10.2. The FP8 KV-cache half of the
  condition is not a rule here: the corpus's FP8-KV rows may be Triton's own. ``vllm@0.12``
  carries it as ASSUMED (:data:`VLLM_SINKS_TRITON_012`: 0.12.0's choice not read); the later
  profiles (``vllm@0.20``, ``vllm@1``) carry none: their backend choice is not read here, so
  gpt-oss's attention off Hopper is counted as measured under them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from costmodel.errors import CostModelError

from .device_scope import check_scope, in_scope, scope_words

__all__ = [
    "AttentionKernelRule",
    "VLLM_SINKS_TRITON",
    "VLLM_SINKS_TRITON_010",
    "VLLM_SINKS_TRITON_012",
    "attention_kernel_for",
]

#: an attention backend's name as the engine spells it (``TRITON_ATTN``)
BACKEND_WORD = re.compile(r"[A-Za-z0-9_]{1,40}")


@dataclass(frozen=True, slots=True)
class AttentionKernelRule:
    """An engine runs the attention ``backend`` for attention with learned sinks on devices whose
    architecture is one of ``architectures`` (the catalog's
    :attr:`~costmodel.hardware.Hardware.architecture`) or whose catalog name is one of
    ``devices``; ``source`` says where the engine does so (module doc)."""

    backend: str
    architectures: tuple[str, ...]
    source: str
    devices: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.backend, str) or not BACKEND_WORD.fullmatch(self.backend):
            raise CostModelError(
                f"attention kernel rule: backend {self.backend!r} must be a word (letters, digits, '_')"
            )
        check_scope(f"attention kernel rule {self.backend}", self.architectures, self.devices)
        if not isinstance(self.source, str) or not self.source.strip():
            raise CostModelError(f"attention kernel rule {self.backend}: no source")

    def applies(self, sinks: bool, architecture: str, device: str = "") -> bool:
        """Whether the rule picks the backend for attention with (``sinks``) or without learned
        sinks on ``device`` of ``architecture``.

        Parameters
        ----------
        sinks : bool
            The attention has learned sinks (gpt-oss).
        architecture : str
            The device's architecture (``Ampere``; ``""``: not given).
        device : str
            The device's catalog name (``rtx-pro-6000``; ``""``: not given).

        Returns
        -------
        bool

        >>> VLLM_SINKS_TRITON.applies(True, "Ampere"), VLLM_SINKS_TRITON.applies(True, "Hopper")
        (True, False)
        >>> VLLM_SINKS_TRITON.applies(False, "Ampere")
        False
        """
        return sinks and in_scope(self.architectures, self.devices, architecture, device)

    def to_dict(self) -> dict[str, Any]:
        """The rule as plain values (for ``--json``).

        Returns
        -------
        dict
        """
        return {
            "backend": self.backend,
            "architectures": list(self.architectures),
            "devices": list(self.devices),
            "source": self.source,
        }

    @property
    def where(self) -> str:
        """Where it applies, in words (``Ampere/Ada Lovelace/b300/...``)."""
        return scope_words(self.architectures, self.devices)

    def note(self, framework: str, device: str) -> str:
        """The basis a node it applies to is priced on: the kernel that runs, and which rows price it.

        Parameters
        ----------
        framework : str
            The corpus framework whose attention rows price it.
        device : str
            The device's catalog name.

        Returns
        -------
        str

        >>> VLLM_SINKS_TRITON.note("vllm", "a100-sxm-80gb")[:80]
        'attention: the engine runs TRITON_ATTN for attention with sinks on a100-sxm-80gb'
        """
        return (
            f"attention: the engine runs {self.backend} for attention with sinks on {device}, which the "
            f"corpus does not time at this shape; priced from {framework}'s measured attention rows"
        )


def attention_kernel_for(
    rules: tuple[AttentionKernelRule, ...], sinks: bool, architecture: str, device: str = ""
) -> AttentionKernelRule | None:
    """The first of ``rules`` that picks another attention kernel on ``device`` of
    ``architecture``, or None (the corpus's rows time the kernel that runs).

    Parameters
    ----------
    rules : tuple of AttentionKernelRule
        An engine profile's rules.
    sinks : bool
        The attention has learned sinks.
    architecture : str
        The device's architecture (``""``: not given).
    device : str
        The device's catalog name (``""``: not given).

    Returns
    -------
    AttentionKernelRule or None
    """
    return next((r for r in rules if r.applies(sinks, architecture, device)), None)


_CUDA = "vllm/platforms/cuda.py CudaPlatform.get_attn_backend_cls"

VLLM_SINKS_TRITON = AttentionKernelRule(
    backend="TRITON_ATTN",
    architectures=("Ampere", "Ada Lovelace"),
    devices=("b300", "gb300", "rtx-5090", "rtx-pro-6000"),
    source=(
        f"{_CUDA} (vLLM 0.11.0 wheel): SM 10.0 exactly takes FlashInfer; on SM 8.0+ '(has_sink or use_fp8_kv_cache) "
        "and not cls.is_device_capability(90)' returns TRITON_ATTN ('Using Triton backend on V1 engine'); "
        "the vLLM gpt-oss recipe: 'GPT-OSS works on Ampere devices by default, using the TRITON_ATTN "
        "attention backend'"
    ),
)

VLLM_SINKS_TRITON_010 = AttentionKernelRule(
    backend="TRITON_ATTN",
    architectures=VLLM_SINKS_TRITON.architectures,
    devices=VLLM_SINKS_TRITON.devices,
    source=(
        "ASSUMED for vLLM 0.10.1-0.10.2 as read in 0.11.0 (the has_sink argument came with gpt-oss's "
        f"support in 0.10.1): {VLLM_SINKS_TRITON.source}"
    ),
)

VLLM_SINKS_TRITON_012 = AttentionKernelRule(
    backend="TRITON_ATTN",
    architectures=VLLM_SINKS_TRITON.architectures,
    devices=VLLM_SINKS_TRITON.devices,
    source=f"ASSUMED for vLLM 0.12 as read in 0.11.0 (0.12.0's backend choice not read): {VLLM_SINKS_TRITON.source}",
)
