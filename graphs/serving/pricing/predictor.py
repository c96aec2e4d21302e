"""One predictor for every analysis: the roofline bound, or a framework's calibrated kernels.

A :class:`Predictor` names how a kernel's time is priced:

* ``bound``: its roofline (:mod:`costmodel.roofline`): today's numbers, unchanged;
* ``calibrated``: the efficiency fits of the framework's measured kernels
  (:func:`graphs.serving.pricing.predict.predict_step`'s ``predicted_s``);
* ``grey-box``: those fits times their shape residuals (``corrected_s``).

An analysis takes one as an argument; ``predicted_mixed_step`` gives the simulator's
mixed-batch iteration priced by it. That step is COMPILED ONCE per (model, device, tp,
predictor): every kernel of the decode graph whose op the corpus measures (GEMMs,
attention, all-reduce: selected by their node role and corpus family, never by op name
strings) is priced by the predictor once over a geometric grid of what varies in a serving
iteration, and the iteration loop only interpolates:

* token-wise kernels (body) at ``N`` tokens, the head at ``R`` rows: every whole count up
  to 8192 (their times are staircases in ``N``: :func:`token_grid`), then
  ``round(2^{j/8})`` up to ``2^17``;
* decode attention at ``(D, mean ctx)`` over the ``D`` decoding sequences (one varlen launch,
  as the bound prices it): ``D`` whole up to 256 then ``round(2^{j/2})`` up to ``2^12``, the
  context ``round(2^{j/2})`` for ``2 <= ctx <= 2^18``;
* a prefill chunk's attention at ``c`` new tokens with no cached prefix (the corpus measures
  context attention with ``q = kv`` only): the whole-prompt prefill graph at ``(1, c)``, on the
  token grid. A chunk of ``c`` after ``p`` cached tokens (a prompt longer than the token budget,
  a prefix-cache hit, a speculative verify chunk) is its nearest measured shape, the ``q = kv``
  kernel at its KV length ``p + c``, scaled by the ratio of the two roofline bounds; at most
  ``c`` decodes at ``p + c`` (where ``c`` is on the decode table, ``c <= 4096``); and never
  less than what it contains: the ``q = kv`` kernel at ``c`` (the same query tiles, each with a
  shorter KV loop) and one decode at ``p + c`` (the same KV read, one query):

  .. math:: \\hat t(c \\mid p) = \\max\\Big(\\min\\Big(\\hat t(p + c \\mid 0)\\,\\frac{t^{roof}(c \\mid p)}{t^{roof}(p + c \\mid 0)},\\;
     \\hat t_{dec}(c, p + c)\\Big),\\; \\hat t(c \\mid 0),\\; \\hat t_{dec}(1, p + c)\\Big).

  The chunk's query tiles are the last ``c / (p + c)`` of the ``q = kv`` kernel's, each with the
  same causal KV loop, so the bound ratio keeps the loop lengths. What it does not keep is the
  fill: a chunk launches ``heads x ceil(c / 128)`` tiles, 32 for one 128-token chunk of 32 heads,
  a quarter of an H100's 132 SMs, where the long kernel fills them; without split-KV such a chunk
  may be priced optimistically (a neighbour, said as such; the MLA prefix path's extra launches
  and merges, vLLM's and SGLang's, are not counted either). The other way, a chunk of a few
  tokens would inherit the long kernel's per-token cost where a decode kernel reads its KV
  cheaper: for MLA the ``q = kv`` kernel is the decompressed form (every head's K/V of ``p + c``
  tokens), while ``c`` absorbed decodes read the shared latent ``c`` times. The cap at ``c``
  decodes is the decode path engines take for a few tokens after a prefix: vLLM 0.11.0's MLA
  backends reorder a request of at most ``reorder_batch_threshold`` query tokens as a decode
  (1 in ``mla/common.py``, 512 for FlashAttention-MLA), SGLang runs an extend after a cached
  prefix of fewer than 8,192 tokens in the absorbed form (``chunked_prefix_cache_threshold``)
  and verifies drafts on its decode kernels. The iteration's attention is still clamped at its
  bound, the decompressed form's for an MLA chunk after a prefix: past about 8K cached tokens
  that bound exceeds one decode (1.1x at 8,192, 3x at 32,768; four decodes near 16K) and prices
  the chunk, as SGLang
  runs it there (decompressed, from 8,192 cached tokens); vLLM's decode path is then priced
  high (NOT RESOLVED: which form runs is the engine's, not the step's).

Interpolation is piecewise linear in ``(log x, log t)`` (bilinear in the logs for decode
attention), which keeps the tabulated values' monotonicity, extended linearly beyond the
grid's ends. Each kernel's time is then clamped from below by its own roofline term of the
same batch (:class:`graphs.serving.step.mixed.MixedStep`), so a predicted iteration is never
faster than its bound:

.. math:: t_k = \\max\\big(\\hat t_k(x),\\; t^{roof}_k(x)\\big)

and the seconds where the clamp acted are counted apart (:attr:`Coverage.bounds`, reason
:data:`CLAMPED`). Kernels the corpus does not measure keep their bound. Every iteration adds
its kernels' seconds to the share they rest on (measured, neighbour, bound:
:mod:`graphs.serving.pricing.kernel_sources`), read back with :meth:`PredictedStep.coverage`.
"""

from __future__ import annotations

import bisect
import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import sympy

from costmodel.errors import CostModelError
from costmodel.graph import GROUP, REPEAT, op_nodes
from costmodel.hardware import Hardware, get_device
from costmodel.keys import ROLE, Phase, Role
from costmodel.measured.corpus import FP8_SCALES, FRAMEWORKS, small_kernel_s
from costmodel.memo import BoundedCache
from costmodel.symbols import B as B_sym
from costmodel.symbols import S as S_sym
from costmodel.symbols import ctx as ctx_sym
from costmodel.symbols import dim
from models.config import ModelConfig

from ..engines import get_engine
from ..engines.attention_kernels import AttentionKernelRule
from ..engines.moe_kernels import MoEKernelRule
from ..step.compiled import compiled_step
from ..step.mixed import HEAD_GROUP, mixed_step, node_time_expr, split_bodies, time_from_contexts
from ..step.workload import Workload, as_workload
from .kernel_sources import CLAMPED, Coverage, heldout_log_quantile, kernel_source
from .predict import (
    attention_backend_curve,
    attention_kernel_note,
    dtype_key,
    expert_activations,
    expert_groups,
    fused_row,
    kernel_row,
    moe_kernel_key,
    price_rows,
    projection_groups,
    small_kernel_basis,
    small_kernel_floor,
    small_kernel_groups,
    unmeasured_basis,
)
from .protocols import IterationStep

__all__ = [
    "BOUND",
    "CLAMPED",
    "INTERVAL",
    "KINDS",
    "KernelIds",
    "PredictedStep",
    "Predictor",
    "predicted_mixed_step",
    "lerp_at",
    "tabulate",
    "token_grid",
]

