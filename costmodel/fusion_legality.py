"""Which ops may share a kernel, as data: op classes, backend rule tables, on-chip capacity.

Every op rule belongs to one *op class* (:data:`OP_CLASSES`); a backend's
:class:`Legality` says which classes may share a kernel and how:

* ``fusible``: classes that may join a multi-op kernel at all (a collective,
  a scan or an opaque op always runs alone);
* ``max_anchors``: GEMM-class ops per kernel (``0``: matmuls are library calls
  that take no prologue or epilogue);
* ``prologue`` / ``epilogue``: classes allowed upstream / downstream of the
  anchor inside its kernel (a norm feeding a GEMM, an activation after it);
* ``templates``: kernels with two anchors: ``flash_attention`` (score GEMM ->
  softmax -> value GEMM, the online-softmax chain of Dao et al. 2022) and
  ``dual_gemm`` (two GEMMs reading one input, outputs meeting in an
  elementwise op: a gated MLP's gate and up).

* ``horizontal``: classes whose *siblings* may share a kernel: ops with no path
  between them that read one common input that is not a weight (a
  transformer's q/k/v projections of one normalised activation). Sibling GEMMs
  run as one GEMM over their concatenated weights: they count as one anchor,
  hold one working set, and the kernel reads the shared input once. Off in
  the shipped tables (``get_legality("default", horizontal={"gemm"})`` turns it
  on): sibling groups multiply the exact solver's candidates.

Elementwise ops, reductions with their broadcast consumers and gathers mix
freely without an anchor. A table is overridable per backend
(``LEGALITY["inductor"].replace(max_anchors=1)``).

On-chip capacity: a group keeps one tile of every internal tensor
(:func:`costmodel.fusion.group_footprint`) plus, per anchor, the blocked GEMM
working set (:func:`costmodel.tiling.gemm_tile_bytes`). Tiles: a group without
an anchor holds one row of the full last dimension (``1 x None``); with an
anchor ``128 x 128`` output tiles, widened to full rows (``128 x None``) when
a row reduction (a norm, a softmax outside the FlashAttention template) shares
the kernel. The group claims the first level of ``levels`` it fits:

.. math::

    F_\\text{group} \\le C_\\text{smem, per SM}
    \\quad\\text{or}\\quad
    F_\\text{group} \\le C_\\text{L2} / n_\\text{SM}

(every SM holds one tile at once, so L2 gives each its share).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

import networkx as nx

from .cost import as_float
from .fusion import FusionError, Group, group_footprint, is_free
from .graph import KIND, OP, PARAMS, NodeKind
from .hardware.spec import Hardware
from .results import Result
from .tiling import gemm_tile_bytes

__all__ = [
    "OP_CLASSES",
    "activation_gemm",
    "OP_CLASS_NAMES",
    "TEMPLATES",
    "Legality",
    "LEGALITY",
    "get_legality",
    "Claim",
    "group_violation",
    "group_tile",
    "claim_level",
    "anchor_bytes",
    "group_footprint_bytes",
    "working_set_bytes",
    "anchors_working_set",
    "siblings",
    "activation_inputs",
    "effective_anchors",
    "template_possible",
    "level_capacity",
]

#: op rule -> op class (a rule not listed is ``opaque``: it never shares a kernel)
OP_CLASSES: Mapping[str, str] = MappingProxyType(
    {
        "elementwise": "elementwise",
        "rope": "elementwise",
        "copy": "elementwise",
        "view": "free",
        "reduction": "reduction",
        "softmax": "reduction",
        "layernorm": "norm",
        "rmsnorm": "norm",
        "gemm": "gemm",
        "grouped_gemm": "gemm",
        "batched_gemm": "gemm",
        "per_sample_matmul": "gemm",
        "attention": "attention",
        "embedding": "gather",
        "all_reduce": "collective",
        "all_gather": "collective",
        "reduce_scatter": "collective",
        "all_to_all": "collective",
        "selective_scan": "scan",
        "selective_scan_s6": "scan",
        "gated_delta_rule": "scan",
        "causal_conv1d": "scan",
    }
)
OP_CLASS_NAMES = frozenset({*OP_CLASSES.values(), "opaque"})
TEMPLATES = frozenset({"flash_attention", "dual_gemm"})
_LEVELS = ("smem", "l2")
_WEIGHT = NodeKind.WEIGHT


@dataclass(frozen=True)
class Legality:
    """A backend's fusion rules (module doc); ``replace`` overrides fields, validated."""

    name: str
    fusible: frozenset[str]
    max_anchors: int = 1
    prologue: frozenset[str] = frozenset()
    epilogue: frozenset[str] = frozenset()
    templates: frozenset[str] = frozenset()
    row_reductions: frozenset[str] = frozenset({"reduction", "norm"})
    horizontal: frozenset[str] = frozenset()
    levels: tuple[str, ...] = _LEVELS
    anchor_tile: int = 128
    classes: Mapping[str, str] = field(default_factory=lambda: OP_CLASSES)

    def __post_init__(self) -> None:
        for fname in ("fusible", "prologue", "epilogue", "row_reductions", "horizontal"):
            bad = set(getattr(self, fname)) - OP_CLASS_NAMES
            if bad:
                raise FusionError(
                    f"legality {self.name!r}: {fname} has unknown op classes {sorted(bad)}; "
                    f"known: {sorted(OP_CLASS_NAMES)}"
                )
        if set(self.templates) - TEMPLATES:
            raise FusionError(
                f"legality {self.name!r}: templates {sorted(set(self.templates) - TEMPLATES)} unknown; "
                f"known: {sorted(TEMPLATES)}"
            )
        if set(self.levels) - set(_LEVELS) or not self.levels:
            raise FusionError(
                f"legality {self.name!r}: levels {self.levels} must be a non-empty subset of {_LEVELS}"
            )
        if not isinstance(self.max_anchors, int) or self.max_anchors < 0:
            raise FusionError(
                f"legality {self.name!r}: max_anchors must be an integer >= 0, got {self.max_anchors!r}"
            )
        if not isinstance(self.anchor_tile, int) or self.anchor_tile <= 0:
            raise FusionError(
                f"legality {self.name!r}: anchor_tile must be a positive integer, got {self.anchor_tile!r}"
            )

    def replace(self, **changes: object) -> Legality:
        """A copy with ``changes`` (field names as keywords; sets as any iterable)."""
        fields = {f.name for f in dataclasses.fields(self)}
        bad = set(changes) - fields
        if bad:
            raise FusionError(f"legality has no field(s) {sorted(bad)}; fields: {sorted(fields)}")
        conv = {
            k: frozenset(v)  # type: ignore[call-overload]
            if k in ("fusible", "prologue", "epilogue", "templates", "row_reductions", "horizontal")
            else v
            for k, v in changes.items()
        }
        return dataclasses.replace(self, **conv)  # type: ignore[arg-type]

    def class_of(self, g: nx.DiGraph, n: str) -> str:
        """The op class of node ``n`` (``free`` for any metadata-only op)."""
        if is_free(g, n):
            return "free"
        return self.classes.get(g.nodes[n].get(OP, ""), "opaque")


