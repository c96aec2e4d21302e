"""The step cost of one serving-engine iteration: a mixed batch of decodes and prefill chunks.

An iteration of a continuous-batching engine (vLLM v1, SGLang, TensorRT-LLM in-flight
batching) runs one forward pass over ``D`` decoding sequences (one new token each, sequence
``i`` attending over ``ctx_i`` cached tokens) and ``P`` prefill chunks (chunk ``j``: ``c_j``
new tokens after ``p_j`` cached ones). Its cost is the engine's usual per-kernel sum of
rooflines, read off the model graphs, with each kernel seeing the batch it really sees:

.. math::

    T = \\sum_{k \\in \\text{body}} r_k \\max_u t_{ku}(N)
      + \\sum_{k \\in \\text{head}} r_k \\max_u t_{ku}(R)
      + \\sum_{k \\in \\text{attn}} r_k \\max_u \\Big( \\sum_{i=1}^{D} t^{dec}_{ku}(1, ctx_i)
                                               + \\sum_{j=1}^{P} t^{pre}_{ku}(c_j, p_j) \\Big)

with ``N = D + sum c_j`` the tokens every token-wise kernel (projections, MLP or experts,
norms, activations, cache writes, collectives) processes, ``R = D + P`` the rows the lm_head
computes (one per sequence), and one attention kernel per layer whose compute and memory terms
are the sums over its sequences (a varlen FlashAttention launch). Every ``t`` is a compiled
roofline term of the decode graph (token-wise and head kernels, decode attention) or of the
chunked-prefill graph (chunk attention): the graphs are built once, symbolically, and only
their attention nodes depend on a context. Overlap and launch overhead blend as in
:attr:`costmodel.roofline.Bound.time`.

A batch of ``D`` decodes at one context equals the compiled decode step at ``(D, ctx)``, and a
lone chunk the compiled chunked-prefill step: tests check both.

Where a model's prefill tokens take other token-wise kernels than its decode tokens (MLA: K/V
decompressed for prefill, the projections absorbed for decode), the body splits by kernel
(:func:`split_bodies`): the kernels both paths share (projections, experts, norms, collectives)
at all ``N`` tokens, the decode's own at ``D`` and the prefill's own at ``sum c_j`` new tokens
after ``sum p_j`` cached ones, so ``k`` chunks of ``c`` tokens cost the compiled chunked-prefill
step of ``k`` prompts, ``(B, S) = (k, c)`` (a test checks it), and decodes beside a chunk read
the shared weights once.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import sympy

from costmodel import formcache
from costmodel.arith import ArithError, compile_numeric
from costmodel.cost import as_float
from costmodel.errors import CostModelError
from costmodel.graph import COST, GROUP, REPEAT, op_nodes
from costmodel.hardware import Hardware, get_device
from costmodel.keys import ROLE, Phase, Role
from costmodel.memo import BoundedCache
from costmodel.roofline import bound
from costmodel.symbols import B as B_sym
from costmodel.symbols import S as S_sym
from costmodel.symbols import ctx as ctx_sym
from costmodel.symbols import dim
from models.config import ModelConfig

from .card_format import CardError, lambdified_text
from .compiled import PREFIX, compiled_step
from .workload import Workload, as_workload

__all__ = ["HEAD_GROUP", "MixedStep", "mixed_step", "node_time_expr", "time_from_contexts"]

HEAD_GROUP = "head"


def time_from_contexts(
    step: Any, decode_ctx: Sequence[int] | np.ndarray = (), chunks: Sequence[tuple[int, int]] = ()
) -> float:
    """One iteration's seconds from each decode's KV length: ``step.time_sums(D, sum(ctx), chunks)``
    with ``D = len(decode_ctx)``, each context passed too only when ``step.windowed`` (a sliding
    window prices ``min(W, ctx)`` per sequence, so the sum alone is not enough). The one body of
    :meth:`MixedStep.time` and :meth:`graphs.serving.pricing.predictor.PredictedStep.time`.

    Parameters
    ----------
    step : MixedStep or PredictedStep
        A step with ``time_sums(n_dec, sum_ctx, chunks, ctxs)`` and ``windowed``.
    decode_ctx : sequence of int or numpy.ndarray
        Each decode's KV length (tokens, the new one included).
    chunks : sequence of (int, int)
        Prefill chunks as ``(new tokens, cached prefix tokens)``.

    Returns
    -------
    float
        Seconds for the iteration.
    """
    dec = np.asarray(decode_ctx, dtype=float)
    ctxs = dec.tolist() if step.windowed else None
    return float(
        step.time_sums(int(dec.size), float(dec.sum()), [(float(c), float(p)) for c, p in chunks], ctxs)
    )


@dataclass(frozen=True)
class _AttentionKernel:
    """One attention node: its repeat, launch time and overlap, and its terms for decoding
    sequences and prefill chunks.

    A decoding sequence's terms are affine in its context (FLOPs and KV bytes grow with each
    cached token), so over ``D`` sequences they sum to ``c_u + D a_u + b_u sum(ctx)`` (``c_u``
    read once per kernel, as learned sinks are; ``min(W, ctx)`` in place of ``ctx`` for a window): the
    coefficients are read off once and an iteration needs only ``D`` and ``sum(ctx)``. A
    chunk's terms (``c`` new tokens after ``p`` cached, causal) are compiled per chunk.
    """

    repeat: float
    launch: float
    overlap: float
    decode_coeffs: tuple[tuple[float, float], ...]  #: per term: (a_u, b_u)
    chunk_terms: tuple[Any, ...]  #: per term: (c, p) -> seconds
    #: per term: what the kernel reads once whatever its batch (gpt-oss's learned sinks)
    decode_const: tuple[float, ...] = ()
    cap: float | None = None  #: a sliding window W: the terms are affine in min(W, ctx) instead
    #: the chunk terms' values by (new tokens, cached) and their types (a prompt length recurs)
    _chunk_values: dict[tuple[Any, ...], tuple[float, ...]] = field(
        default_factory=dict, compare=False, repr=False
    )

    def time(
        self,
        n_dec: int,
        sum_ctx: float,
        chunks: Sequence[tuple[float, float]],
        ctxs: Sequence[float] | None = None,
    ) -> float:
        """Seconds of this kernel; a windowed one needs the decodes' contexts ``ctxs`` (its
        terms sum ``min(W, ctx)`` over them, not ``ctx``)."""
        if not n_dec and not chunks:
            return 0.0
        if self.cap is not None and n_dec:
            if ctxs is None:
                raise CostModelError("a sliding-window attention kernel needs each decode's context")
            w = self.cap
            sum_ctx = sum(min(w, c) for c in ctxs)
        totals = [n_dec * a + b * sum_ctx for a, b in self.decode_coeffs]
        if n_dec and self.decode_const:
            totals = [t + c for t, c in zip(totals, self.decode_const, strict=True)]
        memo = self._chunk_values
        for c, p in chunks:
            key = (c, p, c.__class__, p.__class__)
            vals = memo.get(key)
            if vals is None:
                vals = tuple(f(c, p) for f in self.chunk_terms)
                if len(memo) >= 1 << 16:
                    memo.clear()
                memo[key] = vals
            for u, v in enumerate(vals):
                totals[u] += v
        ov = self.overlap
        acc = totals[0]
        for t in totals[1:]:  # a left fold, as decode_times and chunk_times add over arrays (the
            acc += t  # builtin sum compensates floats from Python 3.12: it would round otherwise)
        return self.repeat * (ov * max(totals) + (1 - ov) * acc + self.launch)

    def decode_times(self, n_dec: int, sum_ctx: np.ndarray) -> np.ndarray:
        """:meth:`time` of ``n_dec`` decodes at each KV-length sum of ``sum_ctx``, vectorised
        with the scalar path's operations in its order (equal values, bit for bit; no window)."""
        totals = [n_dec * a + b * sum_ctx for a, b in self.decode_coeffs]
        if self.decode_const:
            totals = [t + c for t, c in zip(totals, self.decode_const, strict=True)]
        top, acc = totals[0], totals[0]
        for t in totals[1:]:
            top = np.maximum(top, t)
            acc = acc + t
        ov = self.overlap
        out: np.ndarray = self.repeat * (ov * top + (1 - ov) * acc + self.launch)
        return np.array(np.broadcast_to(out, np.shape(sum_ctx)))