KINDS = ("bound", "calibrated", "grey-box")
#: the quantiles of a prediction interval (P10-P90): its optimistic and pessimistic ends
INTERVAL = (0.1, 0.9)
_CHUNK_PREFIX = "chunk attention after a cached prefix: not measured (q < kv)"
_CHUNK_PREFIX_SCALED = (
    "chunk attention after a cached prefix (q < kv): the q = kv kernel at its KV length, scaled by the "
    "bound ratio (at most its tokens' decodes, at least the q = kv kernel at its own tokens and one "
    "decode at its KV length)"
)
_CHUNK_BODY_PREFIX = (
    "MLA K/V decompression of chunks after a cached prefix (kv_b_proj over the prefix too): not measured"
)


def _frameworks() -> tuple[str, ...]:
    return tuple(FRAMEWORKS)


@dataclass(frozen=True)
class Predictor:
    """How kernel times are priced (module doc): ``kind`` in :data:`KINDS`, with the
    ``framework`` whose measured kernels price them (none for the bound).

    ``quantile`` (in (0, 1), None: the fits' own point prediction) prices every measured
    kernel at that quantile of its held-out error instead:

    .. math:: \\hat t_q = \\hat t \\, \\exp\\big(Q_q(\\log(t_{meas} / \\hat t))\\big)

    with ``Q_q`` over the held-out rows of the fits pricing it
    (:func:`graphs.serving.pricing.kernel_sources.heldout_log_errors`: 20 % of each kernel group's
    corpus rows held out of a fit on the rest). Every kernel of a step takes the same quantile
    at once: the errors of one device's kernels are largely shared (a library version, a clock,
    the fitted fractions), so the ends of :data:`INTERVAL` bracket a whole step, TTFT, TPOT or
    throughput the way they bracket one kernel (comonotone errors; independent ones would give
    a narrower interval). Each end is still clamped to the bound."""

    kind: str = "bound"
    framework: str | None = None
    cold_l2: bool = True  #: drop the fits' L2 speed-up (weights are not L2 resident in a step)
    quantile: float | None = None  #: the held-out error quantile priced (None: the point prediction)
    #: FP8 activation scales, dynamic or static (:func:`graphs.serving.pricing.predict.price_rows`)
    fp8_scales: str = "dynamic"
    #: sibling projections (q/k/v, gate/up) priced as the one GEMM engines run (:mod:`graphs.serving.pricing.predict`)
    fuse_projections: bool = True
    #: each engine kernel of the small unmeasured ops at least the device's shortest measured kernel
    small_kernels: bool = True
    #: the fused-MoE kernels the engine runs where they are not the corpus's fastest (an engine
    #: profile's :attr:`~graphs.serving.engines.EngineProfile.moe_kernels`; None: the framework's
    #: default profile's, set so here; :meth:`for_engine`)
    moe_kernels: tuple[Any, ...] | None = None
    #: the attention kernels the engine runs where the corpus's rows time another (a profile's
    #: :attr:`~graphs.serving.engines.EngineProfile.attention_kernels`; None: the framework's
    #: default profile's; :meth:`for_engine`): the attention is then a neighbour that names it
    attention_kernels: tuple[Any, ...] | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise CostModelError(f"predictor kind {self.kind!r} not allowed; allowed: {', '.join(KINDS)}")
        if self.fp8_scales not in FP8_SCALES:
            raise CostModelError(
                f"predictor fp8_scales {self.fp8_scales!r} not allowed; allowed: {', '.join(FP8_SCALES)}"
            )
        q = self.quantile
        if q is not None and not (isinstance(q, int | float) and 0 < q < 1):
            raise CostModelError(f"predictor quantile must be in (0, 1) or None, got {q!r}")
        if self.kind == "bound":
            if self.framework is not None:
                raise CostModelError(f"the bound predictor takes no framework, got {self.framework!r}")
            if q is not None:
                raise CostModelError("the bound predictor has no error quantile (it is a lower bound)")
            if self.fp8_scales != "dynamic":
                raise CostModelError("the bound predictor prices no measured kernel: fp8_scales is theirs")
            if self.moe_kernels:
                raise CostModelError(
                    "the bound predictor takes no moe_kernels: it prices no measured kernel (give a framework)"
                )
            if self.attention_kernels:
                raise CostModelError(
                    "the bound predictor takes no attention_kernels: it prices no measured kernel (give a framework)"
                )
            object.__setattr__(self, "moe_kernels", ())  # one bound predictor, whatever was given
            object.__setattr__(self, "attention_kernels", ())
            return
        fws = _frameworks()
        if self.framework not in fws:
            raise CostModelError(
                f"predictor framework {self.framework!r} not allowed; allowed: {', '.join(fws)}"
            )
        if self.moe_kernels is None:  # the framework's default engine's (one predictor, one key)
            object.__setattr__(self, "moe_kernels", get_engine(self.framework).moe_kernels)
        elif not isinstance(self.moe_kernels, tuple) or not all(
            isinstance(r, MoEKernelRule) for r in self.moe_kernels
        ):
            raise CostModelError(
                f"predictor moe_kernels must be a tuple of MoEKernelRule, got {self.moe_kernels!r}"
            )
        if self.attention_kernels is None:
            object.__setattr__(self, "attention_kernels", get_engine(self.framework).attention_kernels)
        elif not isinstance(self.attention_kernels, tuple) or not all(
            isinstance(r, AttentionKernelRule) for r in self.attention_kernels
        ):
            raise CostModelError(
                f"predictor attention_kernels must be a tuple of AttentionKernelRule, got {self.attention_kernels!r}"
            )

    @classmethod
    def of(
        cls,
        framework: str | None,
        *,
        grey_box: bool = True,
        quantile: float | None = None,
        fp8_scales: str = "dynamic",
    ) -> Predictor:
        """``--predict FRAMEWORK``: the framework's kernels, their efficiency fits times the shape
        residuals (grey-box: held-out MAPE on random 20 % of shapes 6.3 % against the fits' 12.8 %
        for H100 GEMMs, 9.1 against 15.9 % for its decode attention, ``docs/accuracy.md``);
        ``grey_box=False``: the fits alone; None: the bound. ``fp8_scales="static"``: FP8 GEMMs of
        a checkpoint with calibrated activation scales (:func:`graphs.serving.pricing.predict.price_rows`).

        Parameters
        ----------
        framework : str or None
            The corpus framework (``vllm``, ``sglang``, ``trtllm``); None: the bound.
        grey_box : bool
            Correct the fits by their residuals at the nearest measured shapes.
        quantile : float, optional
            Price each kernel at this quantile of its held-out error (None: the point prediction).
        fp8_scales : str
            ``"dynamic"`` or ``"static"`` FP8 activation scales.

        Returns
        -------
        Predictor

        Raises
        ------
        CostModelError
            When the framework, quantile or scale mode is not one allowed, or a quantile is asked of
            the bound.
        """
        if framework is None:
            if quantile is not None:
                raise CostModelError(
                    f"quantile {quantile!r} needs a framework: the bound (framework None) has no held-out errors"
                )
            return cls()
        return cls(
            "grey-box" if grey_box else "calibrated", framework, quantile=quantile, fp8_scales=fp8_scales
        )

    def for_engine(self, profile: Any) -> Predictor:
        """This predictor with the fused-MoE and attention kernels ``profile`` runs (its
        :attr:`~graphs.serving.engines.EngineProfile.moe_kernels`: vLLM 0.11's Marlin for MXFP4
        experts on Hopper; its :attr:`~graphs.serving.engines.EngineProfile.attention_kernels`:
        vLLM 0.11's Triton attention for sinks off Hopper); the bound: itself (it prices no
        measured kernel).

        Parameters
        ----------
        profile : EngineProfile
            The engine the steps run on.

        Returns
        -------
        Predictor

        Examples
        --------
        >>> from graphs.serving.engines import get_engine
        >>> p = Predictor.of("vllm").for_engine(get_engine("vllm@0.11"))
        >>> [r.where for r in p.moe_kernels]
        ['Hopper', 'Ampere/Ada Lovelace', 'rtx-5090/rtx-pro-6000']
        >>> Predictor().for_engine(get_engine("vllm@0.11")).moe_kernels
        ()
        """
        if self.is_bound:
            return self
        return dataclasses.replace(
            self, moe_kernels=tuple(profile.moe_kernels), attention_kernels=tuple(profile.attention_kernels)
        )

    def at(self, quantile: float | None) -> Predictor:
        """This predictor at another held-out error quantile (None: the point prediction).

        Parameters
        ----------
        quantile : float or None
            The held-out error quantile, in ``(0, 1)``; None: the point prediction.

        Returns
        -------
        Predictor
        """
        return dataclasses.replace(self, quantile=quantile)

    @property
    def point(self) -> Predictor:
        """This predictor's point prediction (no quantile)."""
        return self.at(None)

    def interval(self) -> tuple[Predictor, Predictor]:
        """The optimistic and pessimistic ends of :data:`INTERVAL` (the bound: itself twice).

        Returns
        -------
        tuple of (Predictor, Predictor)
            The predictors at the interval's low and high quantiles.
        """
        if self.is_bound:
            return self, self
        return self.at(INTERVAL[0]), self.at(INTERVAL[1])

    @property
    def is_bound(self) -> bool:
        return self.kind == "bound"

    @property
    def field(self) -> str:
        """The :func:`predict_step` node field this predictor's times are."""
        return "corrected_s" if self.kind == "grey-box" else "predicted_s"

    @property
    def label(self) -> str:
        if self.is_bound:
            return "roofline bound"
        extra = " with shape residuals" if self.kind == "grey-box" else ""
        at = "" if self.quantile is None else f", at the P{100 * self.quantile:g} of their held-out errors"
        scales = ", static FP8 activation scales" if self.fp8_scales == "static" else ""
        return f"predicted from {self.framework} kernels{extra}{scales}{at}"

    def log_factor(self, device: str, family: str, key: str) -> float:
        """``log`` of the factor on a kernel of ``family`` and dtype ``key`` priced on ``device``:
        its held-out error quantile (class doc), 0 for the point prediction.

        Parameters
        ----------
        device : str
            The device's catalog name.
        family : str
            The kernel family.
        key : str
            The dtype key.

        Returns
        -------
        float
            The log of the factor (dimensionless; 0 at the point prediction).
        """
        if self.quantile is None or self.framework is None or family == "moe":
            # the fused-MoE family is the measurements themselves, interpolated in log(tokens):
            # no fit, so no held-out error of one (its interpolation error is not estimated)
            return 0.0
        return heldout_log_quantile(
            device, self.framework, family, key, float(self.quantile), self.kind == "grey-box"
        )


