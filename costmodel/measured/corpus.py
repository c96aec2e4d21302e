"""The measured-kernel corpus: aiconfigurator-core's published GPU latencies.

The ``aiconfigurator-core`` wheel (NVIDIA, Apache-2.0; optional extra
``[measured]``) ships parquet tables of kernel latencies measured on real GPUs
under ``aiconfigurator_core/systems/data/<system>/<family>/<framework>/<version>/``.
They are read where pip installed them (``importlib.resources``), never copied
into this repository, and every result names the package version it came from.

Which framework version is used: the wheel's own ``query_versions.yaml`` names
the *current* version per (system, framework); when a family has no table at
that version, the newest version directory that has one is taken. Latencies
in the tables are milliseconds; :func:`load` returns seconds.

Families (the ``family`` argument) and the columns :func:`load` returns, besides
``device`` (our catalog name), ``system`` (the wheel's name), ``framework``,
``version``, ``kernel_source`` and ``latency_s``:

=====================  =====================================================
``gemm``               ``m n k dtype`` (``bfloat16``, ``fp8``, ``fp8_block``, ...)
``context_attention``  ``batch isl heads kv_heads head_dim window attn_dtype kv_dtype`` (``window``
                       0: no window, also where a table has no ``window_size`` column)
``generation_attention`` the same, ``step`` the cached tokens (``kv_len = step + isl``)
``all_reduce``         ``gpus elements dtype backend`` (framework custom kernels and NCCL)
``moe``                ``tokens hidden inter topk experts tp ep dtype``: the fused routed-expert
                       MLP (gate/up, activation, down) of one rank, *balanced* routing only
``context_mla``        ``batch isl heads tp attn_dtype kv_dtype``: DeepSeek-V3's multi-head latent
``generation_mla``     attention kernel (``step`` cached tokens in generation)
=====================  =====================================================
"""

from __future__ import annotations

import functools
import os
import sys
from dataclasses import dataclass
from typing import Any

from ..errors import CostModelError

__all__ = [
    "FAMILIES",
    "FRAMEWORKS",
    "SYSTEMS",
    "MeasuredDataError",
    "CorpusInfo",
    "corpus_info",
    "compute_scale_s",
    "FP8_SCALES",
    "RANK0_CLAMPED",
    "ABSORBED_CONTEXT_MLA",
    "NOT_A_SHARE",
    "SHARE_TESTED",
    "SHARE_TOKENS",
    "FEW_TOKENS",
    "clamp_kept",
    "rank0_clamped",
    "small_kernel_s",
    "small_kernel_measured",
    "load",
    "release_unused",
    "systems_with_data",
    "frameworks_with_data",
    "framework_release",
    "table_files",
]

PACKAGE = "aiconfigurator-core"
MODULE = "aiconfigurator_core"

#: The wheel's system directory -> our hardware catalog name (same part, same
#: memory configuration: A100 SXM 80GB at 2.039 TB/s, B200 in HGX at 7.7 TB/s,
#: GB300's B300 at 8 TB/s, GB200's B200 at 8 TB/s, L40S at 864 GB/s, RTX PRO
#: 6000 Blackwell Server at 1.792 TB/s). Left out: ``b300_sxm`` (HGX B300, an
#: 8-GPU NVLink domain our ``b300``'s NVL72 is not) and ``b60`` (no catalog
#: entry); the other systems ship no measurements.
SYSTEMS: dict[str, str] = {
    "a100_sxm": "a100-sxm-80gb",
    "h100_sxm": "h100-sxm",
    "h200_sxm": "h200-sxm",
    "b200_sxm": "b200",
    "gb300": "b300",
    "gb200": "gb200",
    "l40s": "l40s",
    "rtx_pro_6000_server": "rtx-pro-6000",
}

#: frameworks whose kernels the corpus measures (NCCL's collectives sit beside them)
FRAMEWORKS = ("vllm", "sglang", "trtllm")

#: how FP8 activations are scaled: computed each call (``dynamic``: the corpus's FP8 GEMM rows,
#: vLLM's online ``--quantization fp8``, ``activation_scheme: dynamic``) or calibrated once
#: (``static``: ModelOpt/TensorRT-LLM FP8 checkpoints, ``activation_scheme: static``),
#: :func:`compute_scale_s`; stdlib only, as the command line reads it for ``--fp8-scales``
FP8_SCALES = ("dynamic", "static")

#: (framework, version) of the harnesses whose ``moe`` rows at ``ep`` > 1 time rank 0's kept
#: tokens with all ``k`` picks each, the remote ones clamped to expert 0, not one rank's share of
#: the routed work (ai-dynamo/aiconfigurator ``collector/sglang/collect_moe.py`` at 006afd78:
#: ``build_rank0_workloads`` and ``topk_ids.clamp(min=0)``; :mod:`.moe`'s module doc)
RANK0_CLAMPED = frozenset({("sglang", "0.5.10")})

