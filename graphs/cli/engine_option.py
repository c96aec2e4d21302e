"""``--engine NAME[@VERSION]`` and the scheduler flags that override its profile
(:mod:`graphs.serving.engines`): one option for every command that builds an engine.

Without ``--engine`` the profile is ``--predict``'s framework's (its kernels and its scheduler go
together), else vLLM's (the bound). An explicit flag (``--max-num-seqs``, ``--block-size`` ...)
replaces that one default; the output names the profile, the defaults it assumed and the flags
given, once. ``--engine list`` lists the registered profiles.
"""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["add_engine_options", "profile_of", "engine_list", "LIST"]

LIST = "list"  #: ``--engine list``: print the profiles and exit

#: flag destination -> the profile setting it overrides (:data:`graphs.serving.engines.OVERRIDES`)
_FLAGS = {
    "max_num_batched_tokens": "max_num_batched_tokens",
    "max_num_seqs": "max_num_seqs",
    "block_size": "block_size",
    "chunked_prefill": "enable_chunked_prefill",
    "batch_wait_iters": "batch_wait_timeout_iters",
    "batch_wait_ratio": "batch_wait_max_tokens_ratio",
    "gpu_memory_utilization": "kv_fraction",
    "reserve_full_prompt": "reserve_full_prompt",
    "kv_watermark": "kv_watermark",
    "enable_prefix_caching": "enable_prefix_caching",  # simulate's --enable-prefix-caching
    "sampler": "sampler",
}


def add_engine_options(sp: argparse.ArgumentParser) -> None:
    """``--engine`` and the scheduler flags (each default None: the profile's)."""
    sp.add_argument(
        "--engine",
        default=None,
        metavar="NAME[@VERSION]",
        help="the serving engine's profile: its scheduler, KV pool, CUDA-graph padding and CPU terms "
        "(`--engine list` lists them; default: --predict's framework's, vllm for the bound)",
    )
    sp.add_argument(
        "--max-num-batched-tokens",
        type=int,
        default=None,
        help="token budget per iteration (default: the engine's)",
    )
    sp.add_argument(
        "--max-num-seqs", type=int, default=None, help="sequences per iteration (default: the engine's)"
    )
    sp.add_argument(
        "--block-size", type=int, default=None, help="KV-cache block, tokens (default: the engine's)"
    )
    sp.add_argument(
        "--gpu-memory-utilization",
        type=float,
        default=None,
        help="the engine's KV-pool fraction: of the whole device (vLLM's gpu_memory_utilization) or of the "
        "memory left after weights and activations (TensorRT-LLM's kv_cache_free_gpu_mem_fraction), "
        "as its profile's rule says (default: the engine's)",
    )
    sp.add_argument(
        "--chunked-prefill",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="split prompts over iterations, or (--no-chunked-prefill) run each in one (default: the engine's)",
    )
    sp.add_argument(
        "--scheduler-policy",
        choices=("recompute", "guaranteed_no_evict"),
        default=None,
        help="vLLM's recompute preemption, or TensorRT-LLM's admission that reserves prompt + output "
        "(default: the engine's)",
    )
    sp.add_argument(
        "--batch-wait-iters",
        type=int,
        default=None,
        help="TensorRT-LLM's batch_wait_timeout_iters: new prompts wait up to N iterations to be "
        "prefilled together (with --batch-wait-ratio; default: the engine's, 0: off)",
    )
    sp.add_argument(
        "--batch-wait-ratio",
        type=float,
        default=None,
        help="TensorRT-LLM's batch_wait_max_tokens_ratio: ...or until the iteration's tokens reach "
        "this fraction of --max-num-batched-tokens (default: the engine's, 0: off)",
    )
    sp.add_argument(
        "--reserve-full-prompt",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="vLLM's scheduler_reserve_full_isl: admit a waiting request only when blocks for all its "
        "tokens are free, or (--no-reserve-full-prompt) when its first chunk's are (default: the engine's)",
    )
    sp.add_argument(
        "--sampler",
        choices=("torch", "flashinfer"),
        default=None,
        help="the sampler whose start-up profile run sizes vLLM's KV pool beside the forward pass: torch "
        "(38 B a logit: 0.11 without FlashInfer installed, as a PyPI wheel; 0.12 by default) or flashinfer "
        "(14 B: 0.11 with FlashInfer installed, as vLLM's Docker image; 0.12 with VLLM_USE_FLASHINFER_SAMPLER) "
        "(default: the engine's; vllm@0.11 and vllm@0.12 count it)",
    )
    sp.add_argument(
        "--kv-watermark",
        type=float,
        default=None,
        help="vLLM's watermark: fraction of the KV blocks kept free when admitting while others run "
        "(default: the engine's, 0: off)",
    )


def profile_of(args: argparse.Namespace) -> Any:
    """The :class:`~graphs.serving.engines.EngineProfile` the flags give: ``--engine``'s, else
    ``--predict``'s framework's, else vLLM's; with every explicit scheduler flag as an override
    (checked by the profile: a bad value is a one-line error naming it)."""
    from graphs.serving.engines import get_engine

    name = getattr(args, "engine", None) or getattr(args, "predict", None) or "vllm"
    prof = get_engine(name)
    given = {
        key: getattr(args, dest) for dest, key in _FLAGS.items() if getattr(args, dest, None) is not None
    }
    if getattr(args, "scheduler_policy", None):
        given["policy"] = args.scheduler_policy
    return prof.with_overrides(**given) if given else prof


def engine_list(as_json: bool = False, device: Any = None) -> str:
    """Every registered profile: its name, what it is, the corpus framework pricing it and its
    defaults (``--json``: each profile's sources too); with ``device``, the defaults each picks
    on that device (:meth:`~graphs.serving.engines.EngineProfile.for_device`), as ``engines NAME
    --device D`` and ``simulate`` show them."""
    from graphs.serving.engines import engines, get_engine

    profs = engines()
    shown = [p if device is None else p.for_device(device) for p in profs]
    if as_json:
        from .common import dump

        return dump([{**q.to_dict(), "device": None if device is None else device.name} for q in shown])
    on = "" if device is None else f", as each picks them on {device.name}"
    lines = [f"engine profiles (NAME[@VERSION]; a bare NAME takes its default version){on}:"]
    for p, q in zip(profs, shown, strict=True):
        default = " (default)" if get_engine(p.name) is p else ""
        lines.append(f"  {p.ref}{default}: {p.label}; kernels from the {p.framework} corpus")
        lines.append(f"    {', '.join(f'{k} {v}' for k, v in q.defaults().items())}")
    return "\n".join(lines)