#: the roofline bound predictor (what every analysis prices with unless told otherwise)
BOUND = Predictor()


def token_grid(dense: int = 8192, hi: int = 2**17, per_octave: int = 8) -> np.ndarray:
    """Every whole count ``1 .. dense``, then ``round(2^{j/per_octave})`` up to ``hi``.

    Dense first because the kernels' times are staircases in their token count (a GEMM's
    wave quantisation: the measured fits jump by ~10 % at each multiple of its 64-row tile),
    which no geometric grid follows; an iteration's token count is a whole number, so below
    ``dense`` (the default token budget) the table holds the prediction exactly. Beyond it the
    steps are under 1 % of the time and the geometric grid interpolates them.

    Parameters
    ----------
    dense : int
        Every token count up to this one is on the grid.
    hi : int
        The largest token count.
    per_octave : int
        Geometric points per doubling beyond ``dense``.

    Returns
    -------
    numpy.ndarray
        Token counts (float), ascending and unique.
    """
    j = np.arange(0, int(math.log2(hi) * per_octave) + 1)
    geo = np.round(2.0 ** (j / per_octave))
    return np.unique(np.concatenate([np.arange(1, dense + 1, dtype=float), geo[geo > dense]]))


def lerp_at(grid: list[float], lx: float) -> tuple[int, float]:
    """Segment ``i`` and weight ``w`` of ``lx`` on the sorted log grid (``w`` outside [0, 1]
    beyond the ends: linear extrapolation of the end segments).

    Parameters
    ----------
    grid : list of float
        A sorted log grid (at least two points).
    lx : float
        The log of the point.

    Returns
    -------
    tuple of (int, float)
        The segment index and the weight of its right end.
    """
    i = min(max(bisect.bisect_right(grid, lx) - 1, 0), len(grid) - 2)
    return i, (lx - grid[i]) / (grid[i + 1] - grid[i])


class _NodeForms:
    """A graph node's parameters, repeat and op as numpy functions of the graph's free symbols."""

    def __init__(self, d: dict[str, Any], syms: tuple[sympy.Symbol, ...]) -> None:
        self.node = d
        self.syms = syms
        self.fixed: dict[str, Any] = {}
        self.forms: dict[str, Callable[..., Any]] = {}
        for k, v in (d.get("params") or {}).items():
            if isinstance(v, sympy.Basic):
                if v.free_symbols:
                    self.forms[k] = sympy.lambdify(syms, v, "numpy")
                else:
                    self.fixed[k] = float(v)
            else:
                self.fixed[k] = v
        rep = d.get(REPEAT, 1)
        self.repeat = sympy.lambdify(syms, rep, "numpy") if isinstance(rep, sympy.Basic) else (lambda *_: rep)

    def params(self, points: np.ndarray) -> list[dict[str, Any]]:
        """The parameters at each row of ``points`` (values of the symbols, in order)."""
        cols = [points[:, i] for i in range(points.shape[1])]
        n = len(points)
        vals = {
            k: np.broadcast_to(np.asarray(f(*cols), dtype=float), (n,)).tolist()
            for k, f in self.forms.items()
        }
        return [{**self.fixed, **{k: v[i] for k, v in vals.items()}} for i in range(n)]

    def repeats(self, points: np.ndarray) -> np.ndarray:
        cols = [points[:, i] for i in range(points.shape[1])]
        return np.broadcast_to(np.asarray(self.repeat(*cols), dtype=float), (len(points),))