def window_cap(terms: Sequence[sympy.Expr], x: sympy.Symbol, where: str) -> float | None:
    """The window ``W`` of a decode attention kernel whose terms read ``Min(W, x)`` cached keys
    (a sliding-window layer), or None when they read all ``x``; one kernel has one window.

    Parameters
    ----------
    terms : sequence of sympy.Expr
        One decode attention kernel's roofline terms.
    x : sympy.Symbol
        The context symbol.
    where : str
        The kernel's name, printed in the error.

    Returns
    -------
    float or None
        The window ``W`` (tokens), or None when the kernel reads the whole context.

    Raises
    ------
    CostModelError
        When the terms read several windows or a cap other than ``min(W, x)``.
    """
    caps = {
        m
        for t in terms
        for m in t.atoms(sympy.Min)
        if x in m.free_symbols and len(m.args) == 2 and any(a.is_number for a in m.args)
    }
    if not caps:
        return None
    if len(caps) > 1:
        raise CostModelError(f"{where}: attention terms read several windows {sorted(map(str, caps))}")
    (m,) = caps
    (w,) = (a for a in m.args if a.is_number)
    if set(m.args) != {w, x}:
        raise CostModelError(f"{where}: attention terms read {m}, not min(window, context)")
    return as_float(w)


def _const(c: sympy.Expr, where: str) -> float:
    """A kernel's batch-independent part of one term (seconds); an error when it is not a number."""
    if c.free_symbols:
        raise CostModelError(f"{where}: the attention term's batch-independent part is not a number: {c}")
    return as_float(c)