_POINTWISE = frozenset({"elementwise", "reduction", "norm", "gather", "free"})

#: backend rule tables
LEGALITY: Mapping[str, Legality] = MappingProxyType(
    {
        # what a hand-written or template library can reach: one GEMM with a norm/elementwise
        # prologue and an elementwise/row-reduction epilogue, FlashAttention, dual GEMM
        "default": Legality(
            "default",
            fusible=_POINTWISE | {"gemm"},
            max_anchors=1,
            prologue=_POINTWISE,
            epilogue=frozenset({"elementwise", "reduction", "norm", "free"}),
            templates=TEMPLATES,
        ),
        # Inductor's default scheduler: pointwise ops, reductions and gathers fuse (vertically, and
        # horizontally: its own horizontal kernels reach the planner as offered groups); matmuls and
        # SDPA are extern library calls taking no prologue or epilogue
        "inductor": Legality("inductor", fusible=_POINTWISE, max_anchors=0),
        # a GEMM library with epilogue fusion only (cuBLASLt: bias, activation, elementwise)
        "cublaslt": Legality(
            "cublaslt",
            fusible=_POINTWISE | {"gemm"},
            max_anchors=1,
            prologue=frozenset({"free"}),
            epilogue=frozenset({"elementwise", "free"}),
            templates=frozenset({"flash_attention"}),
        ),
    }
)