@dataclass
class _Table:
    """One kernel's predicted seconds (repeat included) on a grid, and what they rest on."""

    name: str
    source: str  #: measured, neighbour or bound (no table then)
    basis: str
    values: np.ndarray | None  #: seconds at the grid points (None: the bound prices it)
    family: str = ""  #: the measured family and dtype key pricing it (for the quantile factor)
    key: str = ""
    #: what the seconds rest on where the values fall below the kernel's bound, which then prices
    #: it ("": :data:`CLAMPED`; a small kernel's floor share below its bound: its op's unmeasured
    #: reason, as :func:`graphs.serving.pricing.predict.predict_step` keeps such an op at its bound)
    clamp_basis: str = ""

    @property
    def below_bound(self) -> str:
        """The bound-share reason of this kernel's clamped seconds."""
        return self.clamp_basis or CLAMPED


#: tabulations of the point predictions, shared by every quantile of one predictor
_TABLES: BoundedCache[list[_Table]] = BoundedCache("predictor_tables", 256)


def tabulate(
    hw: Hardware,
    pred: Predictor,
    g: Any,
    syms: tuple[sympy.Symbol, ...],
    names: list[str],
    points: np.ndarray,
) -> list[_Table]:
    """Each node of ``names`` priced by ``pred`` at every row of ``points`` (values of ``syms``),
    the corpus pricing of :func:`graphs.serving.pricing.predict.predict_step` batched per family and
    dtype; a quantile predictor's tables are its point tables times each kernel's factor
    (:meth:`Predictor.log_factor`).

    Parameters
    ----------
    hw : Hardware
        The device.
    pred : Predictor
        The kernel predictor (framework, quantile, options).
    g : networkx.DiGraph
        A step graph with symbolic dims.
    syms : tuple of sympy.Symbol
        The dims ``points`` gives values of.
    names : list of str
        The nodes to price.
    points : numpy.ndarray
        Dim values, shape ``(points, len(syms))``.

    Returns
    -------
    list of _Table
        Per kernel, its seconds at every point.
    """
    key = (hw, pred.point, g, syms, tuple(names), points.shape, points.tobytes())
    base = _TABLES.get_or_build(
        key,
        lambda: _tabulate_point(hw, pred.point, [(n, _NodeForms(g.nodes[n], syms)) for n in names], points),
    )
    if pred.quantile is None:
        return base
    return [  # a small kernel's floor (no measured family) has no held-out error: unchanged
        t
        if t.values is None or not t.family
        else dataclasses.replace(t, values=t.values * math.exp(pred.log_factor(hw.name, t.family, t.key)))
        for t in base
    ]


def _tabulate_point(
    hw: Hardware, pred: Predictor, forms: list[tuple[str, _NodeForms]], points: np.ndarray
) -> list[_Table]:
    """:func:`tabulate` of the point prediction: the nodes (name, forms) at ``points``."""
    assert pred.framework is not None
    out: list[_Table] = []
    # one kernel row per point: ([(table index, share of the kernel's time)], point, row, repeat)
    groups: dict[tuple[str, str], list[tuple[list[tuple[int, float]], int, dict[str, Any], float]]] = {}
    hit_of: dict[int, list[tuple[tuple[str, dict[str, Any]], int, float]]] = {}
    for ni, (n, nf) in enumerate(forms):
        out.append(_Table(n, "bound", "", None))
        hits: list[tuple[tuple[str, dict[str, Any]], int, float]] = []
        reps = nf.repeats(points)
        for pi, p in enumerate(nf.params(points)):
            hit = kernel_row(nf.node, p)
            if hit is None:  # unmeasured at some point: the bound prices the kernel everywhere
                out[ni].basis = unmeasured_basis(nf.node, p)
                hits = []
                break
            hits.append((hit, pi, float(reps[pi])))
        if hits:
            hit_of[ni] = hits
    index = {n: i for i, (n, _) in enumerate(forms)}
    fused = projection_groups((n, nf.node) for n, nf in forms) if pred.fuse_projections else {}
    fused = {**fused, **expert_groups((n, nf.node) for n, nf in forms)}
    done: set[int] = set()
    for ni, hits in hit_of.items():
        if ni in done:
            continue
        members = [index[m] for m in fused.get(forms[ni][0], ()) if m in index]
        if len(members) < 2 or not all(m in hit_of for m in members):
            members = [ni]
        done.update(members)
        for j, ((fam, _), pi, rep) in enumerate(hits):
            row, shares = fused_row([hit_of[m][j][0][1] for m in members])
            groups.setdefault((fam, dtype_key(fam, row)), []).append(
                (list(zip(members, shares, strict=True)), pi, row, rep)
            )
    rules = pred.moe_kernels or ()
    for (fam, key), items in groups.items():
        src = kernel_source(
            hw.name, pred.framework, fam, moe_kernel_key(key, hw, rules) if fam == "moe" else key
        )
        if not src.fits:
            for targets, *_ in items:
                for ni, _ in targets:
                    out[ni].source, out[ni].basis = "bound", src.basis
            continue
        p_cal, p_corr = price_rows(
            hw,
            pred.framework,
            fam,
            src,
            [it[2] for it in items],
            cold_l2=pred.cold_l2,
            grey_box=pred.kind == "grey-box",
            fp8_scales=pred.fp8_scales,
        )
        sec = p_corr if pred.kind == "grey-box" else p_cal
        # prefill attention the engine runs on another kernel: scaled by its measured ratio
        scaled = {
            ni: attention_backend_curve(
                forms[ni][1].node, hw, pred.attention_kernels or (), pred.framework, fam
            )
            for ni in {ni for targets, *_ in items for ni, _ in targets}
        }
        for (targets, pi, row, rep), s in zip(items, sec, strict=True):
            for ni, share in targets:
                t = out[ni]
                if t.values is None:
                    t.values = np.full(len(points), np.nan)
                    t.source, t.basis, t.family, t.key = src.source, src.basis, fam, src.key
                curve = scaled[ni]
                k = 1.0 if curve is None else curve[0].at(float(row["isl"]))
                t.values[pi] = float(s) * rep * share * k
    for ni, t in enumerate(out):  # attention the engine runs on a kernel no corpus row times
        if t.values is not None and t.family in ("context_attention", "generation_attention"):
            rules = pred.attention_kernels or ()
            note = attention_kernel_note(forms[ni][1].node, hw, rules, pred.framework)
            if note is not None:
                curve = attention_backend_curve(forms[ni][1].node, hw, rules, pred.framework, t.family)
                ratio = None if curve is None else curve[0].range_basis(curve[1])
                t.source, t.basis = "neighbour", "; ".join(b for b in (t.basis, note, ratio) if b)
    small = (
        small_kernel_groups(((n, nf.node) for n, nf in forms), pred.framework) if pred.small_kernels else {}
    )
    inside = expert_activations((n, nf.node) for n, nf in forms)  # timed within the fused-MoE kernel
    small = {n: ms for n, ms in small.items() if n not in inside}
    kernels: dict[tuple[str, ...], list[int]] = {}
    for ni, (n, _) in enumerate(forms):
        if ni not in hit_of and n in small:
            kernels.setdefault(small[n], []).append(ni)
    if kernels:  # each member's share of its kernel's floor; the step takes max(share, bound)
        floor = small_kernel_s(hw.name)
        basis = small_kernel_basis(hw.name)
        cols = [points[:, i] for i in range(points.shape[1])]
        for members in kernels.values():
            syms = forms[members[0]][1].syms
            roofs = np.array(
                [
                    np.broadcast_to(
                        np.asarray(
                            sympy.lambdify(syms, node_time_expr(forms[m][1].node, hw), "numpy")(*cols),
                            dtype=float,
                        ),
                        (len(points),),
                    )
                    for m in members
                ]
            )
            floors = small_kernel_floor(roofs, forms[members[0]][1].repeats(points), floor)
            for m, values in zip(members, floors, strict=True):
                out[m] = _Table(
                    forms[m][0],
                    "neighbour",
                    basis,
                    np.array(values, dtype=float),
                    clamp_basis=unmeasured_basis(forms[m][1].node, {}),
                )
    for t in out:
        if t.values is not None and not (np.all(np.isfinite(t.values)) and np.all(t.values > 0)):
            raise CostModelError(f"{t.name}: the {pred.label} is not a positive number on its grid")
    return out