def _affine(t: sympy.Expr, x: sympy.Symbol, where: str) -> tuple[float, float]:
    """``(a, b)`` with ``t = a + b x``; an error when ``t`` is not affine in ``x``."""
    try:
        poly = sympy.Poly(sympy.expand(t), x)
    except sympy.PolynomialError:  # e.g. a sliding window's Min(window, ctx)
        poly = None
    if poly is None or poly.degree() > 1 or poly.free_symbols - {x}:
        raise CostModelError(
            f"{where}: a decoding sequence's attention term is not affine in its context: {t}"
        )
    return as_float(poly.coeff_monomial(1)), as_float(poly.coeff_monomial(x))


class _Memo:
    """A pure function of one number, its values kept by argument (its type with its value: an
    int and a float of one value need not round alike in a form), at most ``limit`` of them (then
    forgotten at once). A simulation asks the token-wise and head forms at a few thousand batch
    sizes, ~10^5 times each."""

    __slots__ = ("fn", "limit", "values")

    def __init__(self, fn: Any, limit: int = 1 << 16) -> None:
        self.fn, self.limit = fn, limit
        self.values: dict[tuple[type, float], float] = {}

    def __call__(self, x: float) -> float:
        key = (x.__class__, x)
        v = self.values.get(key)
        if v is None:
            v = float(self.fn(x))
            if len(self.values) >= self.limit:
                self.values.clear()
            self.values[key] = v
        return v


def node_time_expr(d: dict[str, Any], hw: Hardware) -> sympy.Expr:
    """A node's compiled roofline time ``r max_u t_u + launch`` (s; :attr:`Bound.compile_time`)
    times its repeat ``r``, as a sympy expression of the graph's free dims.

    Parameters
    ----------
    d : dict
        A node's attributes (its :class:`~costmodel.cost.Cost` and repeat).
    hw : Hardware
        The device.

    Returns
    -------
    sympy.Expr
        The node's time (s).
    """
    return d.get(REPEAT, 1) * bound(d[COST], hw).compile_time


def body_nodes(g: Any) -> list[str]:
    """A step graph's token-wise kernels: its op nodes that are neither attention nor the head.

    Parameters
    ----------
    g : networkx.DiGraph
        A compiled step graph.

    Returns
    -------
    list of str
        Their names, in the graph's order.
    """
    return [
        n for n in op_nodes(g) if g.nodes[n].get(ROLE) != Role.ATTENTION and g.nodes[n].get(GROUP) != HEAD_GROUP
    ]


def split_bodies(g_dec: Any, g_chunk: Any, hw: Hardware) -> frozenset[str]:
    """The token-wise kernels a model's decode and prefill tokens share: the names of the body
    nodes (neither attention nor head) that both graphs have, each the same function of the
    tokens it processes (the decode node at ``B`` tokens and the prefill node at ``(B, S) = (1,
    S)`` agree at ``B = S`` in 1, 7, 512 and 4099, to 1e-12) and free of the cached prefix. In an
    iteration these run once over every token of it (an engine's forward takes the decodes' and
    the chunks' tokens together); the other body nodes are one path's own (MLA: the decode's
    absorbed ``q_absorb``/``v_absorb``, the prefill's ``kv_b_proj`` decompressing K/V).

    Parameters
    ----------
    g_dec : networkx.DiGraph
        The compiled decode graph.
    g_chunk : networkx.DiGraph
        The compiled (chunked-)prefill graph.
    hw : Hardware
        The device.

    Returns
    -------
    frozenset of str
        The shared nodes' names.
    """

    pre = set(body_nodes(g_chunk))
    out = set()
    for n in body_nodes(g_dec):
        if n not in pre:
            continue
        e_dec = node_time_expr(g_dec.nodes[n], hw)
        e_pre = node_time_expr(g_chunk.nodes[n], hw).subs(B_sym, 1)
        if PREFIX in e_pre.free_symbols:
            continue
        if all(
            math.isclose(float(e_dec.subs(B_sym, x)), float(e_pre.subs(S_sym, x)), rel_tol=1e-12)
            for x in (1, 7, 512, 4099)
        ):
            out.add(n)
    return frozenset(out)