def get_legality(backend: str | Legality = "default", **overrides: object) -> Legality:
    """The rule table of ``backend`` (a name in :data:`LEGALITY` or a table), with ``overrides``."""
    if isinstance(backend, Legality):
        table = backend
    elif backend in LEGALITY:
        table = LEGALITY[backend]
    else:
        raise FusionError(f"backend must be one of {sorted(LEGALITY)} or a Legality, got {backend!r}")
    return table.replace(**overrides) if overrides else table


def activation_gemm(g: nx.DiGraph, n: str, leg: Legality) -> bool:
    """Whether ``n`` is a GEMM-class op that reads no weight (through views): a product of two
    activations, as FlashAttention's ``Q K^T`` and ``P V`` are, told from the graph's structure
    rather than from the op's rule name."""
    if leg.class_of(g, n) != "gemm":
        return False
    return len(activation_inputs(g, n)) == len(list(g.predecessors(n))) >= 2


def template_possible(g: nx.DiGraph, a: str, b: str, leg: Legality) -> bool:
    """Whether GEMMs ``a`` and ``b`` can share a kernel under some template of ``leg`` once the
    right ops join them: two batched GEMMs on one path (FlashAttention), or two GEMMs reading one
    activation with no path between them (dual GEMM)."""
    linked = nx.has_path(g, a, b) or nx.has_path(g, b, a)
    flash = linked and all(activation_gemm(g, x, leg) for x in (a, b))
    shared = {s for s in set(g.predecessors(a)) & set(g.predecessors(b)) if g.nodes[s].get(KIND) != _WEIGHT}
    return ("flash_attention" in leg.templates and flash) or (
        "dual_gemm" in leg.templates and not linked and bool(shared)
    )


def activation_inputs(g: nx.DiGraph, n: str) -> list[str]:
    """What ``n`` reads that is not a weight, each seen through views (a reshape of the same
    activation is the same input)."""
    out = []
    for s in g.predecessors(n):
        for _ in range(16):
            preds = list(g.predecessors(s))
            if not (is_free(g, s) and len(preds) == 1):
                break
            s = preds[0]
        if g.nodes[s].get(KIND) != _WEIGHT:
            out.append(s)
    return out


def siblings(g: nx.DiGraph, anchors: list[str] | tuple[str, ...]) -> bool:
    """Whether ops ``anchors`` (two or more) read one common input that is not a weight and no
    path joins any two of them: one GEMM over their concatenated weights can run them all."""
    if len(anchors) < 2:
        return False
    shared = set.intersection(*(set(activation_inputs(g, a)) for a in anchors))
    if not shared:
        return False
    return not any(nx.has_path(g, a, b) for a in anchors for b in anchors if a != b)


def effective_anchors(g: nx.DiGraph, anchors: list[str], leg: Legality) -> int:
    """GEMM-class ops of a kernel as anchors: sibling GEMMs under a table with horizontal GEMMs
    count as one (they run as one GEMM over concatenated weights)."""
    if "gemm" in leg.horizontal and siblings(g, anchors):
        return 1
    return len(anchors)