#: (framework, kernel_source) whose ``context_mla`` rows time DeepSeek's absorbed form, MQA over
#: the shared latent (query/key dim 512 + 64 = 576, value dim 512), where the engine runs a fresh
#: prefill in the decompressed MHA form the family stands for (192 / 128, one K/V head per query
#: head: :mod:`graphs.serving.pricing.predict`'s MLA rows): ai-dynamo/aiconfigurator's
#: ``collector/sglang/collect_mla.py`` (``__compat__ = "sglang==0.5.14"``) builds
#: ``RadixAttention(head_dim=576, num_kv_heads=1, v_head_dim=512)`` for every backend but
#: ``trtllm_mla`` (Blackwell: 192 / 128), and its FA3 (Hopper) and Triton (Ada, SM 12.x) calls take
#: the absorbed branch of ``forward_extend``; SGLang's own dispatch sends an extend with no cached
#: prefix to MHA on both backends (``models/deepseek_common/attention_backend_handler.py``,
#: 0.5.10: ``_handle_attention_backend``, ``handle_attention_triton``). The rows agree: on H100
#: and H200 they take 3.2-3.4x TensorRT-LLM's MHA rows from 8,192 tokens, the FLOP ratio of the
#: two forms (1088 / 320 = 3.4); on B200, where SGLang's collector runs MHA, 0.87-1.05x. They are
#: left out of the family, so SGLang's context MLA on those devices is priced from the device's
#: other (MHA) rows, a neighbour.
ABSORBED_CONTEXT_MLA = frozenset({("sglang", "flash_attention"), ("sglang", "triton")})

#: An expert shape of a :data:`SHARE_TESTED` harness (harness, kernel, dtype, full expert width)
#: whose ``ep`` rows at ``moe_tp = 1`` do not time one rank's balanced share. Under balanced
#: routing a rank at ``ep = 2`` computes half the token-expert rows on half the experts, the same
#: rows per expert, so where the kernel computes (``T >=`` :data:`SHARE_TOKENS`) a share takes
#: about half of ``ep 1``'s time. At ``moe_tp = 1`` (an expert's whole width: the work per row
#: largest, the per-token overheads least) the median ``t_2(T) / t_1(T)`` of the corpus's groups,
#: every framework's, has two modes: 767 of 1,154 at 0.45-0.55 and 150 at 0.55-0.6; 123 at 0.85 or
#: more (94 of them at 0.95-1.05); 13 between 0.75 and 0.85 and the other 101 below 0.45 or at
#: 0.6-0.75. A shape whose ``ep 2`` median is at or above this is read as not a share when its rows
#: also show one of the two sourced paths of SGLang's collector that make such rows (module doc
#: of :mod:`.moe`): every ``ep`` row at least this fraction of what the collector's rank-0 clamp
#: keeps (:func:`clamp_kept`; kept for the raw Triton path in 0.5.14, ai-dynamo/aiconfigurator PR
#: 1342: Mixtral's, Gemma-4's and Nemotron-3-Super's shapes), or ``ep 2`` at ``ep 1``'s time at
#: :data:`FEW_TOKENS` or fewer too, where a share reads half the weights (DeepSeek's grouped top-k
#: over the strided balanced logits puts every pick on experts 0-127, all rank 0's at ``ep 2``).
#: Anything else is read as measured: SGLang 0.5.14's Triton rows of h 2048, I 768, top-8 of 128
#: on H200 take 1.11 of ``ep 1``'s time at ``ep 2`` but 0.67 and 0.46 at ``ep 4`` and ``ep 8``
#: (the clamp would keep every token), like H100's rows of the shape (0.66, 0.74, 0.51). The
#: verdict at ``moe_tp = 1`` is the shape's at every ``moe_tp`` (the same harness path; narrower
#: widths raise even a share's ratio: SGLang's Triton rows of one shape on H100 run 0.66 at ``moe_tp
#: 1`` to 0.83 at 16, per-token work over all ``T`` tokens weighing more).
NOT_A_SHARE = 0.85
#: the harnesses the test reads: SGLang's collector, whose code makes such rows (other frameworks'
#: groups in the second cluster, TensorRT-LLM's min-latency and some cutlass rows, vLLM 0.24's
#: DeepSeek FlashInfer rows, have no source saying why and are read as measured)
SHARE_TESTED = ("sglang",)
#: the token counts where a share's half is read (every kernel compute-bound there)
SHARE_TOKENS = 4096
#: the token counts where a kernel reads its experts' weights (a share: about half at ``ep 2``)
FEW_TOKENS = 64