class MixedStep:
    """The compiled cost of a mixed iteration for one (model, device, tp) (module doc)."""

    def __init__(self, w: Workload, hw: Hardware, tp: int = 1) -> None:
        self.hardware = hw
        self.tp = tp
        dec = compiled_step(w, hw, Phase.DECODE, tp=tp)
        chunk = compiled_step(w, hw, Phase.PREFILL, tp=tp, chunked=True)
        g_dec, g_chunk = dec.graph, chunk.graph
        assert g_dec is not None and g_chunk is not None
        body = sympy.Integer(0)
        head = sympy.Integer(0)
        self.attention: list[_AttentionKernel] = []
        self._chunk_forms: list[list[sympy.Expr]] = []  #: per attention kernel: its chunk terms (card)
        attn_chunk = {
            n: g_chunk.nodes[n] for n in op_nodes(g_chunk) if g_chunk.nodes[n].get(ROLE) == Role.ATTENTION
        }
        ov = as_float(hw.overlap)
        c_sym = dim("chunk_tokens")
        for n in op_nodes(g_dec):
            d = g_dec.nodes[n]
            if d.get(ROLE) == Role.ATTENTION:
                if n not in attn_chunk:
                    raise CostModelError(
                        f"attention node {n} has no counterpart in the chunked-prefill graph"
                    )
                b_dec = bound(d[COST], hw)
                b_pre = bound(attn_chunk[n][COST], hw)
                if tuple(b_dec.terms) != tuple(b_pre.terms):
                    raise CostModelError(
                        f"attention node {n}: decode and prefill terms differ ({b_dec.terms} vs {b_pre.terms})"
                    )
                # a term is c + B (a + b ctx): c read once per kernel (sinks), the rest per sequence
                const = [t.subs(B_sym, 0) for t in b_dec.terms.values()]
                dec_terms = [t.subs(B_sym, 1) - c for t, c in zip(b_dec.terms.values(), const, strict=True)]
                cap = window_cap(dec_terms, ctx_sym, n)
                if cap is not None:  # affine in y = min(W, ctx): read off with y in ctx's place
                    dec_terms = [t.subs(sympy.Min(cap, ctx_sym), ctx_sym) for t in dec_terms]
                    dec_terms = [t.subs(sympy.Min(int(cap), ctx_sym), ctx_sym) for t in dec_terms]
                chunk_forms = [t.subs({B_sym: 1, S_sym: c_sym}) for t in b_pre.terms.values()]
                self._chunk_forms.append(chunk_forms)
                self.attention.append(
                    _AttentionKernel(
                        repeat=as_float(d.get(REPEAT, 1)),
                        launch=as_float(b_dec.launch),
                        overlap=ov,
                        cap=cap,
                        decode_coeffs=tuple(_affine(t, ctx_sym, n) for t in dec_terms),
                        decode_const=tuple(_const(c, n) for c in const),
                        chunk_terms=tuple(sympy.lambdify((c_sym, PREFIX), t, "math") for t in chunk_forms),
                    )
                )
            elif d.get(GROUP) == HEAD_GROUP:
                head += node_time_expr(d, hw)
            else:
                body += node_time_expr(d, hw)
        self._body = sympy.lambdify(B_sym, body, "math")
        self._head = sympy.lambdify(B_sym, head, "math")
        self._memos = (_Memo(self._body), _Memo(self._head))
        # the prefill chunk's own token-wise kernels: the same as decode's for most models; MLA
        # decompresses K/V for prefill tokens but absorbs the projections for decode tokens
        pre_body = sympy.Add(
            *(
                node_time_expr(g_chunk.nodes[n], hw)
                for n in op_nodes(g_chunk)
                if g_chunk.nodes[n].get(ROLE) != Role.ATTENTION and g_chunk.nodes[n].get(GROUP) != HEAD_GROUP
            )
        ).subs(B_sym, 1)
        self._pre_body = sympy.lambdify((S_sym, PREFIX), pre_body, "math")
        self.shared_body = PREFIX not in pre_body.free_symbols and all(
            math.isclose(float(self._body(n)), float(self._pre_body(n, 0)), rel_tol=1e-12)
            for n in (1, 7, 512, 4099)
        )
        # MLA: the kernels both paths share run once over every token of an iteration, each
        # path's own over its tokens (:func:`split_bodies`)
        shared_names = frozenset() if self.shared_body else split_bodies(g_dec, g_chunk, hw)
        shared = sympy.Add(*(node_time_expr(g_dec.nodes[n], hw) for n in shared_names))
        dec_only, pre_only = (
            sympy.Add(*(node_time_expr(g.nodes[n], hw) for n in body_nodes(g) if n not in shared_names))
            for g in (g_dec, g_chunk)
        )
        pre_only = pre_only.subs(B_sym, 1)
        self._split = (
            sympy.lambdify(B_sym, shared, "math"),
            sympy.lambdify(B_sym, dec_only, "math"),
            sympy.lambdify((S_sym, PREFIX), pre_only, "math"),
        )
        #: kept for :meth:`to_card`
        self._forms: tuple[Any, ...] = (body, head, pre_body, shared, dec_only, pre_only)
        #: the lone-chunk forms as text (:meth:`chunk_times`): None until asked; a card's step has them
        self._chunk_texts: tuple[str, list[list[str]]] | None = None
        #: and compiled over arrays (None: the scalar path), once asked
        self._chunk_arrays: tuple[Any, list[list[Any]]] | None = None
        self._chunk_tried = False

    #: the card layout's version (:meth:`to_card`); a card of another is rebuilt (2: the forms'
    #: text is what lambdify compiled, :func:`~graphs.serving.step.card_format.lambdified_text`)
    CARD_VERSION = 3
    #: iterations a card is checked at when read back: (decodes, sum of contexts, chunks, contexts)
    _CHECKS: tuple[tuple[int, float, tuple[tuple[float, float], ...]], ...] = (
        (1, 100.0, ()),
        (7, 7 * 3000.0, ((512.0, 0.0),)),
        (0, 0.0, ((2048.0, 1024.0), (64.0, 0.0))),
    )

    def _check_values(self) -> list[float]:
        return [
            self.time_sums(n, sc, list(ch), [sc / n] * n if n and self.windowed else None)
            for n, sc, ch in self._CHECKS
        ]

    def to_card(self) -> dict[str, Any]:
        """This step as JSON-ready data (:mod:`costmodel.formcache`): the token-wise, head and
        prefill forms as the arithmetic their compiled functions evaluate
        (:func:`graphs.serving.step.card_format.lambdified_text`: read back, the same values bit
        for bit), each attention
        kernel's numbers and chunk forms, and the step at :data:`_CHECKS` to verify it by.
        Raises :class:`graphs.serving.step.card_format.CardError` for a form the text cannot hold.

        Returns
        -------
        dict
            The card.

        Raises
        ------
        CardError
            For a form the card's text cannot hold.
        """
        body, head, pre_body, shared, dec_only, pre_only = self._forms
        return {
            "kind": "mixed",
            "version": self.CARD_VERSION,
            "tp": self.tp,
            "body": lambdified_text(body, (B_sym,), "math"),
            "head": lambdified_text(head, (B_sym,), "math"),
            "pre_body": lambdified_text(pre_body, (S_sym, PREFIX), "math"),
            "shared_body": self.shared_body,
            "split": [
                lambdified_text(shared, (B_sym,), "math"),
                lambdified_text(dec_only, (B_sym,), "math"),
                lambdified_text(pre_only, (S_sym, PREFIX), "math"),
            ],
            "attention": [
                {
                    "repeat": k.repeat,
                    "launch": k.launch,
                    "overlap": k.overlap,
                    "cap": k.cap,
                    "decode_coeffs": [list(c) for c in k.decode_coeffs],
                    "decode_const": list(k.decode_const),
                    "chunk_terms": [lambdified_text(f, (dim("chunk_tokens"), PREFIX), "math") for f in forms],
                }
                for k, forms in zip(self.attention, self._chunk_forms, strict=True)
            ],
            "check": self._check_values(),
        }

    @classmethod
    def from_card(cls, card: dict[str, Any], hw: Hardware, tp: int) -> MixedStep:
        """The step a :meth:`to_card` card holds, its forms compiled by the whitelisting reader
        (:func:`costmodel.arith.compile_numeric`: no ``eval``) and checked against the card's check
        values; a card of another layout or one that does not reproduce them raises
        :class:`graphs.serving.step.card_format.CardError`.

        Parameters
        ----------
        card : dict
            A :meth:`to_card` card as read from JSON.
        hw : Hardware
            The device it was built for.
        tp : int
            Its tensor-parallel degree.

        Returns
        -------
        MixedStep

        Raises
        ------
        CardError
            When the card is of another layout or tp, holds a non-finite number, does not read back or
            does not reproduce its check values.
        """
        def num(x: Any) -> float:
            if isinstance(x, bool) or not isinstance(x, int | float) or not math.isfinite(x) or x < 0:
                raise CardError("a mixed-step card holds a number that is not finite and non-negative")
            return float(x)

        try:
            if card.get("kind") != "mixed" or card.get("version") != cls.CARD_VERSION or card.get("tp") != tp:
                raise CardError("not a mixed-step card of this layout and tp")
            self = cls.__new__(cls)
            self.hardware, self.tp = hw, tp
            self._body = compile_numeric(card["body"], ("B",))
            self._head = compile_numeric(card["head"], ("B",))
            self._memos = (_Memo(self._body), _Memo(self._head))
            self._pre_body = compile_numeric(card["pre_body"], ("S", "prefix"))
            self.shared_body = card["shared_body"] is True
            sh, do, po = card["split"]
            self._split = (
                compile_numeric(sh, ("B",)),
                compile_numeric(do, ("B",)),
                compile_numeric(po, ("S", "prefix")),
            )
            self.attention = [
                _AttentionKernel(
                    repeat=num(k["repeat"]),
                    launch=num(k["launch"]),
                    overlap=num(k["overlap"]),
                    cap=None if k["cap"] is None else num(k["cap"]),
                    decode_coeffs=tuple((num(a), num(b)) for a, b in k["decode_coeffs"]),
                    decode_const=tuple(num(c) for c in k["decode_const"]),
                    chunk_terms=tuple(
                        compile_numeric(t, ("chunk_tokens", "prefix")) for t in k["chunk_terms"]
                    ),
                )
                for k in card["attention"]
            ]
            self._chunk_forms, self._forms = [], ()  # a card's step is not re-carded
            self._chunk_texts = (
                card["body"] if self.shared_body else card["pre_body"],
                [list(k["chunk_terms"]) for k in card["attention"]],
            )
            self._chunk_arrays, self._chunk_tried = None, False
            got, want = self._check_values(), [num(v) for v in card["check"]]
        except (KeyError, TypeError, ValueError, ArithError) as exc:
            raise CardError(f"a mixed-step card does not read back ({type(exc).__name__})") from None
        if len(got) != len(want) or not all(
            math.isclose(g, v, rel_tol=1e-9, abs_tol=1e-300) for g, v in zip(got, want, strict=True)
        ):
            raise CardError("a mixed-step card does not reproduce its check values")
        return self

    def decode_times(self, n_dec: int, sum_ctx: np.ndarray) -> np.ndarray:
        """:meth:`time_sums` of decode-only iterations, ``n_dec`` decodes at each KV-length sum of
        ``sum_ctx`` (whole numbers, as floats), vectorised over the iterations: every element goes
        through the scalar path's operations in its order, so each equals ``time_sums(n_dec, x)``
        bit for bit (the skipping simulator relies on it: :mod:`graphs.serving.sim.skipping`). A
        model with sliding-window layers needs each decode's context: refused.

        Parameters
        ----------
        n_dec : int
            Decodes per iteration.
        sum_ctx : numpy.ndarray
            Each iteration's sum of KV lengths (tokens, whole numbers as floats).

        Returns
        -------
        numpy.ndarray
            Seconds per iteration.

        Raises
        ------
        CostModelError
            When ``n_dec < 1``, or for a model with sliding-window layers.
        """
        if self.windowed or not isinstance(n_dec, int) or n_dec < 1:
            raise CostModelError(
                f"decode_times needs n_dec >= 1 decodes of a model without sliding-window layers, got "
                f"n_dec={n_dec!r}{' and a windowed model' if self.windowed else ''}"
            )
        body, head = self._memos
        t: Any = body(n_dec + 0) if self.shared_body else body(n_dec) + 0
        t += head(n_dec + 0)
        for k in self.attention:
            t = t + k.decode_times(n_dec, sum_ctx)
        # one value an iteration even where no kernel reads the KV (a pure state-space model)
        return np.array(np.broadcast_to(np.asarray(t, dtype=float), np.shape(sum_ctx)))

    def _lone_chunk_forms(self) -> tuple[Any, list[list[Any]]] | None:
        """The token-wise form of a lone chunk (the whole body when both paths share it, else the
        prefill body) and each attention kernel's chunk terms, compiled over numpy arrays from the
        text of the very forms the scalar path evaluates (:func:`lambdified_text`: its operations
        in its order), once per step; None where one has no text, or raises to a power or takes
        ``exp``/``log`` (numpy's vector routines for those may round otherwise than the math
        library's, e.g. the ``(31/32)**S`` of an MoE's experts hit: the scalar path runs)."""
        import ast

        from costmodel.arith import compile_array

        if self._chunk_tried:
            return self._chunk_arrays
        self._chunk_tried = True
        if self._chunk_texts is None:  # built here: the forms, checked before any text is made
            body, _head, pre_body, *_ = self._forms
            forms = [body if self.shared_body else pre_body, *(f for fs in self._chunk_forms for f in fs)]
            if any(
                f.has(sympy.exp, sympy.log) or any(pw.exp != -1 for pw in f.atoms(sympy.Pow)) for f in forms
            ):
                return None
            try:
                self._chunk_texts = (
                    lambdified_text(body, (B_sym,), "math")
                    if self.shared_body
                    else lambdified_text(pre_body, (S_sym, PREFIX), "math"),
                    [
                        [lambdified_text(f, (dim("chunk_tokens"), PREFIX), "math") for f in fs]
                        for fs in self._chunk_forms
                    ],
                )
            except CardError:
                return None
        body_text, kernels = self._chunk_texts
        if not body_text or len(kernels) != len(self.attention) or not all(kernels):
            return None
        for t in [body_text, *(t for terms in kernels for t in terms)]:
            for node in ast.walk(ast.parse(t, mode="eval")):
                if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow):
                    return None
                if isinstance(node, ast.Call) and getattr(node.func, "id", "") in ("exp", "log"):
                    return None
        try:
            args = ("B",) if self.shared_body else ("S", "prefix")
            self._chunk_arrays = compile_array(body_text, args), [
                [compile_array(t, ("chunk_tokens", "prefix")) for t in terms] for terms in kernels
            ]
        except ArithError:
            return None
        return self._chunk_arrays

    def chunk_times(self, new: np.ndarray, cached: np.ndarray) -> np.ndarray:
        """:meth:`time_sums` of iterations that each prefill one chunk alone, ``new[i]`` tokens
        after ``cached[i]`` cached ones (whole numbers, as floats), vectorised over the chunks:
        the compiled forms evaluated over numpy arrays from their own text, through the scalar
        path's operations in its order, and each attention kernel's terms blended by the same
        maximum and left-fold sum, so each element equals
        ``time_sums(0, 0.0, [(new[i], cached[i])])`` bit for bit (a test compares them on random
        lengths). A form numpy cannot evaluate so (:meth:`_lone_chunk_forms`), or a value that is
        not finite, takes the scalar path, element by element.

        Parameters
        ----------
        new : numpy.ndarray
            Each chunk's new tokens (>= 1).
        cached : numpy.ndarray
            Each chunk's cached prefix tokens (>= 0), as many.

        Returns
        -------
        numpy.ndarray
            Seconds per iteration.
        """
        c = np.asarray(new, dtype=float)
        p = np.asarray(cached, dtype=float)
        forms = self._lone_chunk_forms()
        ctxs: list[float] | None = [] if self.windowed else None

        def scalar() -> np.ndarray:
            return np.array(
                [self.time_sums(0, 0.0, [(float(x), float(y))], ctxs) for x, y in zip(c, p, strict=True)],
                dtype=float,
            )

        if forms is None or c.size == 0:
            return scalar()
        body, kernels = forms
        try:
            t = np.asarray(body(c) if self.shared_body else body(c, p), dtype=float)
            t = t + self._memos[1](1)  # rows: the chunk's one
            for k, terms in zip(self.attention, kernels, strict=True):
                # _AttentionKernel.time at no decodes: each term 0 * a + b * 0.0, plus the chunk's
                base = [0 * a + b * 0.0 for a, b in k.decode_coeffs]
                totals = [z + f(c, p) for z, f in zip(base, terms, strict=True)]
                top = totals[0]
                for x in totals[1:]:
                    top = np.maximum(top, x)
                acc = totals[0]  # the scalar path's left fold, element by element
                for x in totals[1:]:
                    acc = acc + x
                ov = k.overlap
                t = t + k.repeat * (ov * top + (1 - ov) * acc + k.launch)
        except ArithError:
            return scalar()
        return t if np.isfinite(t).all() else scalar()

    def max_tokens_per_s(self, budget: int, overhead_s: float = 0.0) -> float:
        """Tokens per second one replica can never exceed with at most ``budget`` tokens an
        iteration: every token passes the token-wise kernels, and their time per token

        .. math:: \\frac{T_{body}(N)}{N} = \\sum_k r_k \\frac{\\max_u (a_{ku} + b_{ku} N)}{N}

        (terms affine in ``N`` with ``a >= 0``: weights read once, work per token) only falls
        as ``N`` grows, so it is smallest at ``N = budget``; attention and the lm_head only add
        to it, and so does a fixed ``overhead_s`` per iteration. The ceiling is
        ``budget / (T_body(budget) + overhead_s)`` (tokens/s), with the cheaper of the decode and
        prefill bodies when they differ (MLA).

        Parameters
        ----------
        budget : int
            Tokens per iteration at most (``max_num_batched_tokens``).
        overhead_s : float
            Fixed seconds added to every iteration (CPU).

        Returns
        -------
        float
            Tokens per second.
        """
        n = float(budget)
        body = float(self._body(n))
        if not self.shared_body:
            body = min(body, float(self._pre_body(n, 0.0)))
        t = body + overhead_s
        return n / t if t > 0 else math.inf

    def time(
        self,
        decode_ctx: Sequence[int] | np.ndarray = (),
        chunks: Sequence[tuple[int, int]] = (),
    ) -> float:
        """Seconds for one iteration: decodes at contexts ``decode_ctx`` (KV length including the
        new token) and prefill chunks ``(new tokens, cached prefix)``.

        Parameters
        ----------
        decode_ctx : sequence of int or numpy.ndarray
            Each decode's KV length (tokens, the new one included).
        chunks : sequence of (int, int)
            Prefill chunks as ``(new tokens, cached prefix tokens)``.

        Returns
        -------
        float
            Seconds for the iteration.
        """
        return time_from_contexts(self, decode_ctx, chunks)

    @property
    def windowed(self) -> bool:
        """Whether a sliding-window kernel needs each decode's context (not only their sum)."""
        return any(k.cap is not None for k in self.attention)

    def time_sums(
        self,
        n_dec: int,
        sum_ctx: float,
        chunks: Sequence[tuple[float, float]] = (),
        ctxs: Sequence[float] | None = None,
        logit_rows: int = 0,
    ) -> float:
        """:meth:`time` from the number of decodes and the sum of their contexts (O(chunks));
        a model with sliding-window layers (:attr:`windowed`) also needs the contexts ``ctxs``.
        ``logit_rows``: lm_head rows beyond one per sequence (speculative verification scores
        all ``k + 1`` positions of its chunk: ``k`` more rows each, :mod:`graphs.serving.sim.specdec_sim`).

        When a model's prefill tokens take other token-wise kernels than its decode tokens (MLA:
        K/V decompressed for prefill, projections absorbed for decode), the kernels both paths
        share (:func:`split_bodies`) run once over all ``N = D + sum c_j`` tokens, the decode's own
        over its ``D`` tokens and the prefill's own once over the chunks' ``sum c_j`` new tokens
        after their ``sum p_j`` cached ones (an engine's varlen prefill batches its chunks; MLA
        decompresses the cached prefixes too): ``T_shared(N) + T_dec(D) + T_pre(sum c, sum p)``. A
        pure-decode iteration and a lone chunk are priced by the whole decode and prefill bodies
        (the same sums, exactly as the compiled steps).

        Parameters
        ----------
        n_dec : int
            Decodes in the iteration.
        sum_ctx : float
            The sum of their KV lengths (tokens).
        chunks : sequence of (float, float)
            Prefill chunks as ``(new tokens, cached prefix tokens)``.
        ctxs : sequence of float, optional
            Each decode's KV length (required when :attr:`windowed`).
        logit_rows : int
            lm_head rows beyond one per sequence.

        Returns
        -------
        float
            Seconds for the iteration.
        """
        rows = n_dec + len(chunks)
        if rows == 0:
            return 0.0
        chunk_tokens = sum(c for c, _ in chunks)
        body, head = self._memos  # the forms' values, each computed once per argument
        if self.shared_body:
            t = body(n_dec + chunk_tokens)
        elif not chunks:
            t = body(n_dec)
        elif not n_dec and len(chunks) == 1:
            t = float(self._pre_body(*chunks[0]))
        else:
            shared, dec_only, pre_only = self._split
            t = float(shared(n_dec + chunk_tokens)) + (float(dec_only(n_dec)) if n_dec else 0.0)
            t += float(pre_only(chunk_tokens, sum(p for _, p in chunks)))
        t += head(rows + logit_rows)
        for k in self.attention:
            t += k.time(n_dec, sum_ctx, chunks, ctxs)
        return t