def _template(g: nx.DiGraph, members: set[str], anchors: list[str], leg: Legality) -> str | None:
    """The two-anchor template ``anchors`` form inside ``members``, if any."""
    a, b = anchors
    if nx.has_path(g, b, a):
        a, b = b, a
    if "flash_attention" in leg.templates and nx.has_path(g, a, b):
        sub = g.subgraph(members)
        between = nx.descendants(sub, a) & nx.ancestors(sub, b)
        if any(leg.class_of(g, n) == "reduction" for n in between) and all(
            activation_gemm(g, x, leg) for x in anchors
        ):
            return "flash_attention"
    if "dual_gemm" in leg.templates and not nx.has_path(g, a, b):
        shared = {
            s for s in set(g.predecessors(a)) & set(g.predecessors(b)) if g.nodes[s].get(KIND) != _WEIGHT
        }
        meet = nx.descendants(g, a) & nx.descendants(g, b) & members
        if shared and meet:
            return "dual_gemm"
    return None


def group_violation(g: nx.DiGraph, members: tuple[str, ...] | list[str], leg: Legality) -> str | None:
    """The first rule of ``leg`` a group of ``members`` breaks, in words naming it (None: legal).

    Convexity and capacity are checked elsewhere (:func:`costmodel.fusion.check_plan`,
    :func:`claim_level`)."""
    mset = set(members)
    real = [m for m in members if leg.class_of(g, m) != "free"]
    if len(real) <= 1:
        return None
    for m in real:
        c = leg.class_of(g, m)
        if c not in leg.fusible:
            return f"fusible: class {c!r} ({m}) never shares a kernel under {leg.name!r}"
    anchors = [m for m in real if leg.class_of(g, m) == "gemm"]
    if effective_anchors(g, anchors, leg) > leg.max_anchors:
        tmpl = _template(g, mset, anchors, leg) if len(anchors) == 2 else None
        if tmpl is None:
            return f"max_anchors: {len(anchors)} GEMM-class ops in one kernel, {leg.name!r} allows {leg.max_anchors}"
    tied = set(anchors)
    for a in anchors:
        tied |= (nx.ancestors(g, a) | nx.descendants(g, a)) & mset
    loose = [m for m in real if m not in tied]
    if anchors and loose:
        return f"anchor: {loose[0]} is on no path through the kernel's GEMM (a GEMM takes only its prologue and epilogue)"
    for a in anchors:
        up, down = nx.ancestors(g, a) & mset, nx.descendants(g, a) & mset
        for m in real:
            if m in anchors:
                continue
            c = leg.class_of(g, m)
            if m in up and c not in leg.prologue:
                return (
                    f"prologue: class {c!r} ({m}) may not run before a GEMM in its kernel under {leg.name!r}"
                )
            if m not in up and c not in leg.epilogue and (m in down or c not in leg.prologue):
                return f"epilogue: class {c!r} ({m}) may not follow a GEMM in its kernel under {leg.name!r}"
    return None


def group_tile(g: nx.DiGraph, members: tuple[str, ...] | list[str], leg: Legality) -> tuple[int, int | None]:
    """The tile (rows, cols; None: the full extent) a group holds of each intermediate (module doc)."""
    classes = [leg.class_of(g, m) for m in members]
    anchors = [m for m, c in zip(members, classes, strict=True) if c == "gemm"]
    if not anchors:
        return (1, None)
    rows = any(c in leg.row_reductions for c in classes)
    flash = len(anchors) == 2 and _template(g, set(members), anchors, leg) == "flash_attention"
    return (leg.anchor_tile, None if rows and not flash else leg.anchor_tile)


@dataclass(frozen=True)
class Claim(Result):
    """The on-chip level a group's tiles claim: its footprint against that level's capacity."""

    level: str | None  #: None: fits no level of the table (or the device gives no capacity)
    footprint_bytes: float
    capacity_bytes: float | None
    checked: bool  #: False when the device gives no capacity for any level