def clamp_kept(experts: int, topk: int, ep: int) -> float:
    """The share of tokens the collector's clamp keeps on rank 0 at ``ep``, under its balanced
    routing: token ``t``'s ``i``-th pick is ``(t + i s) mod E`` with ``s = ceil(E / k)`` (the
    collector's ``balanced_logits``, :mod:`.moe`'s module doc), rank 0 holds experts ``0 ..
    E/ep - 1``, and a token is kept when any pick is one of them; a kept token runs all ``k`` rows,
    so where the kernel computes its ``ep`` rows take this share of ``ep 1``'s time (a rank's
    share takes ``1/ep``).

    Parameters
    ----------
    experts : int
        Routed experts ``E``.
    topk : int
        Experts per token ``k``.
    ep : int
        Expert-parallel ranks.

    Returns
    -------
    float
        The kept share, in ``(0, 1]``.

    Raises
    ------
    CostModelError
        When a count is not a positive whole number.

    >>> clamp_kept(8, 2, 2), clamp_kept(8, 2, 4), clamp_kept(8, 2, 8)  # Mixtral's shape
    (1.0, 0.5, 0.25)
    >>> clamp_kept(256, 8, 8), clamp_kept(256, 8, 16)  # DeepSeek's: s = 32
    (1.0, 0.5)
    """
    import numpy as np

    for name, v in (("experts", experts), ("topk", topk), ("ep", ep)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise CostModelError(f"clamp_kept: {name} must be a positive whole number, got {v!r}")
    stride = -(-experts // topk)
    picks = (np.arange(experts)[:, None] + stride * np.arange(topk)[None, :]) % experts
    return float((picks < max(1, experts // ep)).any(axis=1).mean())


def rank0_clamped(df: Any) -> Any:
    """Per row of ``df`` (a ``moe`` frame with ``framework``, ``version``, ``ep``, ``tokens``, the
    shape's columns and a latency), why its group's ``ep`` > 1 rows are not one rank's share, as
    the basis of pricing the rank from the group's ``ep = 1`` rows at ``1/ep``, or ``""`` (a numpy
    object array): the :data:`RANK0_CLAMPED` harnesses' rows, and every row of an expert shape of
    a :data:`SHARE_TESTED` harness whose ``ep = 2`` rows at ``moe_tp = 1`` fail the share test of
    :data:`NOT_A_SHARE` (the ratio said in the phrase).

    Parameters
    ----------
    df : pandas.DataFrame
        MoE rows: ``framework``, ``version``, ``kernel_source``, ``dtype``, ``hidden``, the full
        expert width and its split (``inter`` and ``tp``, or the table's ``inter_size`` and
        ``moe_tp_size``), ``topk``, ``experts``, ``ep``, ``tokens``, ``latency_s`` or
        ``latency``; ``distribution`` where present (the test reads the balanced rows; the
        phrase marks every row of the shape).

    Returns
    -------
    numpy.ndarray
        One phrase per row (``""``: read as measured).
    """
    import numpy as np

    pd = _pandas()
    label = np.full(len(df), "", dtype=object)
    for fw, ver in sorted(RANK0_CLAMPED):
        label[((df["framework"] == fw) & (df["version"].astype(str) == ver)).to_numpy()] = (
            f"{fw} {ver}'s ep 1 rows at 1/ep (its ep > 1 rows time rank 0's clamped workload, not a rank's share)"
        )
    # the shape's full width and its split (corpus.load's names, else the table's own)
    full, split = ("inter", "tp") if "inter" in df.columns else ("inter_size", "moe_tp_size")
    keys = ["framework", "version", "kernel_source", "dtype", "hidden", full, "topk", "experts"]
    lat = "latency_s" if "latency_s" in df.columns else "latency"
    tokens = df["tokens"].to_numpy()
    sel = (
        (label == "")
        & df["framework"].isin(SHARE_TESTED).to_numpy()
        & ((tokens >= SHARE_TOKENS) | (tokens <= FEW_TOKENS))
        & (df[split].to_numpy() == 1)
    )
    if "distribution" in df.columns:
        sel &= (df["distribution"] == "balanced").to_numpy()
    rows = df.loc[sel, [*keys, "ep", "tokens", lat]]
    if not len(rows):
        return label
    best = rows.groupby([*keys, "ep", "tokens"], observed=True)[lat].min().reset_index()
    one = best[best["ep"] == 1].drop(columns="ep").rename(columns={lat: "_t1"})
    both = best[best["ep"] > 1].merge(one, on=[*keys, "tokens"])
    if not len(both):
        return label
    both["_r"] = both[lat].to_numpy(dtype=float) / both["_t1"].to_numpy(dtype=float)
    both["_big"] = both["tokens"].to_numpy() >= SHARE_TOKENS
    ratio = both.groupby([*keys, "ep", "_big"], observed=True)["_r"].median()
    verdicts = []
    for key, per in ratio.groupby(level=list(range(len(keys))), observed=True):
        big = {int(e): float(r) for (*_, e, b), r in per.items() if b}
        few = {int(e): float(r) for (*_, e, b), r in per.items() if not b}
        if big.get(2, 0.0) < NOT_A_SHARE:
            continue  # ep 2 halves (or is not measured): a share
        experts, topk = int(key[keys.index("experts")]), int(key[keys.index("topk")])
        clamp = all(r >= NOT_A_SHARE * clamp_kept(experts, topk, e) for e, r in big.items())
        if clamp:
            why = "at every ep at least the tokens the collector's clamp keeps on rank 0"
        elif few.get(2, 0.0) >= NOT_A_SHARE:
            why = f"ep 1's time at {FEW_TOKENS} tokens or fewer too: every pick on rank 0's experts"
        else:
            continue  # neither path's signature: read as measured
        verdicts.append(
            (
                *key,
                f"{key[0]} {key[1]}'s ep 1 rows at 1/ep (its ep 2 rows of the shape take {big[2]:.2f} of ep 1's "
                f"time from {SHARE_TOKENS:,} tokens at tp 1, not a rank's half: {why})",
            )
        )
    if not verdicts:
        return label
    test = pd.DataFrame(verdicts, columns=[*keys, "_why"])
    # the flagged groups' rows: a numeric pre-selection, then the whole key on those alone
    near = np.flatnonzero(
        (label == "")
        & np.isin(df["hidden"].to_numpy(), test["hidden"].to_numpy())
        & np.isin(df["experts"].to_numpy(), test["experts"].to_numpy())
    )
    why = df.iloc[near][keys].merge(test, on=keys, how="left")["_why"].to_numpy(dtype=object)
    got = pd.notna(why)
    label[near[got]] = why[got]
    return label


FAMILIES = (
    "gemm",
    "context_attention",
    "generation_attention",
    "all_reduce",
    "moe",
    "context_mla",
    "generation_mla",
)

_TABLES: dict[str, tuple[str, str]] = {
    "gemm": ("gemm", "gemm_perf.parquet"),
    "context_attention": ("attention", "context_attention_perf.parquet"),
    "generation_attention": ("attention", "generation_attention_perf.parquet"),
    "custom_allreduce": ("comm", "custom_allreduce_perf.parquet"),
    "nccl": ("comm", "nccl_perf.parquet"),
    "moe": ("moe", "moe_perf.parquet"),
    "compute_scale": ("quantize", "computescale_perf.parquet"),
    "scale_matrix": ("quantize", "scale_matrix_perf.parquet"),
    "context_mla": ("mla", "context_mla_perf.parquet"),
    "generation_mla": ("mla", "generation_mla_perf.parquet"),
}

_ATTN_RENAME = {
    "batch_size": "batch",
    "num_heads": "heads",
    "num_key_value_heads": "kv_heads",
    "window_size": "window",
    "kv_cache_dtype": "kv_dtype",
}


_AR_COLS = ["framework", "version", "kernel_source", "backend", "gpus", "elements", "dtype", "latency"]

_MOE_RENAME = {
    "num_tokens": "tokens",
    "hidden_size": "hidden",
    "inter_size": "inter",
    "topk": "topk",
    "num_experts": "experts",
    "moe_tp_size": "tp",
    "moe_ep_size": "ep",
    "moe_dtype": "dtype",
    "latency": "latency",
}


class MeasuredDataError(CostModelError):
    """The measured corpus is missing (extra not installed) or a request names no data."""


@dataclass(frozen=True)
class CorpusInfo:
    """Where the corpus lives and which package version it is."""

    package: str
    version: str
    root: str

    def cite(self) -> str:
        return f"{self.package} {self.version} (Apache-2.0), measured kernel tables"


@functools.cache
def corpus_info() -> CorpusInfo:
    """Locate the installed wheel's data; a clear error when the extra is missing."""
    from importlib import metadata, resources  # here: importlib.metadata costs every command's start

    try:
        version = metadata.version(PACKAGE)
        root = resources.files(MODULE) / "systems"
    except (metadata.PackageNotFoundError, ModuleNotFoundError) as exc:
        raise MeasuredDataError(
            f"the measured corpus needs the {PACKAGE} wheel: pip install 'costmodel[measured]'"
        ) from exc
    return CorpusInfo(PACKAGE, version, str(root))


def _pandas() -> Any:
    try:
        import pandas as pd
    except ModuleNotFoundError as exc:  # pragma: no cover - the extra brings pandas
        raise MeasuredDataError(
            "the measured corpus needs pandas: pip install 'costmodel[measured]'"
        ) from exc
    return pd


def _version_key(v: str) -> Any:
    from packaging.version import InvalidVersion, Version

    try:
        return (1, Version(v))
    except InvalidVersion:
        return (0, v)


@functools.cache
def _current_versions() -> dict[tuple[str, str], str]:
    """(system, framework) -> the wheel's declared *current* version."""
    import yaml

    path = os.path.join(corpus_info().root, "query_versions.yaml")
    with open(path) as f:
        doc = yaml.safe_load(f) or {}
    out: dict[tuple[str, str], str] = {}
    defaults = {fw: (slot or {}).get("current") for fw, slot in (doc.get("defaults") or {}).items()}
    for system in SYSTEMS:
        over = (doc.get("overrides") or {}).get(system) or {}
        for fw, cur in defaults.items():
            v = ((over.get(fw) or {}).get("current")) or cur
            if v:
                out[(system, fw)] = str(v)
    return out


def framework_release(device: str, framework: str) -> str | None:
    """The release of ``framework`` whose kernels the corpus measured on ``device``: the wheel's
    declared current version for that system (``systems/query_versions.yaml``; e.g. vLLM 0.24.0 on
    H100, 0.14.0 on A100 in aiconfigurator-core 0.12.0), or None where the corpus does not measure
    the device or declares no version for it.

    Parameters
    ----------
    device : str
        A catalog device name (``h100-sxm``).
    framework : str
        A corpus framework (``vllm``, ``sglang``, ``trtllm``).

    Returns
    -------
    str or None
        The release, as the wheel writes it.
    """
    systems = [s for s, d in SYSTEMS.items() if d == device]
    if not systems:
        return None
    return _current_versions().get((systems[0], framework))


def _table_paths(system: str, table: str) -> list[tuple[str, str, str]]:
    """(framework, version, path) of one table per framework: current, else newest."""
    sub, fname = _TABLES[table]
    base = os.path.join(corpus_info().root, "data", system, sub)
    if not os.path.isdir(base):
        return []
    out = []
    for fw in sorted(os.listdir(base)):
        fw_dir = os.path.join(base, fw)
        if not os.path.isdir(fw_dir):
            continue
        have = [v for v in os.listdir(fw_dir) if os.path.isfile(os.path.join(fw_dir, v, fname))]
        if not have:
            continue
        cur = _current_versions().get((system, fw))
        v = cur if cur in have else max(have, key=_version_key)
        out.append((fw, v, os.path.join(fw_dir, v, fname)))
    return out


def systems_with_data(family: str) -> list[str]:
    """Catalog names of the devices that have ``family`` tables."""
    return [
        dev for sysname, dev in SYSTEMS.items() if any(_table_paths(sysname, t) for t in _family_tables(family))
    ]


def frameworks_with_data(family: str, device: str) -> list[str]:
    """The framework directories (``nccl`` for its collectives) of ``device``'s ``family``
    tables that :func:`load` reads, sorted."""
    _check(family)
    return sorted(
        {
            fw
            for system, dev in SYSTEMS.items()
            if dev == device
            for table in _family_tables(family)
            for fw, _, _ in _table_paths(system, table)
        }
    )


def _family_tables(family: str) -> tuple[str, ...]:
    return ("custom_allreduce", "nccl") if family == "all_reduce" else (family,)


def table_files(family: str) -> list[str]:
    """The table files :func:`load` reads for ``family`` over every measured system (the current
    version's, else the newest, per framework), relative to the corpus root, sorted."""
    _check(family)
    root = corpus_info().root
    return sorted(
        os.path.relpath(path, root)
        for system in SYSTEMS
        for table in _family_tables(family)
        for _, _, path in _table_paths(system, table)
    )


def _check(family: str) -> None:
    if family not in FAMILIES:
        raise MeasuredDataError(f"family {family!r} not measured; allowed: {', '.join(FAMILIES)}")


#: columns of the tables that :func:`load` never reads: the device and the framework directory's
#: own name and version (set from the path), the beam width (1 throughout); ``op_name`` too,
#: but in the NCCL table, whose rows it tells apart
_UNREAD = frozenset({"device", "framework", "version", "beam_width", "op_name"})


def _frame(system: str, table: str, frameworks: list[str] | None = None, *, lean: bool = False) -> Any:
    """Every row of one table of ``system`` (each framework at its chosen version), or of the
    ``frameworks`` given: only their files are read, and each row comes out as it does among
    every framework's (:func:`_as_in_whole`). ``lean``: without the columns in :data:`_UNREAD`."""
    pd = _pandas()
    frames = []
    paths = _table_paths(system, table)
    names = _column_names([p for *_, p in paths])
    unread = (_UNREAD - {"op_name"} if table == "nccl" else _UNREAD) if lean else frozenset()
    for (fw, version, path), have in zip(paths, names, strict=True):
        if frameworks is not None and fw not in frameworks:
            continue  # another framework's file: not read at all
        df = pd.read_parquet(path, columns=[c for c in have if c not in unread])
        df["framework"] = fw
        df["version"] = version
        frames.append(df)
    if not frames:
        return None
    df = pd.concat(frames, ignore_index=True)
    return df if frameworks is None else _as_in_whole(df, names, unread)


def _column_names(paths: list[str]) -> list[list[str]]:
    """Each table file's column names, from its schema (no rows read)."""
    import pyarrow.parquet as pq

    return [pq.read_schema(p).names for p in paths]


def _as_in_whole(df: Any, names: list[list[str]], unread: frozenset[str]) -> Any:
    """Some frameworks' rows of a table as the concatenation of all its files has them: a column
    that one file lacks is missing (NaN) in that file's rows and a float column in every row
    (pandas' ``concat``: an integer column beside missing values is float64). ``names``: every
    file's columns (A100's attention tables: ``window_size`` in TensorRT-LLM's file only)."""
    import numpy as np

    cols = [set(n) - unread for n in names]
    for c in sorted(cols[0].union(*cols[1:]) - cols[0].intersection(*cols[1:])):
        if c not in df:
            df[c] = np.nan
        elif df[c].dtype.kind in "iu":
            df[c] = df[c].astype("float64")
    return df


#: every row of one table of ``system`` (each framework at its chosen version), unfiltered
table_frame = _frame


def _load_one(family: str, system: str, frameworks: list[str] | None = None) -> Any:
    # not cached: its callers keep what they derive (heldout.prepared), and a cached raw table
    # would hold every framework's and kernel's rows in memory beside it for the process's life
    pd = _pandas()
    if family == "gemm":
        df = _frame(system, "gemm", frameworks, lean=True)
        if df is None:
            return None
        df = df.rename(columns={"gemm_dtype": "dtype"})[
            ["framework", "version", "kernel_source", "m", "n", "k", "dtype", "latency"]
        ]
    elif family in ("context_attention", "generation_attention"):
        df = _frame(system, family, frameworks, lean=True)
        if df is None:
            return None
        df = df.rename(columns=_ATTN_RENAME)
        # a file without ``window_size`` (A100's vLLM and SGLang tables) measures full attention:
        # its rows are "no window" (0, the tables' own value for it), never a missing key that a
        # grouping over the shape would drop
        df["window"] = df["window"].fillna(0).astype("int64") if "window" in df else 0
        cols = ["framework", "version", "kernel_source", "batch", "isl", "heads", "kv_heads", "head_dim"]
        df = df[[*cols, "window", "attn_dtype", "kv_dtype", "step", "latency"]]
    elif family in ("context_mla", "generation_mla"):
        df = _frame(system, family, frameworks, lean=True)
        if df is None:
            return None
        df = df.rename(columns={**_ATTN_RENAME, "mla_dtype": "attn_dtype", "tp_size": "tp"})
        if family == "context_mla":  # the absorbed form's rows are another kernel (ABSORBED_CONTEXT_MLA)
            pairs = zip(df["framework"].astype(str), df["kernel_source"].astype(str), strict=True)
            df = df[[p not in ABSORBED_CONTEXT_MLA for p in pairs]]
        cols = ["framework", "version", "kernel_source", "batch", "isl", "heads", "tp", "step"]
        df = df[[*cols, "attn_dtype", "kv_dtype", "latency"]]
    elif family == "moe":
        df = _frame(system, "moe", frameworks, lean=True)
        if df is None:
            return None
        # power-law routing loads ranks unevenly in a way the tables do not state; the
        # balanced rows are the ones whose per-rank work the shape determines, except the ep > 1
        # rows of a group that are not a rank's share of the work (rank0_clamped)
        df = df[df["distribution"] == "balanced"].rename(columns=_MOE_RENAME)
        df = df[~((rank0_clamped(df) != "") & (df["ep"] > 1).to_numpy())]
        df = df[["framework", "version", "kernel_source", *_MOE_RENAME.values()]]
    else:
        parts = []
        ar = _frame(system, "custom_allreduce", frameworks, lean=True)
        if ar is not None:
            ar = ar.rename(
                columns={"allreduce_dtype": "dtype", "num_gpus": "gpus", "message_size": "elements"}
            )
            # TensorRT-LLM's table has no backend value: its kernel is the framework's own
            fw = ar["framework"].astype(object)
            ar["backend"] = (
                ar["backend"].astype(object).where(ar["backend"].notna(), fw) if "backend" in ar else fw
            )
            parts.append(ar[_AR_COLS])
        nc = _frame(system, "nccl", frameworks, lean=True)
        if nc is not None:
            nc = nc[nc["op_name"] == "all_reduce"].rename(
                columns={"nccl_dtype": "dtype", "num_gpus": "gpus", "message_size": "elements"}
            )
            nc["backend"] = "nccl"
            nc["framework"] = "nccl"
            parts.append(nc[_AR_COLS])
        if not parts:
            return None
        df = pd.concat(parts, ignore_index=True)
        # the *_eager rows time a kernel launched outside a CUDA graph: launch
        # overhead, not the collective; kept out as the wheel's own queries do
        df = df[~df["backend"].astype(str).str.endswith("eager")]
    df = df.copy()
    df["latency_s"] = df.pop("latency").astype(float) * 1e-3
    df = df[df["latency_s"] > 0]
    df.insert(0, "device", SYSTEMS[system])
    df.insert(1, "system", system)
    for c in df.columns:
        if str(df[c].dtype).startswith("str") or df[c].dtype == object:
            df[c] = df[c].astype(str)
    return df.reset_index(drop=True)


def load(family: str, devices: list[str] | None = None, frameworks: list[str] | None = None) -> Any:
    """One family's measurements as a pandas DataFrame (module doc for columns).

    ``devices`` are catalog names (default: every device with data);
    ``frameworks`` filter by the wheel's framework directory (``trtllm``,
    ``vllm``, ``sglang``, ``nccl``): only their files are read.
    """
    _check(family)
    pd = _pandas()
    known = set(SYSTEMS.values())
    for d in devices or []:
        if d not in known:
            raise MeasuredDataError(
                f"device {d!r} has no measured data; measured: {', '.join(sorted(known))}"
            )
    frames = []
    for system, dev in SYSTEMS.items():
        if devices and dev not in devices:
            continue
        df = _load_one(family, system, frameworks)
        if df is not None:
            frames.append(df)
    if not frames:
        if frameworks:
            raise MeasuredDataError(f"no {family} measurements for frameworks {frameworks}")
        raise MeasuredDataError(f"no {family} measurements for devices {devices}")
    out = pd.concat(frames, ignore_index=True)
    if frameworks:
        out = out[out["framework"].isin(frameworks)]
        if out.empty:
            raise MeasuredDataError(f"no {family} measurements for frameworks {frameworks}")
    out = out.reset_index(drop=True)
    release_unused()
    return out


def release_unused() -> None:
    """Hand back to the system the memory freed after reading and sorting a table: Arrow's pool
    (the parquet pages read, the text columns' temporaries) and, under glibc, the C heap's free
    pages (``malloc_trim(0)``, as Dask's workers do): a frame's rows are read once and kept, and
    either allocator would otherwise hold the peak of reading them for the rest of the process."""
    import pyarrow as pa

    pa.default_memory_pool().release_unused()
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


@functools.cache
def _malloc_trim() -> Any:
    """glibc's ``malloc_trim``, or None (another C library, another system)."""
    import ctypes

    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None).malloc_trim  # the process's own symbols: its C library's
    except (OSError, AttributeError):  # musl and others have none
        return None


@functools.cache
def _compute_scale_grid(system: str, framework: str) -> tuple[Any, Any, Any] | None:
    """(m grid, k grid, seconds[m, k]) of ``framework``'s compute_scale table on ``system``, or None."""
    import numpy as np

    df = _frame(system, "compute_scale")
    if df is None:
        return None
    df = df[(df["framework"] == framework) & (df["quant_dtype"].astype(str) == "fp8")]
    if df.empty:
        return None
    p = df.pivot_table(index="m", columns="k", values="latency", aggfunc="median").sort_index()
    p = p.sort_index(axis=1).interpolate(axis=0, limit_direction="both")
    return (
        p.index.to_numpy(dtype=float),
        p.columns.to_numpy(dtype=float),
        np.clip(p.to_numpy(dtype=float), 0.0, None) * 1e-3,
    )


def _grid_value(grid: tuple[Any, Any, Any], m: Any, k: Any) -> Any:
    """Bilinear interpolation of a compute_scale grid at ``(m, k)``; beyond the largest measured
    ``m`` or ``k`` the edge value grows in proportion (the scale is one read of the ``m x k``
    activation at large sizes: memory-bound), below the smallest it is the edge value."""
    import numpy as np

    gm, gk, t = grid
    m = np.asarray(m, dtype=float)
    k = np.asarray(k, dtype=float)
    mc, kc = np.clip(m, gm[0], gm[-1]), np.clip(k, gk[0], gk[-1])
    i = np.clip(np.searchsorted(gm, mc, side="right") - 1, 0, len(gm) - 2)
    j = np.clip(np.searchsorted(gk, kc, side="right") - 1, 0, len(gk) - 2)
    wm = (mc - gm[i]) / (gm[i + 1] - gm[i])
    wk = (kc - gk[j]) / (gk[j + 1] - gk[j])
    v = (
        t[i, j] * (1 - wm) * (1 - wk)
        + t[i + 1, j] * wm * (1 - wk)
        + t[i, j + 1] * (1 - wm) * wk
        + t[i + 1, j + 1] * wm * wk
    )
    return v * np.maximum(m / gm[-1], 1.0) * np.maximum(k / gk[-1], 1.0)


def compute_scale_s(device: str, framework: str, m: Any, k: Any) -> Any:
    """Seconds a dynamic per-tensor FP8 activation scale adds to one ``m x k`` GEMM input over a
    static (calibrated) scale: the wheel's ``quantize/<framework>/computescale_perf`` table.

    Its collector (``collector/trtllm/collect_computescale.py`` of ai-dynamo/aiconfigurator) times
    ``quantize_e4m3_per_tensor`` (the amax reduction, then the cast) and
    ``static_quantize_e4m3_per_tensor`` (the cast by a given scale) on a bf16 ``m x k`` input and
    records the difference; vLLM's table is its dynamic per-token quantisation minus the static one,
    SGLang's is zero. The ``fp8`` GEMM tables time a linear layer whose input scale is computed each
    call (TensorRT-LLM's ``Linear`` without an ``input_scale`` quantises dynamically), and the wheel's
    own queries price a GEMM of a statically scaled checkpoint as that time minus this table
    (``GEMMQuantMode.fp8_static``: ``aiconfigurator_core.sdk.perf_database._gemm_key_names``, "static
    FP8 from dynamic FP8"; on H100 TensorRT-LLM, 18.5 us - 7.2 us = 11.3 us for a 1 x 4096 x 4096
    GEMM). ``device``'s own table, else the median over the measured devices that have one;
    interpolation :func:`_grid_value`. An array of ``m``'s shape; no table on any device is an
    error (a static-scale price would silently be the dynamic one).
    """
    import numpy as np

    own = [s for s, d in SYSTEMS.items() if d == device]
    grids = [g for s in own if (g := _compute_scale_grid(s, framework)) is not None]
    if not grids:
        grids = [g for s in SYSTEMS if (g := _compute_scale_grid(s, framework)) is not None]
    if not grids:
        raise MeasuredDataError(
            f"no {framework} compute_scale measurements in the corpus: static FP8 scales cannot be priced "
            "(--fp8-scales dynamic prices the measured FP8 GEMMs as they are)"
        )
    return np.median(np.stack([_grid_value(g, m, k) for g in grids]), axis=0)


@functools.cache
def _small_kernel_one(system: str) -> float | None:
    """The shortest elementwise kernel measured on ``system`` (s), or None (docs: :func:`small_kernel_s`)."""
    df = _frame(system, "scale_matrix")
    if df is None:
        return None
    df = df[(df["m"] <= 8) & (df["k"] <= 8192)]
    per_fw = df.groupby("framework")["latency"].median()
    return float(per_fw.min()) * 1e-3 if len(per_fw) else None


def small_kernel_s(device: str) -> float:
    """Seconds a small elementwise kernel takes on ``device`` however little it reads: the fastest
    framework's median time of a static FP8 quantisation (one read of a bf16 ``m x k`` input, one
    write of its FP8 cast) over the wheel's ``quantize/*/scale_matrix_perf`` rows with ``m <= 8``
    and ``k <= 8192``, where the kernel moves at most 200 KB: launch, one wave and its tail.
    1.40 us on H100 SXM (TensorRT-LLM's ``static_quantize_e4m3_per_tensor``; vLLM's
    ``static_scaled_fp8_quant`` 2.03 us), 1.33 us on H200, 2.12 us on B200. ``device``'s own tables,
    else the median over the measured devices'."""
    import statistics

    own = [v for s, d in SYSTEMS.items() if d == device if (v := _small_kernel_one(s)) is not None]
    if own:
        return min(own)
    every = [v for s in SYSTEMS if (v := _small_kernel_one(s)) is not None]
    if not every:
        raise MeasuredDataError("no scale_matrix measurements in the corpus: no small-kernel time")
    return statistics.median(every)


def small_kernel_measured(device: str) -> bool:
    """Whether :func:`small_kernel_s` reads ``device``'s own tables (else other devices')."""
    return any(_small_kernel_one(s) is not None for s, d in SYSTEMS.items() if d == device)
