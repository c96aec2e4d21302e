"""Attention data parallel with the MoE layers over the whole group: vLLM's
``--data-parallel-size D`` (with ``--enable-expert-parallel``) and TensorRT-LLM's attention-DP
("DEP") deployments of a mixture-of-experts model.

**What runs where** (vLLM, "Data Parallel Deployment" and "Expert Parallel Deployment",
docs.vllm.ai/en/latest/serving/): ``D`` data-parallel ranks of ``t`` devices each. Every rank is
an engine of its own, with its own scheduler, waiting queue and KV cache, and its attention and
dense layers (tensor-parallel over its ``t`` devices). The expert layers span all ``D t``
devices: by default "a (DP x TP) sized tensor parallel group" (each expert's width split
``D t`` ways), or with ``--enable-expert-parallel`` "expert parallelism" (each device holds
``E / (D t)`` whole experts). The ranks "are not completely independent. Forward passes must be
aligned, and expert layers across all ranks are required to synchronize during every forward
pass": a rank with nothing scheduled runs a dummy forward pass while any rank has requests.

**One iteration of the group.** With ``b_r`` the batch of rank ``r`` (its decodes and prefill
chunks) and ``T = sum_r n_r`` the tokens of all ranks, the iteration takes

.. math::

    t = \\max_r \\left[ t_{rank}(b_r) - X_t(n_r) + o_r \\right]
        + X_{D t}(T) + L_{moe} \\left( t_{dispatch}(T) + t_{combine}(T) \\right)

with ``t_rank`` the rank's whole step at tensor parallelism ``t`` (the predictor's or the
bound's: :class:`~graphs.serving.step.mixed.MixedStep`, :class:`~graphs.serving.pricing.predictor.PredictedStep`),
``X_t(n)`` its routed-expert kernels at ``n`` tokens (the expert GEMMs and the activation inside
the fused-MoE kernel, priced exactly as the rank's step prices them, so the difference is the
rank's attention and dense kernels), ``o_r`` the rank's CPU terms (:mod:`graphs.serving.pricing.overheads`),
``X_{Dt}(T)`` the same kernels for the whole group's tokens on the ``D t`` devices (expert
parallel: the busiest device's share of the ``T k`` routed token-expert pairs under uniform
routing, :func:`graphs.serving.step.expert_routing.busiest_rank`; else every expert ``D t``-way split) and
``L_moe`` the MoE layers. The dispatch and combine of the tokens follow vLLM's default
all2all backend, ``allgather_reducescatter`` ("Standard all2all using allgather/reducescatter
primitives", the expert-parallel page's backend table): an all-gather of the ``T x d``
activations over the ``D`` ranks before the experts and a reduce-scatter after them; ``all_to_all``
(DeepEP / pplx, or TensorRT-LLM's all-to-all) sends each token's activations once to every
device holding one of its ``k`` experts (:func:`~graphs.serving.step.expert_routing.devices_reached` of them on average) and back.
A predictor prices the all-gather and the reduce-scatter (whole tensors of ``T d`` elements over
the ``D`` ranks: nccl-tests' message size) by the device's own NCCL measurements
(:func:`costmodel.measured.collectives.collective_curve`), each at least its roofline bound over
the link spanning ``D t`` devices; what has no measurements (the all-to-all kernels, which are
not NCCL's; a device or GPU count the corpus does not time) and the bound predictor keep that
bound, and the coverage line says which. A fitted kernel scale applies to the stage as to the
ranks' kernels, never below the stage's bound.

**Expert parallelism inside the tp group** (``D = 1``: vLLM's ``--enable-expert-parallel``
beside ``--tensor-parallel-size t`` alone, SGLang's ``--ep-size t`` with ``--tp-size t``): the one
rank's attention and dense layers are tensor-parallel as ever, its experts whole on the ``t``
devices; every device holds every token after the attention's all-reduce and the experts'
outputs are summed by the same all-reduce that ends the tensor-parallel MoE layer, so the
iteration is ``t_rank(b) - X_t(n) + o + X_t^{EP}(n)``: the width-split experts swapped for the
busiest device's whole ones, no dispatch or combine (an all-to-all needs ``D > 1``).

**Load balancing.** A request goes to the rank with the smallest ``4 waiting + running``
(vLLM's ``DPLBAsyncMPClient``, ``vllm/v1/engine/core_client.py``: ``score = waiting * 4 +
running``; ties to the lower rank), read live (vLLM's coordinator publishes the counts every
100 ms: not modelled). SGLang's data-parallel controller deals them in turn instead
(``--load-balance-method`` ``round_robin``, its default: ``python/sglang/srt/server_args.py``), the
SGLang profiles' ``dp_load_balance`` (:class:`~graphs.serving.engines.knobs.EngineConfig`). A rank's dummy forward passes are not priced: they are never the
slowest of a step where another rank has work.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import sympy

from costmodel.cost import as_float
from costmodel.dtypes import get_dtype
from costmodel.errors import CostModelError
from costmodel.graph import op_nodes
from costmodel.hardware import Hardware
from costmodel.keys import ROLE, Phase, Role
from costmodel.measured.collectives import collective_curve
from costmodel.roofline import bound
from costmodel.rules import op_cost
from costmodel.symbols import B as B_sym
from costmodel.symbols import ctx as ctx_sym
from models.config import MoESpec

from ..engines.knobs import scaled_kernels_s
from ..pricing.kernel_sources import CLAMPED, Coverage
from ..pricing.predict import expert_activations
from ..pricing.predictor import KernelIds, Predictor, lerp_at, predicted_mixed_step, tabulate, token_grid
from ..pricing.protocols import IterationStep
from ..step.compiled import compiled_step
from ..step.expert_routing import devices_reached
from ..step.mixed import node_time_expr
from ..step.workload import Workload
from .skipping import window_ends

if TYPE_CHECKING:
    from .engine import Replica
    from .engine import Sequence as Seq

__all__ = [
    "DISPATCHES",
    "DISPATCH_BASIS",
    "dispatch_basis",
    "ExpertKernels",
    "ExpertStage",
    "LockstepGroup",
    "RankStep",
    "MeteredRankStep",
    "dp_line",
    "experts_line",
    "check_group",
    "expert_nodes",
    "group_step",
    "rank_step",
]

#: how the MoE layers' tokens reach their experts and come back (module doc)
DISPATCHES = ("allgather_reducescatter", "all_to_all")
#: what the dispatch and combine seconds rest on under the bound predictor (no measured kernels)
DISPATCH_BASIS = "MoE dispatch and combine across the data-parallel group (all-gather / reduce-scatter or all-to-all): not measured"


def dispatch_basis(all_to_all: bool, device: str, gpus: int) -> str:
    """Why a predictor's MoE dispatch or combine collective ``op`` over ``gpus`` devices sits at its
    bound: the engines' all-to-all kernels (DeepEP, pplx, TensorRT-LLM's) are not NCCL's, and the
    corpus's ``moe_a2a`` rows time wide-EP DeepEP at ``ep`` 8 alone; an all-gather or
    reduce-scatter has no NCCL rows of that device and GPU count.

    Parameters
    ----------
    all_to_all : bool
        The dispatch is an all-to-all (else an all-gather and a reduce-scatter).
    device : str
        The device's catalog name.
    gpus : int
        The devices the collective spans.

    Returns
    -------
    str
    """
    if all_to_all:
        return "MoE dispatch and combine by all-to-all (DeepEP, pplx, TensorRT-LLM's kernels): not measured"
    return f"MoE dispatch and combine by all-gather / reduce-scatter: no NCCL measurements of {gpus} {device} GPUs"

#: how each ``dp_load_balance`` picks a rank, as the output says it
BALANCERS = {
    "score": "vLLM's balancer: fewest 4 x waiting + running",
    "round_robin": "SGLang's balancer: each rank in turn",
}
#: vLLM's load-balancing score weight of a waiting request against a running one (module doc)
WAITING_WEIGHT = 4


def expert_nodes(g: Any) -> list[str]:
    """The routed-expert kernels of graph ``g``: its ``expert`` nodes and the activations timed
    inside the fused-MoE kernel (:func:`graphs.serving.pricing.predict.expert_activations`).

    Parameters
    ----------
    g : Any
        A compiled decode graph (a networkx graph of the step's kernels).

    Returns
    -------
    list of str
        The routed-expert kernels' node names, in the graph's operator order.
    """
    ops = list(op_nodes(g))
    inside = expert_activations((n, g.nodes[n]) for n in ops)
    return [n for n in ops if g.nodes[n].get(ROLE) == Role.EXPERT or n in inside]


class ExpertKernels:
    """The routed-expert kernels of one decode graph at ``n`` tokens, priced as the step's
    token-wise body prices them (:class:`~graphs.serving.pricing.predictor.PredictedStep`: each
    tabulated kernel at ``max(prediction, bound)``, the rest at their bound; the bound alone
    for the roofline), with the seconds counted by what they rest on."""

    def __init__(self, g: Any, hw: Hardware, predictor: Predictor) -> None:
        self.names = expert_nodes(g)
        if not self.names:
            raise CostModelError("the model has no routed experts: data-parallel attention with experts over the group needs an MoE model")
        self.hardware = hw
        exprs = [node_time_expr(g.nodes[n], hw) for n in self.names]
        self._bound = sympy.lambdify(B_sym, sympy.Add(*exprs), "math")
        self.metered = not predictor.is_bound
        self._ids = KernelIds()
        self.clamped_id = self._ids("bound", CLAMPED)
        self._rows: list[tuple[int, int, list[float], Any]] = []
        self._lumps: list[tuple[int, Any]] = []
        if self.metered:
            grid = token_grid()
            self._lgrid = np.log(grid).tolist()
            pts = np.stack([grid, np.full_like(grid, 1.0)], axis=1)
            lumps: dict[int, sympy.Expr] = {}
            for t, e in zip(tabulate(hw, predictor, g, (B_sym, ctx_sym), self.names, pts), exprs, strict=True):
                if t.values is None:
                    i = self._ids("bound", t.basis)
                    lumps[i] = lumps.get(i, sympy.Integer(0)) + e
                    continue
                self._rows.append(
                    (self._ids(t.source, t.basis), self._ids("bound", t.below_bound), np.log(t.values).tolist(),
                     sympy.lambdify(B_sym, e, "math"))
                )
            self._lumps = [(i, sympy.lambdify(B_sym, e, "math")) for i, e in lumps.items()]
        self.reset()

    def reset(self) -> None:
        """Start counting seconds afresh (one simulation)."""
        self._acc = [0.0] * len(self._ids.pairs)

    def bound_s(self, n: float) -> float:
        """The kernels' roofline bound at ``n`` tokens (s).

        Parameters
        ----------
        n : float
            Tokens through the experts (0 or fewer: 0 s).

        Returns
        -------
        float
        """
        return float(self._bound(n)) if n > 0 else 0.0

    def time(self, n: float, weight: float = 1.0) -> float:
        """Seconds of the kernels at ``n`` tokens; counted ``weight`` times by what they rest on.

        Parameters
        ----------
        n : float
            Tokens through the experts (0 or fewer: 0 s).
        weight : float
            How many times the seconds count in :meth:`coverage` (the ranks waiting through them).

        Returns
        -------
        float
            The kernels' time (s), each at ``max(prediction, bound)``.
        """
        if n <= 0:
            return 0.0
        if not self.metered:
            return self.bound_s(n)
        acc, total = self._acc, 0.0
        i, w = lerp_at(self._lgrid, math.log(n))
        for kid, cid, lt, roof in self._rows:
            p = math.exp(lt[i] + (lt[i + 1] - lt[i]) * w)
            r = float(roof(n))
            x, slot = (r, cid) if p < r else (p, kid)
            acc[slot] += weight * x
            total += x
        for slot, f in self._lumps:
            x = float(f(n))
            acc[slot] += weight * x
            total += x
        return total

    def coverage(self) -> Coverage:
        """The seconds counted since :meth:`reset`, by what they rest on."""
        return self._ids.coverage(self._acc)

    @property
    def clamped_s(self) -> float:
        return float(self._acc[self.clamped_id])


class ExpertStage:
    """The group's shared part of an iteration: the experts at the whole group's tokens and the
    dispatch and combine around them (module doc), counted once per rank that steps."""

    def __init__(
        self, w: Workload, hw: Hardware, dp: int, tp: int, expert_parallel: bool, dispatch: str, predictor: Predictor
    ) -> None:
        if dispatch not in DISPATCHES:
            raise CostModelError(f"moe dispatch must be one of {', '.join(DISPATCHES)}, got {dispatch!r}")
        cfg = w.config
        moe = cfg.need(MoESpec)
        self.dp, self.tp, self.expert_parallel, self.dispatch = dp, tp, expert_parallel, dispatch
        group = dp * tp
        g = (
            compiled_step(w, hw, Phase.DECODE, tp=1, ep=group).graph
            if expert_parallel
            else compiled_step(w, hw, Phase.DECODE, tp=group).graph
        )
        self.experts = ExpertKernels(g, hw, predictor)
        link = hw.group_link(group)
        d, layers = cfg.hidden_size, as_float(cfg.n_moe_layers)
        act = cfg.activation_dtype
        # (rule, elements at B_sym group tokens, devices spanned) of one MoE layer's dispatch and combine
        parts: list[tuple[str, sympy.Expr, int]]
        if dispatch == "allgather_reducescatter":  # every rank gathers all T tokens, then scatters the sums
            n = B_sym * d
            parts = [("all_gather", n, dp), ("reduce_scatter", n, dp)] if dp > 1 else []
        else:  # each token's activations once to every device holding one of its k experts, and back
            reach = devices_reached(int(as_float(moe.num_experts)), int(as_float(moe.num_experts_per_tok)), group)
            parts = [("all_to_all", B_sym / dp * reach * d, group)] * 2
        self._layers = layers
        self._parts: list[tuple[Any, Any, Any]] = []  # (elements, bound, measured curve or None)
        bases: set[str] = set()
        roofs = []
        for op, n_expr, p in parts:
            roof = bound(op_cost(op, elements=n_expr, p=p, dtype=act, link=link), hw).lower
            roofs.append(roof)
            nccl = dispatch == "allgather_reducescatter"  # the engines' all-to-all is not NCCL's
            curve = (
                None
                if predictor.is_bound or not nccl
                else collective_curve(hw.name, op, p, int(as_float(get_dtype(act).bytes)))
            )
            if curve is None and not predictor.is_bound:
                bases.add(dispatch_basis(not nccl, hw.name, p))
            self._parts.append(
                (sympy.lambdify(B_sym, n_expr, "math"), sympy.lambdify(B_sym, roof, "math"), curve)
            )
        self._comm = sympy.lambdify(B_sym, layers * sympy.Add(*roofs), "math")
        #: what the dispatch and combine seconds at their bound rest on (the coverage's reason)
        self.comm_basis = "; ".join(sorted(bases)) or DISPATCH_BASIS
        self.link = link
        self.reset()

    def reset(self) -> None:
        """Start counting seconds afresh (one simulation)."""
        self.experts.reset()
        self._comm_s = 0.0
        self._comm_measured_s = 0.0
        self._comm_clamped_s = 0.0

    def bound_s(self, tokens: float) -> float:
        """The stage's roofline bound at the group's ``tokens`` (s).

        Parameters
        ----------
        tokens : float
            The whole group's tokens in the iteration.

        Returns
        -------
        float
        """
        return self.experts.bound_s(tokens) + self.comm_bound_s(tokens)

    def comm_bound_s(self, tokens: float) -> float:
        """The roofline bound of the dispatch and combine of ``tokens`` over every MoE layer (s).

        Parameters
        ----------
        tokens : float
            The whole group's tokens in the iteration (0 or fewer: 0 s).

        Returns
        -------
        float
        """
        return float(self._comm(tokens)) if tokens > 0 else 0.0

    def _comm_parts(self, tokens: float) -> tuple[float, float, float]:
        """(measured, bound, clamped) seconds of the dispatch and combine of ``tokens`` over every
        MoE layer: each collective at ``max(measured, bound)`` where the device's NCCL rows price
        it (:func:`costmodel.measured.collectives.collective_curve`), else at its bound."""
        measured = at_bound = clamped = 0.0
        for n_of, roof_of, curve in self._parts:
            r = float(roof_of(tokens))
            if curve is None:
                at_bound += r
                continue
            m = curve.at(float(n_of(tokens)))
            if m < r:
                clamped += r
            else:
                measured += m
        return self._layers * measured, self._layers * at_bound, self._layers * clamped

    def comm_s(self, tokens: float) -> float:
        r"""Dispatch and combine of ``tokens`` over every MoE layer (s): each collective at
        ``max(measured, bound)`` where the device's NCCL measurements of it price it (a
        predictor's stage), else at its roofline bound (module doc).

        .. math:: t_{comm}(T) = L_{moe} \sum_c \max\big(t^{nccl}_c(n_c(T)),\ t^{roof}_c(n_c(T))\big)

        Parameters
        ----------
        tokens : float
            The whole group's tokens in the iteration (0 or fewer: 0 s).

        Returns
        -------
        float
        """
        if tokens <= 0:
            return 0.0
        return sum(self._comm_parts(tokens))

    def time(self, tokens: float, ranks: int) -> float:
        """Seconds of the stage at the group's ``tokens``; counted once per each of ``ranks``
        ranks waiting through it.

        Parameters
        ----------
        tokens : float
            The whole group's tokens in the iteration.
        ranks : int
            The ranks waiting through the stage (the weight of its seconds in :meth:`coverage`).

        Returns
        -------
        float
            The experts' and the dispatch and combine time (s).
        """
        if tokens <= 0:
            return self.experts.time(tokens, ranks)
        m, b, cl = self._comm_parts(tokens)
        self._comm_measured_s += ranks * m
        self._comm_s += ranks * b
        self._comm_clamped_s += ranks * cl
        return self.experts.time(tokens, ranks) + m + b + cl

    def coverage(self) -> Coverage:
        """The experts' and the dispatch and combine seconds counted since :meth:`reset`, by what
        they rest on: the device's NCCL measurements (measured), their bound where a measurement
        fell below it (:data:`CLAMPED`) or where none prices them (:attr:`comm_basis`)."""
        c = self.experts.coverage()
        pairs = ((self.comm_basis, self._comm_s), (CLAMPED, self._comm_clamped_s))
        bounds = {k: v for k, v in pairs if v > 0}
        if self._comm_measured_s <= 0 and not bounds:
            return c
        return c + Coverage(self._comm_measured_s, 0.0, sum(bounds.values()), {}, bounds)


class RankStep:
    """One rank's share of a group iteration: its step less its own routed-expert kernels (the
    :class:`~graphs.serving.pricing.protocols.IterationStep` its scheduler prices; module doc)."""

    def __init__(self, rank: IterationStep, own: ExpertKernels, stage: ExpertStage, bound_of: RankStep | None = None) -> None:
        self.rank = rank
        self.own = own
        self.stage = stage
        self.shared_body = bool(getattr(rank, "shared_body", True))
        #: the bound's rank step (the floor a scaled iteration never goes below); itself for the bound
        self.bound: RankStep = bound_of if bound_of is not None else self

    @property
    def windowed(self) -> bool:
        return bool(self.rank.windowed)

    def _own(self, n_dec: int, chunks: Sequence[tuple[float, float]]) -> float:
        # the routed experts are a kernel both paths share (MLA too: split_bodies), run once over
        # every token of the iteration, as the rank's step prices them
        return self.own.time(n_dec + sum(c for c, _ in chunks))

    def time_sums(
        self,
        n_dec: int,
        sum_ctx: float,
        chunks: Sequence[tuple[float, float]] = (),
        ctxs: Sequence[float] | None = None,
        logit_rows: int = 0,
    ) -> float:
        """The rank's step less its own experts (s; :meth:`IterationStep.time_sums`).

        Parameters
        ----------
        n_dec : int
            Decoding sequences in the rank's batch.
        sum_ctx : float
            Their KV lengths' sum (tokens).
        chunks : sequence of (float, float)
            Prefill chunks, each (tokens, cached tokens).
        ctxs : sequence of float or None
            Each decode's KV length (tokens), for a windowed-attention step; None otherwise.
        logit_rows : int
            Rows the lm_head computes beyond one per sequence (as the rank's step takes them).

        Returns
        -------
        float
            The rank's share (s, at least 0).
        """
        t = self.rank.time_sums(n_dec, sum_ctx, chunks, ctxs, logit_rows)
        return max(t - self._own(n_dec, chunks), 0.0)

    def time(self, decode_ctx: Sequence[int] | np.ndarray = (), chunks: Sequence[tuple[int, int]] = ()) -> float:
        """:meth:`time_sums` of a batch given sequence by sequence.

        Parameters
        ----------
        decode_ctx : sequence of int or numpy.ndarray
            Each decode's KV length (tokens).
        chunks : sequence of (int, int)
            Prefill chunks, each (tokens, cached tokens).

        Returns
        -------
        float
            The rank's share (s).
        """
        dec = np.asarray(decode_ctx, dtype=float)
        ctxs = dec.tolist() if self.windowed else None
        return self.time_sums(int(dec.size), float(dec.sum()), [(float(c), float(p)) for c, p in chunks], ctxs)

    def group_max_tokens_per_s(self, budget: int, overhead_s: float = 0.0) -> float:
        r"""Tokens per second the whole group never exceeds with at most ``budget`` tokens per rank
        and iteration:

        .. math:: \frac{D N}{B_{dense}(N) + S(D N) + o}

        with ``B_dense(N)`` the rank's token-wise kernels less its own experts at ``N`` tokens
        (the bound's :meth:`~graphs.serving.step.mixed.MixedStep.max_tokens_per_s` gives the
        body, ``N / C - o``) and ``S`` the stage's bound. An iteration of ``T = sum n_r`` tokens
        takes at least ``B_dense(max n_r) + S(T) >= B_dense(T / D) + S(T)`` (attention, the
        lm_head and the CPU terms only add), and each part's time per token only falls as its
        tokens grow (sums of rooflines of terms affine in the tokens with non-negative
        intercepts), so it is smallest at ``T = D N``.

        Parameters
        ----------
        budget : int
            ``N``: the most tokens one rank runs in an iteration.
        overhead_s : float
            ``o``: the iteration's fixed CPU overhead (s).

        Returns
        -------
        float
            The group's ceiling (tokens/s; infinite when the iteration takes no time).
        """
        floor = self.bound
        d = self.stage.dp
        body = budget / floor.rank.max_tokens_per_s(budget, 0.0)
        dense = max(body - floor.own.bound_s(budget), 0.0)
        t = dense + floor.stage.bound_s(d * budget) + overhead_s
        return d * budget / t if t > 0 else math.inf

    def max_tokens_per_s(self, budget: int, overhead_s: float = 0.0) -> float:
        """Tokens per second one rank never exceeds: its share of :meth:`group_max_tokens_per_s`.

        Parameters
        ----------
        budget : int
            The most tokens one rank runs in an iteration.
        overhead_s : float
            The iteration's fixed CPU overhead (s).

        Returns
        -------
        float
            The group's ceiling over ``D`` (tokens/s).
        """
        return self.group_max_tokens_per_s(budget, overhead_s) / self.stage.dp

    def share_decode_times(self, n_dec: int, sum_ctx: np.ndarray) -> np.ndarray | None:
        """:meth:`time_sums` of ``n_dec`` decodes at each KV-length sum of ``sum_ctx``, vectorised
        (elementwise the scalar path's operations: the rank's ``decode_times``, equal to its
        scalar step bit for bit, less the same own-expert seconds); None when the rank's step
        has no vectorised decode price (a predictor's) or its own experts are metered. What a
        group's window of steady decodes prices (:meth:`LockstepGroup.decode_window`).

        Parameters
        ----------
        n_dec : int
            Decoding sequences in the rank's batch (each iteration of the window).
        sum_ctx : numpy.ndarray
            Their KV lengths' sum in each iteration (tokens).

        Returns
        -------
        numpy.ndarray or None
            The rank's share in each iteration (s), or None (above).
        """
        times = getattr(self.rank, "decode_times", None)
        if times is None or self.own.metered:
            return None
        return np.maximum(times(n_dec, sum_ctx) - self._own(n_dec, ()), 0.0)

    def lockstep_s(
        self,
        n_dec: int,
        sum_ctx: float,
        chunks: Sequence[tuple[float, float]] = (),
        busy: int | None = None,
        ctxs: Sequence[float] | None = None,
    ) -> float:
        r"""One group iteration (s, no CPU terms) in which ``busy`` ranks (default all ``D``) each
        run the same batch (``n_dec`` decodes of KV lengths summing to ``sum_ctx``, prefill
        ``chunks`` of (tokens, cached)) and the others idle:

        .. math:: t = t_{rank}(b) - X_t(n) + S(\mathrm{busy} \cdot n), \qquad n = n_{dec} + \sum c

        the rank's share (:meth:`time_sums`) plus the stage at every busy rank's tokens
        (:meth:`ExpertStage.time`, counted for all ``D`` ranks as the group counts it): what
        :meth:`LockstepGroup.iteration_time` prices for such a batch without engine overheads.
        The design search prices a data-parallel plan's decode step (all ranks at ``B / D``
        sequences) and its lone prefill (one rank busy) with it.

        Parameters
        ----------
        n_dec : int
            Decoding sequences in each busy rank's batch.
        sum_ctx : float
            Their KV lengths' sum (tokens).
        chunks : sequence of (float, float)
            Each busy rank's prefill chunks, each (tokens, cached tokens).
        busy : int or None
            Ranks running the batch (None: all ``D``).
        ctxs : sequence of float or None
            Each decode's KV length (tokens), for a windowed-attention step; None otherwise.

        Returns
        -------
        float
            The group iteration's time (s).
        """
        d = self.stage.dp
        busy = d if busy is None else busy
        tokens = n_dec + sum(c for c, _ in chunks)
        return self.time_sums(n_dec, sum_ctx, chunks, ctxs) + self.stage.time(float(busy * tokens), d)


class MeteredRankStep(RankStep):
    """A :class:`RankStep` of a predicted step: it says what the group's seconds rest on (the
    ranks' kernels less their own experts, plus the stage's, once per rank)."""

    def reset(self) -> None:
        self.rank.reset()  # type: ignore[attr-defined]
        self.own.reset()
        self.stage.reset()

    def coverage(self) -> Coverage:
        c = self.rank.coverage().minus(self.own.coverage())  # type: ignore[attr-defined]
        return c + self.stage.coverage()

    @property
    def clamped_s(self) -> float:
        own = self.rank.clamped_s - self.own.clamped_s  # type: ignore[attr-defined]
        return max(own, 0.0) + self.stage.experts.clamped_s


def rank_step(
    w: Workload,
    hw: Hardware,
    rank: IterationStep,
    rank_bound: IterationStep,
    *,
    dp: int,
    tp: int,
    expert_parallel: bool,
    dispatch: str,
    predictor: Predictor,
) -> RankStep:
    """The rank step (and its stage) of a ``dp`` x ``tp`` group (module doc): ``rank`` and
    ``rank_bound`` are one rank's predicted (or bound) and bound steps at ``tp``.

    Parameters
    ----------
    w : Workload
        The model (an MoE).
    hw : Hardware
        Every device of the group.
    rank, rank_bound : IterationStep
        One rank's step priced by ``predictor`` (the bound's for the bound) and by the bound.
    dp, tp : int
        Data-parallel ranks and tensor parallelism per rank.
    expert_parallel : bool
        Whole experts per device (EP) instead of every expert split ``dp x tp`` ways.
    dispatch : str
        One of :data:`DISPATCHES`.
    predictor : Predictor
        What prices the experts (the bound when :attr:`Predictor.is_bound`).

    Returns
    -------
    RankStep
        A :class:`MeteredRankStep` (its floor the bound's) for a predictor, else a
        :class:`RankStep`.
    """
    g_rank = compiled_step(w, hw, Phase.DECODE, tp=tp).graph
    stage = ExpertStage(w, hw, dp, tp, expert_parallel, dispatch, predictor)
    if predictor.is_bound:
        return RankStep(rank, ExpertKernels(g_rank, hw, predictor), stage)
    bound_stage = ExpertStage(w, hw, dp, tp, expert_parallel, dispatch, Predictor())
    floor = RankStep(rank_bound, ExpertKernels(g_rank, hw, Predictor()), bound_stage)
    return MeteredRankStep(rank, ExpertKernels(g_rank, hw, predictor), stage, floor)


def group_step(
    w: Workload,
    hw: Hardware,
    *,
    dp: int,
    tp: int,
    expert_parallel: bool,
    dispatch: str,
    predictor: Predictor,
    rank: IterationStep | None = None,
) -> RankStep:
    """The rank step of a ``dp`` x ``tp`` group priced by ``predictor`` (:func:`rank_step` over
    the predictor's and the bound's mixed steps at ``tp``; ``rank``: the predictor's step when the
    caller built it already): what ``simulate --dp``, the design search and sizing price a group
    with.

    Parameters
    ----------
    w : Workload
        The model (an MoE: :func:`check_group`).
    hw : Hardware
        Every device of the group.
    dp, tp : int
        Data-parallel ranks and tensor parallelism per rank.
    expert_parallel : bool
        Whole experts per device (EP) instead of every expert split ``dp x tp`` ways.
    dispatch : str
        One of :data:`DISPATCHES`.
    predictor : Predictor
        What prices the kernels (the bound when :attr:`Predictor.is_bound`).
    rank : IterationStep, optional
        ``predicted_mixed_step(w, hw, tp=tp, predictor=predictor)``, when already built.

    Returns
    -------
    RankStep
        A :class:`MeteredRankStep` for a predictor, else the bound's :class:`RankStep`.
    """
    check_group(dp, w.config.is_moe, expert_parallel)
    own = rank if rank is not None else predicted_mixed_step(w, hw, tp=tp, predictor=predictor)
    return rank_step(
        w, hw, own, predicted_mixed_step(w, hw, tp=tp), dp=dp, tp=tp, expert_parallel=expert_parallel,
        dispatch=dispatch, predictor=predictor,
    )


class LockstepGroup:
    """``D`` ranks (:class:`~graphs.serving.sim.engine.Replica`) stepping together (module doc): the
    simulator's loop drives it as one replica."""

    def __init__(self, members: list[Replica], stage: ExpertStage, index: int) -> None:
        one = stage is not None and stage.dp == 1 and stage.expert_parallel  # D = 1: the tp group's EP
        if len(members) < (1 if one else 2):
            raise CostModelError("a data-parallel group needs at least 2 ranks")
        self.members = members
        self.stage = stage
        self.index = index
        self._next_rank = 0  #: the round robin's next rank (``dp_load_balance`` round_robin)
        #: how a request picks a rank: the engine's ``dp_load_balance`` (every rank runs one engine)
        self.balance: str = members[0].cfg.dp_load_balance
        self.busy_until: float | None = None
        self._parts: list[list[tuple[Seq, int]]] = []
        self._sizes: list[int] = []  #: each rank's sequences in its last batch (Replica.batch_len)
        self.floored = 0
        #: the bound's stage: the floor of a scaled stage (a RankStep's bound carries it)
        self._bound_stage: ExpertStage = getattr(getattr(members[0].step_cost, "bound", None), "stage", stage)

    # the replica interface the loop and the routers read
    @property
    def idle(self) -> bool:
        return all(m.idle for m in self.members)

    @property
    def outstanding(self) -> int:
        return sum(m.outstanding for m in self.members)

    @property
    def emitted(self) -> int:
        return sum(m.emitted for m in self.members)

    @property
    def running(self) -> list[Seq]:
        """Every rank's running sequences."""
        return [s for m in self.members for s in m.running]

    def decode_window(
        self, now: float, horizon: float, frontend: tuple[float, float] | None = None
    ) -> list[float]:
        r"""Run at once, from ``now``, the group iterations that would only decode steady decodes
        and end before ``horizon`` (:meth:`graphs.serving.sim.engine.Replica.decode_window`, for
        the group): every rank with work is in such a window (:meth:`Replica.window_plan`:
        nothing but its steady decodes, nothing admissible, no finish, blocks within its free
        ones), and the ranks' steps price decodes vectorised (the bound,
        :meth:`RankStep.share_decode_times`). Iteration ``j`` then takes

        .. math:: t_j = \max_r \left[ s_r(n_r, C_r + n_r j) + o_r \right] + S\left(\sum_r n_r\right)

        (:meth:`iteration_time` for that batch: the ranks' shares with their overheads, the
        stage at the group's tokens, constant over the window), their end times the loop's
        running sum, and every rank's records the loop's. Returns the end times (empty: none
        run).

        Parameters
        ----------
        now : float
            The simulated time the window starts at (s).
        horizon : float
            The time of the next event that could change or read the group (s): only iterations
            ending before it run.
        frontend : tuple of (float, float), optional
            The group's shared front end: when it has drained the iteration before (s) and its
            seconds per emitted token (:meth:`graphs.serving.sim.engine.Replica.decode_window`).

        Returns
        -------
        list of float
            The end time (s) of each iteration run, in order; empty when none runs.
        """
        busy = [m for m in self.members if not m.idle]
        if not busy or self.stage.experts.metered:
            return []
        plans, steps, shares = [], [], []
        for m in busy:
            step = m.step_cost
            plan = m.window_plan() if isinstance(step, RankStep) else None
            if plan is None or not isinstance(step, RankStep):
                return []
            plans.append(plan)
            steps.append(step)
        k0 = min(len(p[0]) for p in plans)
        for m, step, (_, n, o, sums) in zip(busy, steps, plans, strict=True):
            share = step.share_decode_times(m.overheads.padded(n), sums[:k0])
            if share is None:
                return []
            shares.append(share + o)
        tokens = float(sum(p[1] for p in plans))
        ranks = len(self.members)
        stage_s = self.stage.experts.bound_s(tokens) + self.stage.comm_s(tokens)  # what stage.time returns
        totals = np.max(np.stack(shares), axis=0) + stage_s
        ends = window_ends(now, totals, int(tokens), frontend)  # one addition at a time, as the loop
        k = int(np.searchsorted(ends, horizon, side="left"))
        if k < 2:
            return []
        ends_l = ends[:k].tolist()
        starts = [now, *ends_l[:-1]]
        tot = totals[:k].tolist()
        for m, (needs, *_), share in zip(busy, plans, shares, strict=True):
            d = share[:k].tolist()
            # the loop adds the rank's own time, then the rest of the group's iteration
            m.window_run(k, needs, starts, (x for dj, tj in zip(d, tot, strict=True) for x in (dj, tj - dj)))
        for m in self.members:  # an idle rank's devices wait through the group's iterations
            if m.idle:
                for tj in tot:
                    m.busy_s += tj - 0.0
        for _ in range(k):  # the stage's counts, once per iteration as the loop counts them
            self.stage.time(tokens, ranks)
        return ends_l

    def batch_len(self, batch: list[tuple[Seq, int]]) -> int:
        """Sequences in the group's last batch (every rank's, the steady decodes each leaves out included).

        Parameters
        ----------
        batch : list of (Sequence, int)
            The batch :meth:`schedule` returned (the count is kept per rank, so it is not read).

        Returns
        -------
        int
        """
        return sum(self._sizes)

    def fits_ever(self, seq: Seq) -> bool:
        """Whether ``seq``'s whole prompt and output fit one rank's KV pool alone (every rank's is alike).

        Parameters
        ----------
        seq : Sequence
            The request's sequence.

        Returns
        -------
        bool
        """
        return self.members[0].fits_ever(seq)

    def add(self, seq: Seq) -> None:
        """To the rank with the smallest ``4 waiting + running`` (vLLM's balancer), or the next in
        turn under ``dp_load_balance`` ``round_robin`` (SGLang's; module doc).

        Parameters
        ----------
        seq : Sequence
            The arriving request's sequence (ties go to the lowest rank index).
        """
        if self.balance == "round_robin":  # SGLang's default (module doc)
            rank = self.members[self._next_rank % len(self.members)]
            self._next_rank += 1
        else:
            rank = min(self.members, key=lambda m: (WAITING_WEIGHT * len(m.waiting) + len(m.running), m.index))
        rank.add(seq)

    def schedule(self) -> list[tuple[Seq, int]]:
        """Every rank's batch for this iteration, concatenated (each kept for its rank)."""
        self._parts = [m.schedule() if not m.idle else [] for m in self.members]
        self._sizes = [m.batch_len(p) if not m.idle else 0 for m, p in zip(self.members, self._parts, strict=True)]
        return [x for p in self._parts for x in p]

    def iteration_time(self, batch: list[tuple[Seq, int]]) -> float:
        """The slowest rank's dense share (with its CPU terms) plus the group's stage (s).

        Parameters
        ----------
        batch : list of (Sequence, int)
            The batch :meth:`schedule` returned (each rank's part is kept, so it is not read).

        Returns
        -------
        float
            The iteration's time (s); every device of the group is busy through it.
        """
        parts, sizes = self._parts, self._sizes
        dense = [m.iteration_time(p) if k else 0.0 for m, p, k in zip(self.members, parts, sizes, strict=True)]
        # each steady decode a rank leaves out of its listed batch is one token
        tokens = float(sum(sum(n for _, n in p) + k - len(p) for p, k in zip(parts, sizes, strict=True)))
        ov = self.members[0].overheads
        ranks = len(self.members)
        t = self.stage.time(tokens, ranks)
        if ov.kernel_scale != 1:
            floor = self._bound_stage.bound_s(tokens) if ov.kernel_scale < 1 else 0.0
            t, floored = scaled_kernels_s(ov.kernel_scale, t, floor)
            self.floored += floored
        total = max(dense) + t
        for m, d in zip(self.members, dense, strict=True):
            m.busy_s += total - d  # every device of the group is busy for the whole iteration
        return total

    def finish_iteration(self, batch: list[tuple[Seq, int]], now: float) -> tuple[list[Seq], list[Seq]]:
        """Each rank applies its batch; a rank left with nothing records its queue dropping to zero.

        Parameters
        ----------
        batch : list of (Sequence, int)
            The batch :meth:`schedule` returned (each rank applies its own part).
        now : float
            The iteration's end time (s).

        Returns
        -------
        (list of Sequence, list of Sequence)
            The sequences that finished and those handed to a decode instance, every rank's.
        """
        done: list[Seq] = []
        handed: list[Seq] = []
        for m, p, k in zip(self.members, self._parts, self._sizes, strict=True):
            if k:
                d, h = m.finish_iteration(p, now)
                done += d
                handed += h
                if m.idle:
                    m.sample(now, 0)
        return done, handed

    def sample(self, now: float, batch_size: int) -> None:
        """Each rank's record at an iteration's start (its own batch), or all at zero when idle.

        Parameters
        ----------
        now : float
            The iteration's start time (s).
        batch_size : int
            The group's batch (sequences; 0: the group is idle).
        """
        if batch_size == 0:
            for m in self.members:
                last = m.samples.last()
                if last is None or last[1] != 0:
                    m.sample(now, 0)
            return
        for m, k in zip(self.members, self._sizes, strict=True):
            if k:
                m.sample(now, k)


def experts_line(expert_parallel: bool, dispatch: str, devices: str) -> str:
    """Where a group's experts sit and how its tokens reach them, in words (``devices``: the
    group's device count as it should read, ``"4"`` or ``"dp x tp"``).

    Parameters
    ----------
    expert_parallel : bool
        Whole experts per device, else every expert split over the group.
    dispatch : str
        One of :data:`DISPATCHES`.
    devices : str
        The group's device count, as the line should read it.

    Returns
    -------
    str

    >>> experts_line(True, "all_to_all", "4")
    'experts expert parallel: whole experts spread over the 4 devices; dispatch and combine by all-to-all, each token once to every device of its experts, at the bound'
    """
    how = (
        f"expert parallel: whole experts spread over the {devices} devices"
        if expert_parallel
        else f"every expert split {devices} ways (vLLM's default without --enable-expert-parallel; SGLang's MoE under DP attention)"
    )
    disp = (
        "all-gather / reduce-scatter (vLLM's default all2all backend; SGLang's DP-attention gather and scatter)"
        if dispatch == "allgather_reducescatter"
        else "all-to-all, each token once to every device of its experts"
    )
    return f"experts {how}; dispatch and combine by {disp}, at the bound"


def dp_line(topo: Any, balance: str = "score", assumed: str = "") -> str:
    """The group a ``--dp`` run simulates, in one line (the output names what it assumed).

    Parameters
    ----------
    topo : Any
        The run's topology (:class:`~graphs.serving.sim.simulator.Topology`: ``dp``, ``tp``,
        ``expert_parallel``, ``moe_dispatch``).
    balance : str
        The engine's ``dp_load_balance`` (how a request picks a rank).
    assumed : str
        The engine whose rule ``balance`` stands in for (its profile's source is ASSUMED), said
        beside it; empty: the engine's own rule.

    Returns
    -------
    str
    """
    if topo.dp == 1:  # the tp group's own expert parallelism: no data-parallel ranks, no dispatch
        return (
            f"expert parallel inside tp {topo.tp}: attention tensor-parallel, whole experts spread over the "
            f"{topo.tp} devices (the busiest device's share of the routed tokens under uniform routing), "
            "their outputs summed by the tp all-reduce (no dispatch)"
        )
    return (
        f"data-parallel attention: {topo.dp} ranks x tp {topo.tp} per replica, each its own scheduler and KV "
        f"cache, stepping together ({BALANCERS[balance]}{f', ASSUMED for {assumed}' if assumed else ''}); "
        + experts_line(topo.expert_parallel, topo.moe_dispatch, str(topo.dp * topo.tp))
    )


def check_group(dp: int, moe: bool, expert_parallel: bool = False) -> None:
    """Refuse a group the deployment cannot have (one line: which, why).

    Parameters
    ----------
    dp : int
        Data-parallel ranks per group (1: no data parallelism).
    moe : bool
        Whether the model routes tokens to experts.
    expert_parallel : bool
        Whether the experts are held whole per device.

    Raises
    ------
    CostModelError
        When ``dp > 1`` or expert parallelism on a dense model.
    """
    if not moe and dp > 1:
        raise CostModelError(
            "data-parallel attention (dp > 1) synchronises MoE layers across ranks; for a dense model "
            "the ranks are independent replicas: use replicas instead (--replicas on the command line, "
            "Topology(replicas=...) from Python)"
        )
    if not moe and expert_parallel:
        raise CostModelError("expert parallelism spreads a mixture-of-experts model's experts: this model has none")