def level_capacity(hw: Hardware, level: str) -> float | None:
    """Bytes one SM's tile may claim at ``level``: SMEM per SM, or L2 / SM count (None: unknown)."""
    lvl = next((m for m in hw.memory if m.name == level), None)
    if lvl is None or lvl.capacity_bytes is None:
        return None
    cap = as_float(lvl.capacity_bytes)
    if lvl.per == "sm":
        return cap
    return cap / hw.sm_count if hw.sm_count else None


def claim_level(
    g: nx.DiGraph,
    members: tuple[str, ...] | list[str],
    hw: Hardware,
    leg: Legality,
    footprint: float | None = None,
) -> Claim:
    """The first level of ``leg.levels`` the group's footprint fits on ``hw`` (module doc).

    ``footprint`` (bytes) skips recomputing it when the caller already has it."""
    if footprint is None:
        footprint = group_footprint_bytes(g, members, leg)
    caps = [(lvl, level_capacity(hw, lvl)) for lvl in leg.levels]
    known = [(lvl, c) for lvl, c in caps if c is not None]
    if not known:
        return Claim(None, footprint, None, False)
    for lvl, c in known:
        if footprint <= c:
            return Claim(lvl, footprint, c, True)
    return Claim(None, footprint, known[-1][1], True)


def anchor_bytes(g: nx.DiGraph, n: str, leg: Legality) -> float:
    """The blocked-GEMM working set of anchor ``n`` (:func:`costmodel.tiling.gemm_tile_bytes`)."""
    dtype = g.nodes[n].get(PARAMS, {}).get("dtype", "bf16")  # the rule's own default
    return float(gemm_tile_bytes(leg.anchor_tile, leg.anchor_tile, dtype=dtype))


def anchors_working_set(g: nx.DiGraph, members: tuple[str, ...] | list[str], leg: Legality) -> float:
    """Bytes of the group's GEMM working sets: one per anchor, one in all for the FlashAttention
    template (its two GEMMs run one after the other on the same Q, K/V and S/P tiles) and for
    sibling GEMMs run as one (the largest)."""
    anchors = [m for m in members if leg.class_of(g, m) == "gemm"]
    sets = [anchor_bytes(g, m, leg) for m in anchors]
    if len(anchors) == 2 and _template(g, set(members), anchors, leg) == "flash_attention":
        return max(sets)
    if len(anchors) > 1 and effective_anchors(g, anchors, leg) == 1:  # one concatenated GEMM
        return max(sets)
    return sum(sets)


def group_footprint_bytes(g: nx.DiGraph, members: tuple[str, ...] | list[str], leg: Legality) -> float:
    """Tiles of the group's internal tensors plus its GEMM working sets (bytes), at the tile
    :func:`group_tile` gives the group under ``leg``."""
    rows, cols = group_tile(g, members, leg)
    return working_set_bytes(g, Group("f", tuple(members), tile_rows=rows, tile_cols=cols), leg)


def working_set_bytes(g: nx.DiGraph, group: Group, leg: Legality) -> float:
    """On-chip bytes one SM holds for ``group`` at the group's own tile (module doc): one tile of
    every internal tensor (:func:`costmodel.fusion.group_footprint`) plus, per anchor, the blocked
    GEMM working set at ``leg.anchor_tile`` (:func:`anchors_working_set`). The one measure of
    on-chip fit: the planner's candidates, the audit's footprints and its suggestions.

    Parameters
    ----------
    g : networkx.DiGraph
        The op graph (numeric costs).
    group : Group
        The fused group; its ``tile_rows`` / ``tile_cols`` size the internal tensors' tiles.
    leg : Legality
        The rule table whose anchor tile and op classes count the GEMM working sets.
    """
    inter = as_float(group_footprint(g, group))
    return inter + anchors_working_set(g, group.members, leg)