_CACHE: BoundedCache[MixedStep] = BoundedCache("mixed_step", 64)


def mixed_step(config: ModelConfig | str | Workload, device: Hardware | str, *, tp: int = 1) -> MixedStep:
    """The :class:`MixedStep` of ``config`` on ``device`` at ``tp``: built once per process, and
    kept between processes as a card in the persistent form cache (:mod:`costmodel.formcache`,
    keyed by the engine's sources, the config and the device; a card that does not read back is
    rebuilt).

    Parameters
    ----------
    config : ModelConfig, str or Workload
        The model.
    device : Hardware or str
        The device.
    tp : int
        Tensor-parallel degree.

    Returns
    -------
    MixedStep
        Prices any mix of decodes and prefill chunks (s).
    """
    w = as_workload(config)
    hw = get_device(device)
    return _CACHE.get_or_build((w.config, hw, tp), lambda: _carded(w, hw, tp))


def _carded(w: Workload, hw: Hardware, tp: int) -> MixedStep:
    """The step from its card when the cache holds a good one, else built (and carded)."""
    key = formcache.cache_key("mixed", str(MixedStep.CARD_VERSION), repr(w.config), repr(hw), str(tp))
    card = formcache.load(key)
    if card is not None:
        try:
            return MixedStep.from_card(card, hw, tp)
        except CardError:
            pass  # rebuilt and rewritten below
    step = MixedStep(w, hw, tp)
    try:
        formcache.save(key, step.to_card())
    except CardError:
        pass  # a form the card's arithmetic cannot hold: built each process, as before
    return step