class KernelIds:
    """Ids of (source, basis) pairs the iteration loop adds seconds to."""

    def __init__(self) -> None:
        self.pairs: list[tuple[str, str]] = []

    def coverage(self, seconds: list[float]) -> Coverage:
        """``seconds`` (one per pair, as counted) by what they rest on.

        Parameters
        ----------
        seconds : list of float
            Seconds per (source, basis) pair, in the table's order.

        Returns
        -------
        Coverage
        """
        parts = {"measured": 0.0, "neighbour": 0.0, "bound": 0.0}
        why: dict[str, dict[str, float]] = {"neighbour": {}, "bound": {}}
        for (src, basis), t in zip(self.pairs, seconds, strict=True):
            parts[src] += t
            if src in why and t > 0:
                why[src][basis] = why[src].get(basis, 0.0) + t
        return Coverage(parts["measured"], parts["neighbour"], parts["bound"], why["neighbour"], why["bound"])

    def __call__(self, source: str, basis: str) -> int:
        key = (source, basis if source != "measured" else "")
        if key not in self.pairs:
            self.pairs.append(key)
        return self.pairs.index(key)


class PredictedStep:
    """A mixed iteration (:class:`MixedStep`) with its measured kernels priced by a predictor
    through tables compiled once (module doc); the same interface as :class:`MixedStep`."""

    def __init__(self, w: Workload, hw: Hardware, tp: int, predictor: Predictor) -> None:
        if predictor.is_bound:
            raise CostModelError("the bound predictor is the MixedStep itself (predicted_mixed_step)")
        self.predictor = predictor
        self.hardware = hw
        self.tp = tp
        self.bound = mixed_step(w, hw, tp=tp)
        self.windowed = self.bound.windowed  #: a sliding-window kernel needs each decode's context
        self.shared_body = self.bound.shared_body  #: False: MLA (prefill tokens run their own kernels)
        g_dec = compiled_step(w, hw, Phase.DECODE, tp=tp).graph
        g_pre = compiled_step(w, hw, Phase.PREFILL, tp=tp).graph
        assert g_dec is not None and g_pre is not None
        ids = self._ids = KernelIds()
        self.clamped_id = ids("bound", CLAMPED)
        # ---- token-wise kernels (body at N tokens) and the head (R rows): one grid
        grid = token_grid()
        self.token_grid = grid
        self._lgrid = np.log(grid).tolist()
        tok_names = [n for n in op_nodes(g_dec) if g_dec.nodes[n].get(ROLE) != Role.ATTENTION]
        #: MLA: the token-wise kernels decode and prefill tokens share (run once over an
        #: iteration's tokens; :func:`graphs.serving.step.mixed.split_bodies`)
        self._shared_names = frozenset() if self.shared_body else split_bodies(g_dec, g_pre, hw)
        pts = np.stack([grid, np.full_like(grid, 1.0)], axis=1)  # (B, ctx): ctx enters no token-wise kernel
        tables = tabulate(hw, predictor, g_dec, (B_sym, ctx_sym), tok_names, pts)
        lumps: dict[int, sympy.Expr] = {}
        lumps_head: dict[int, sympy.Expr] = {}
        lumps_shared: dict[int, sympy.Expr] = {}
        exprs, heads, logs, kid, cid, shared = [], [], [], [], [], []
        for t in tables:
            d = g_dec.nodes[t.name]
            e = node_time_expr(d, hw)
            is_head = d.get(GROUP) == HEAD_GROUP
            if t.values is None:
                bucket = lumps_head if is_head else lumps_shared if t.name in self._shared_names else lumps
                i = ids("bound", t.basis)
                bucket[i] = bucket.get(i, sympy.Integer(0)) + e
                continue
            exprs.append(e)
            heads.append(is_head)
            shared.append(t.name in self._shared_names)
            logs.append(np.log(t.values))
            kid.append(ids(t.source, t.basis))
            cid.append(ids("bound", t.below_bound))
        self.kernel_names = [t.name for t in tables if t.values is not None]
        # per kernel (head?, id, log-seconds on the grid) as plain lists: a few kernels per
        # iteration are cheaper in floats than in numpy calls
        self._rows = [(h, i, row.tolist()) for h, i, row in zip(heads, kid, logs, strict=True)]
        self._clamp_ids = cid  #: per kernel row, where its clamped seconds go
        self._row_shared = shared  #: per kernel row: one both paths share (MLA)
        rows_sym = dim("rows")
        self._roof = sympy.lambdify(
            (B_sym, rows_sym),
            [e.subs(B_sym, rows_sym) if h else e for e, h in zip(exprs, heads, strict=True)],
            "math",
        )
        self._lumps = [(i, sympy.lambdify(B_sym, e, "math"), False) for i, e in lumps.items()]
        self._lumps += [(i, sympy.lambdify(B_sym, e, "math"), True) for i, e in lumps_head.items()]
        #: MLA: the bound-priced shared kernels (with the split, a mixed iteration prices them at
        #: all its tokens; otherwise as the decode body's others)
        self._lumps_shared = [(i, sympy.lambdify(B_sym, e, "math")) for i, e in lumps_shared.items()]
        # ---- attention: decode at (D, mean ctx), prefill chunks at c (no prefix)
        a_names = [n for n in op_nodes(g_dec) if g_dec.nodes[n].get(ROLE) == Role.ATTENTION]
        if len(a_names) != len(self.bound.attention):
            raise CostModelError("internal: attention nodes differ from the mixed step's")
        dg = token_grid(256, 2**12, 2)
        cg = token_grid(1, 2**18, 2)
        cg = cg[cg >= 2]
        self.decode_grid = (dg, cg)
        self._ldg, self._lcg = np.log(dg).tolist(), np.log(cg).tolist()
        mesh = np.stack(np.meshgrid(dg, cg, indexing="ij"), axis=-1).reshape(-1, 2)
        dec_tabs = tabulate(hw, predictor, g_dec, (B_sym, ctx_sym), a_names, mesh)
        pre_names = [n for n in op_nodes(g_pre) if g_pre.nodes[n].get(ROLE) == Role.ATTENTION]
        if sorted(pre_names) != sorted(a_names):
            raise CostModelError("internal: the prefill graph's attention nodes differ from decode's")
        pre_pts = np.stack([np.ones_like(grid), grid], axis=1)  # (B, S) = (1, c)
        pre_tabs = {t.name: t for t in tabulate(hw, predictor, g_pre, (B_sym, S_sym), a_names, pre_pts)}
        self._attn: list[tuple[Any, np.ndarray | None, int, np.ndarray | None, int]] = []
        for k, t in zip(self.bound.attention, dec_tabs, strict=True):
            pt = pre_tabs[t.name]
            self._attn.append(
                (
                    k,
                    None if t.values is None else np.log(t.values).reshape(len(dg), len(cg)),
                    ids(t.source, t.basis),
                    None if pt.values is None else np.log(pt.values),
                    ids(pt.source, pt.basis),
                )
            )
        self.attention_names = a_names
        self._prefix_id = ids("bound", _CHUNK_PREFIX)
        #: per attention node, where a prefix chunk's seconds go: this neighbour and what the
        #: q = kv kernel it is scaled from rests on
        self._prefix_scaled_ids = [
            ids("neighbour", "; ".join(b for b in (_CHUNK_PREFIX_SCALED, pre_tabs[n].basis) if b))
            for n in a_names
        ]
        self._pre_body: list[tuple[int, int, list[float]]] = []
        if not self.shared_body:
            self._chunk_body_tables(g_pre, grid, pre_pts)
        self.reset()

    def _chunk_body_tables(self, g_pre: Any, grid: np.ndarray, pre_pts: np.ndarray) -> None:
        """A model whose prefill tokens run other token-wise kernels than its decode tokens
        (MLA: K/V decompressed for prefill, the projections absorbed for decode): the prefill
        graph's token-wise kernels of one chunk of ``c`` tokens with no cached prefix, on the
        token grid (``(B, S) = (1, c)``); after a cached prefix the chunk's body keeps its bound
        (:data:`_CHUNK_BODY_PREFIX`)."""
        hw, ids = self.hardware, self._ids
        names = [
            n
            for n in op_nodes(g_pre)
            if g_pre.nodes[n].get(ROLE) != Role.ATTENTION and g_pre.nodes[n].get(GROUP) != HEAD_GROUP
        ]
        lump: dict[int, sympy.Expr] = {}
        lump_own: dict[int, sympy.Expr] = {}
        exprs, own = [], []
        for t in tabulate(hw, self.predictor, g_pre, (B_sym, S_sym), names, pre_pts):
            e = node_time_expr(g_pre.nodes[t.name], hw).subs(B_sym, 1)
            mine = t.name not in self._shared_names  # the prefill path's own kernel
            if t.values is None:
                i = ids("bound", t.basis)
                lump[i] = lump.get(i, sympy.Integer(0)) + e
                if mine:
                    lump_own[i] = lump_own.get(i, sympy.Integer(0)) + e
                continue
            exprs.append(e)
            entry = (ids(t.source, t.basis), ids("bound", t.below_bound), np.log(t.values).tolist())
            self._pre_body.append(entry)
            if mine:
                own.append((entry, e))
        self._pre_roof = sympy.lambdify(S_sym, exprs, "math")
        self._pre_lumps = [(i, sympy.lambdify(S_sym, e, "math")) for i, e in lump.items()]
        self._pre_prefix_id = ids("bound", _CHUNK_BODY_PREFIX)
        #: the prefill path's own kernels alone (MLA's K/V decompression), as the three above
        self._pre_own = [entry for entry, _ in own]
        self._pre_own_roof = sympy.lambdify(S_sym, [e for _, e in own], "math")
        self._pre_own_lumps = [(i, sympy.lambdify(S_sym, e, "math")) for i, e in lump_own.items()]

    def _tabled(self, c: float, entries: list[Any], roof: Any, lumps: list[Any]) -> float:
        """Seconds of prefill-graph kernels over ``c`` new tokens without a prefix: each tabled
        kernel ``(id, clamped id, log-seconds on the token grid)`` of ``entries`` interpolated at
        ``c`` and held at its bound ``roof(c)``, the unmeasured ones (``lumps``) at their bound."""
        acc = self._acc
        i, w = lerp_at(self._lgrid, math.log(c))
        total = 0.0
        for (kid, cid, lt), r in zip(entries, roof(c), strict=True):
            p = math.exp(lt[i] + (lt[i + 1] - lt[i]) * w)
            if p < r:
                acc[cid] += r
                total += r
            else:
                acc[kid] += p
                total += p
        for i_, f in lumps:
            x = float(f(c))
            acc[i_] += x
            total += x
        return total

    def _pre_own_body(self, c: float, pre: float) -> float:
        """Seconds of the prefill path's own token-wise kernels (MLA's K/V decompression) over
        ``c`` new tokens of an iteration's chunks after ``pre`` cached ones: measured at ``c``
        without a prefix, else the bound (:meth:`_chunk_body_tables`)."""
        if pre:
            x = float(self.bound._split[2](c, pre))
            self._acc[self._pre_prefix_id] += x
            return x
        return self._tabled(c, self._pre_own, self._pre_own_roof, self._pre_own_lumps)

    def _split_body(self, n_dec: int, chunks: Sequence[tuple[float, float]], rows: int) -> float:
        """MLA's token-wise kernels and head of an iteration with decodes and chunks, several
        chunks, or a chunk after a cached prefix (:meth:`graphs.serving.step.mixed.MixedStep.time_sums`;
        before, such a chunk's whole body was priced at its bound): the kernels both paths
        share at all ``N = D + sum c`` tokens, the decode's own at ``D``, the prefill's own at the
        chunks' ``sum c`` (after their ``sum p`` cached tokens), the head at ``rows``; each measured
        kernel at ``max(prediction, bound)``."""
        c_tok = sum(c for c, _ in chunks)
        return self._token_wise(n_dec + c_tok, n_dec, rows) + self._pre_own_body(
            c_tok, sum(p for _, p in chunks)
        )

    def _token_wise(self, n_shared: float, n_own: float, rows: int) -> float:
        """The decode graph's token-wise kernels and head: the kernels both paths share (MLA,
        :attr:`_row_shared`; none for other models) at ``n_shared`` tokens, the others at ``n_own``
        (none at 0), the head at ``rows``; each measured kernel at ``max(prediction, bound)``, the
        unmeasured ones at their bound."""
        acc = self._acc
        m = max(n_shared, 1)  # no token: only the head's kernels of the table run
        at = zip(self._token_preds(m, rows), self._roof(m, rows), strict=True)
        own = (
            zip(self._token_preds(n_own, rows), self._roof(n_own, rows), strict=True)
            if n_own and n_own != n_shared
            else None
        )
        total = 0.0
        for (head, kid, _), shared, clamped, (p, r) in zip(
            self._rows, self._row_shared, self._clamp_ids, at, strict=True
        ):
            po = next(own) if own is not None else None
            if not head and not (n_shared if shared else n_own):
                continue
            if not (head or shared) and po is not None:  # this path's own kernel, at its tokens
                p, r = po
            if p < r:
                acc[clamped] += r
                total += r
            else:
                acc[kid] += p
                total += p
        for i, f, head in self._lumps:
            if not (head or n_own):
                continue
            x = float(f(rows if head else n_own))
            acc[i] += x
            total += x
        for i, f in self._lumps_shared if n_shared else ():
            x = float(f(n_shared))
            acc[i] += x
            total += x
        return total

    def _chunk_body(self, c: float) -> float:
        """Seconds of a lone chunk's token-wise kernels without a cached prefix (MLA: the whole
        prefill body, :meth:`_chunk_body_tables`; any other chunk: :meth:`_split_body`)."""
        return self._tabled(c, self._pre_body, self._pre_roof, self._pre_lumps)

    # ------------------------------------------------------------------ the iteration loop
    def reset(self) -> None:
        """Start counting seconds by what they rest on afresh (one simulation)."""
        self._acc = [0.0] * len(self._ids.pairs)

    def coverage(self) -> Coverage:
        """The seconds priced since :meth:`reset`, by what they rest on.

        Returns
        -------
        Coverage
            Seconds (s) resting on measured, neighbour and bound pricing.
        """
        return self._ids.coverage(self._acc)

    def recorded(self) -> list[float]:
        """The seconds counted so far, per (source, basis) pair: a mark for :meth:`take_off`.

        Returns
        -------
        list of float
            Seconds per (source, basis) pair.
        """
        return list(self._acc)

    def take_off(self, other: PredictedStep, mark: list[float]) -> None:
        """Move the seconds ``other`` counted since ``mark`` (its :meth:`recorded`) off this step's
        counts, pair by pair of what they rest on, and set ``other``'s back to ``mark``: a forward
        priced as this step minus ``other`` (MTP's module) is then counted once, as itself.

        Parameters
        ----------
        other : PredictedStep
            The step whose seconds are moved off this one's counts.
        mark : list of float
            ``other``'s :meth:`recorded` before the forward.

        Raises
        ------
        CostModelError
            When ``other`` counted seconds this step does not hold (an internal error).
        """
        for i, pair in enumerate(other._ids.pairs):
            d = other._acc[i] - mark[i]
            if not d:
                continue
            if pair not in self._ids.pairs:  # every kernel of the step subtracted is one of this one's
                raise CostModelError(f"internal: no {pair[0]} seconds of {pair[1]!r} to take off")
            self._acc[self._ids.pairs.index(pair)] -= d
        other._acc[:] = mark

    @property
    def clamped_s(self) -> float:
        """Seconds since :meth:`reset` where a prediction fell below its bound (clamped)."""
        return float(self._acc[self.clamped_id])

    def tokens_table(self, n: float, rows: float) -> np.ndarray:
        """Each tabulated token-wise kernel's interpolated prediction (s, before the clamp) at
        ``n`` tokens (the head's at ``rows``), in :attr:`kernel_names` order.

        Parameters
        ----------
        n : float
            Tokens through the token-wise kernels.
        rows : float
            Rows the lm_head computes.

        Returns
        -------
        numpy.ndarray
            Seconds per tabulated kernel.
        """
        return np.array(self._token_preds(n, rows))

    def _token_preds(self, n: float, rows: float) -> list[float]:
        lg = self._lgrid
        i, w = lerp_at(lg, math.log(n))
        j, v = (i, w) if rows == n else lerp_at(lg, math.log(rows))
        out = []
        for head, _, lt in self._rows:
            a, b = (j, v) if head else (i, w)
            out.append(math.exp(lt[a] + (lt[a + 1] - lt[a]) * b))
        return out

    def decode_attention(self, k: int, n_dec: int, mean_ctx: float) -> float | None:
        """Attention node ``k``'s interpolated prediction (s) for ``n_dec`` decodes at a mean context.

        Parameters
        ----------
        k : int
            The attention node's index.
        n_dec : int
            Decodes.
        mean_ctx : float
            Their mean KV length (tokens).

        Returns
        -------
        float or None
            Seconds, or None when no measured kernel prices it.
        """
        tab = self._attn[k][1]
        if tab is None:
            return None
        i, w = lerp_at(self._ldg, math.log(n_dec))
        j, v = lerp_at(self._lcg, math.log(mean_ctx))
        lo = tab[i, j] * (1 - v) + tab[i, j + 1] * v
        hi = tab[i + 1, j] * (1 - v) + tab[i + 1, j + 1] * v
        return math.exp(lo * (1 - w) + hi * w)

    def chunk_attention(self, k: int, c: float) -> float | None:
        """Attention node ``k``'s interpolated prediction (s) for a chunk of ``c`` tokens, no prefix.

        Parameters
        ----------
        k : int
            The attention node's index.
        c : float
            Chunk tokens.

        Returns
        -------
        float or None
            Seconds, or None when no measured kernel prices it.
        """
        tab = self._attn[k][3]
        if tab is None:
            return None
        i, w = lerp_at(self._lgrid, math.log(c))
        return math.exp(tab[i] * (1 - w) + tab[i + 1] * w)

    def prefix_chunk_attention(self, k: int, c: float, pre: float) -> float | None:
        """Attention node ``k``'s price (s) for a chunk of ``c`` tokens after ``pre`` cached ones:
        the ``q = kv`` kernel at ``pre + c`` tokens scaled by the ratio of the two roofline bounds,
        at most ``c`` decodes at ``pre + c`` (where ``c`` is on the decode table), and at least
        the ``q = kv`` kernel at ``c`` and one decode at ``pre + c`` (module doc).

        Parameters
        ----------
        k : int
            The attention node's index.
        c : float
            Chunk tokens.
        pre : float
            Cached tokens before the chunk.

        Returns
        -------
        float or None
            Seconds, or None when no measured kernel prices the ``q = kv`` shape.
        """
        whole = self.chunk_attention(k, c + pre)
        if whole is None:
            return None
        kern = self._attn[k][0]
        scaled = whole * kern.time(0, 0.0, ((c, pre),)) / kern.time(0, 0.0, ((c + pre, 0.0),))
        if c <= self.decode_grid[0][-1]:  # within the decode table: no extrapolation
            # at most c decodes at p + c (each query its own KV read): the decode path engines
            # take for a few tokens after a long prefix
            many = self.decode_attention(k, max(1, round(c)), c + pre)
            if many is not None:
                scaled = min(scaled, many)
        own = self.chunk_attention(k, c) if c >= 2 else None  # a 1-token chunk: the decode floor alone
        one = self.decode_attention(k, 1, c + pre)
        return max(x for x in (scaled, own, one) if x is not None)

    def max_tokens_per_s(self, budget: int, overhead_s: float = 0.0) -> float:
        """The bound's ceiling (:meth:`MixedStep.max_tokens_per_s`): a predicted iteration is
        never faster than its bound, so the ceiling holds for it too.

        Parameters
        ----------
        budget : int
            Tokens per iteration at most.
        overhead_s : float
            Fixed seconds added to every iteration.

        Returns
        -------
        float
            Tokens per second.
        """
        return self.bound.max_tokens_per_s(budget, overhead_s)

    def time(
        self, decode_ctx: Sequence[int] | np.ndarray = (), chunks: Sequence[tuple[int, int]] = ()
    ) -> float:
        """Seconds for one iteration (:meth:`MixedStep.time`), predicted.

        Parameters
        ----------
        decode_ctx : sequence of int or numpy.ndarray
            Each decode's KV length (tokens).
        chunks : sequence of (int, int)
            Prefill chunks as ``(new tokens, cached prefix tokens)``.

        Returns
        -------
        float
            Seconds for the iteration.
        """
        return time_from_contexts(self, decode_ctx, chunks)

    def time_sums(
        self,
        n_dec: int,
        sum_ctx: float,
        chunks: Sequence[tuple[float, float]] = (),
        ctxs: Sequence[float] | None = None,
        logit_rows: int = 0,
    ) -> float:
        """:meth:`MixedStep.time_sums`, each measured kernel at ``max(prediction, bound)``
        (``logit_rows``: lm_head rows beyond one per sequence, as there).

        Parameters
        ----------
        n_dec : int
            Decodes in the iteration.
        sum_ctx : float
            The sum of their KV lengths (tokens).
        chunks : sequence of (float, float)
            Prefill chunks as ``(new tokens, cached prefix tokens)``.
        ctxs : sequence of float, optional
            Each decode's KV length (sliding-window models).
        logit_rows : int
            lm_head rows beyond one per sequence.

        Returns
        -------
        float
            Seconds for the iteration.
        """
        if n_dec + len(chunks) == 0:
            return 0.0
        rows = n_dec + len(chunks) + logit_rows  # the head's rows
        if not self.shared_body and chunks and (n_dec or len(chunks) > 1 or chunks[0][1]):
            # MLA with decodes beside its chunks, several chunks, or a chunk after a cached prefix
            # (its shared kernels measured, only the K/V decompression at its bound)
            return self._split_body(n_dec, chunks, rows) + self._attention(n_dec, sum_ctx, chunks, ctxs)
        # the token-wise body: every token's (one path), or the decodes' (MLA: one chunk alone,
        # without a cached prefix: _chunk_body)
        n = n_dec + sum(c for c, _ in chunks) if self.shared_body else n_dec
        total = self._token_wise(n, n, rows)
        if not self.shared_body:
            for c, _ in chunks:  # MLA: at most one chunk, alone, no prefix (the others: _split_body)
                total += self._chunk_body(c)
        return total + self._attention(n_dec, sum_ctx, chunks, ctxs)

    def _attention(
        self, n_dec: int, sum_ctx: float, chunks: Sequence[tuple[float, float]], ctxs: Sequence[float] | None
    ) -> float:
        """The iteration's attention kernels (:meth:`time_sums`), each at ``max(prediction, bound)``."""
        acc = self._acc
        total = 0.0
        for k, (kern, dtab, did, ptab, pid) in enumerate(self._attn):
            roof_k = kern.time(n_dec, sum_ctx, chunks, ctxs)
            if dtab is None and ptab is None:
                acc[did] += roof_k
                total += roof_k
                continue
            parts: list[tuple[int, float]] = []
            if n_dec:
                pd = self.decode_attention(k, n_dec, sum_ctx / n_dec)
                parts.append((did, pd if pd is not None else kern.time(n_dec, sum_ctx, (), ctxs)))
            for c, pre in chunks:
                if pre == 0:
                    pc = self.chunk_attention(k, c)
                    parts.append((pid, pc if pc is not None else kern.time(0, 0.0, ((c, pre),))))
                    continue
                pc = self.prefix_chunk_attention(k, c, pre)
                if pc is None:
                    parts.append((self._prefix_id, kern.time(0, 0.0, ((c, pre),))))
                else:
                    parts.append((self._prefix_scaled_ids[k], pc))
            s = sum(x for _, x in parts)
            if s < roof_k:
                acc[self.clamped_id] += roof_k
                total += roof_k
            else:
                for i, x in parts:
                    acc[i] += x
                total += s
        return total


_CACHE: BoundedCache[PredictedStep] = BoundedCache("predicted_step", 64)


def predicted_mixed_step(
    config: ModelConfig | str | Workload,
    device: Hardware | str,
    *,
    tp: int = 1,
    predictor: Predictor | None = None,
) -> IterationStep:
    """The mixed iteration priced by ``predictor``: the bound's :class:`MixedStep` itself for
    the bound (the identity on its numbers), else a :class:`PredictedStep` built once per
    (model, device, tp, predictor) in this process.

    Parameters
    ----------
    config : ModelConfig, str or Workload
        The model.
    device : Hardware or str
        The device.
    tp : int
        Tensor-parallel degree.
    predictor : Predictor, optional
        The kernel predictor (default: the bound).

    Returns
    -------
    IterationStep
        A :class:`MixedStep` or :class:`PredictedStep`; both price an iteration's mix (s).
    """
    w = as_workload(config)
    hw = get_device(device)
    pred = predictor or Predictor()
    if pred.is_bound:
        return mixed_step(w, hw, tp=tp)
    return _CACHE.get_or_build((w.config, hw, tp, pred), lambda: PredictedStep(w, hw, tp, pred))
