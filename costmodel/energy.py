"""Energy: joules per operation and per byte moved, and what they imply.

The default table is Horowitz, "Computing's energy problem (and what we can do
about it)", ISSCC 2014, 45 nm, 0.9 V:

=====================  =========  ======================================
operation              energy     per FLOP (a MAC = multiply + add = 2)
=====================  =========  ======================================
8-bit int add / mult   0.03/0.2   (0.2 + 0.03) / 2 = 0.115 pJ (int8)
32-bit int add / mult  0.1 / 3.1  (3.1 + 0.1) / 2 = 1.6 pJ (int32)
16-bit fp add / mult   0.4 / 1.1  (1.1 + 0.4) / 2 = 0.75 pJ (fp16, bf16)
32-bit fp add / mult   0.9 / 3.7  (3.7 + 0.9) / 2 = 2.3 pJ (fp32)
SRAM read, 64 bit      8 KB: 10, 32 KB: 20, 1 MB: 100 pJ
DRAM read, 64 bit      1.3 - 2.6 nJ (per byte 162.5 - 325 pJ)
=====================  =========  ======================================

A FLOP's energy is the mean of its multiply and add; a transcendental on the
SFU is charged ``sfu_ops_factor`` FLOPs (default 4: a polynomial/range
reduction). ``scale`` rescales logic and SRAM to another process node,
``dram_scale`` the off-chip access (e.g. HBM3 at ~4 pJ/bit is 0.25x of the
1.3 nJ/64-bit figure). Precisions missing from the table raise an error
rather than borrow a number.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import sympy

from .cost import Cost
from .errors import CostModelError
from .expr import to_expr
from .graph import COST, REPEAT, op_nodes
from .keys import Level, NodeKind
from .results import Result

__all__ = [
    "EnergyTable",
    "HOROWITZ_45NM",
    "energy",
    "graph_energy",
    "GraphEnergy",
    "energy_ridge",
    "reuse_factor",
]

PJ = sympy.Rational(1, 10**12)


@dataclass(frozen=True)
class EnergyTable:
    """Picojoules per FLOP by precision and per byte by memory level (module doc)."""

    pj_per_flop: dict[str, sympy.Expr]
    pj_per_byte: dict[str, sympy.Expr]
    sfu_ops_factor: Any = 4
    scale: Any = 1
    dram_scale: Any = 1
    source: str = ""
    aliases: dict[str, str] = field(default_factory=dict)

    def flop_j(self, precision: str) -> sympy.Expr:
        key = self.aliases.get(precision, precision)
        if key not in self.pj_per_flop:
            raise CostModelError(
                f"energy table has no FLOP energy for precision {precision!r}; has: "
                f"{', '.join(sorted(self.pj_per_flop))}"
            )
        return self.pj_per_flop[key] * self.scale * PJ

    def byte_j(self, level: str) -> sympy.Expr:
        if level not in self.pj_per_byte:
            raise CostModelError(
                f"energy table has no energy for memory level {level!r}; has: "
                f"{', '.join(sorted(self.pj_per_byte))}"
            )
        factor = self.dram_scale if level == "dram" else self.scale
        return self.pj_per_byte[level] * factor * PJ

    def scaled(self, scale: Any = 1, dram_scale: Any = 1) -> EnergyTable:
        """The same table at another node: logic/SRAM x ``scale``, DRAM x ``dram_scale``."""
        return EnergyTable(
            self.pj_per_flop,
            self.pj_per_byte,
            self.sfu_ops_factor,
            self.scale * to_expr(scale, field="scale"),
            self.dram_scale * to_expr(dram_scale, field="dram_scale"),
            self.source + f" (scaled x{scale}, DRAM x{dram_scale})",
            self.aliases,
        )


_R = sympy.Rational
HOROWITZ_45NM = EnergyTable(
    pj_per_flop={
        "int8": (_R(2, 10) + _R(3, 100)) / 2,
        "int32": (_R(31, 10) + _R(1, 10)) / 2,
        "fp16": (_R(11, 10) + _R(4, 10)) / 2,
        "fp32": (_R(37, 10) + _R(9, 10)) / 2,
    },
    pj_per_byte={
        "dram": _R(1300, 8),  # 1.3 nJ per 64-bit access: the low end of Horowitz's 1.3-2.6 nJ
        "smem": _R(20, 8),  # 32 KB SRAM, 20 pJ per 64 bits
        "l2": _R(100, 8),  # 1 MB SRAM, 100 pJ per 64 bits
    },
    source="Horowitz, ISSCC 2014, 45 nm: FP/INT add and multiply by width, SRAM by size, DRAM 1.3-2.6 nJ/64 bit",
    aliases={"bf16": "fp16", "tf32": "fp32"},
)


def energy(cost: Cost, table: EnergyTable = HOROWITZ_45NM) -> dict[str, sympy.Expr]:
    """Joules of ``cost``: arithmetic per unit and movement per level, and the total."""
    out: dict[str, sympy.Expr] = {}
    for (unit, prec), f in cost.flop_terms.items():
        ops = f * (table.sfu_ops_factor if unit == "sfu" else 1)
        out[f"compute:{unit}"] = out.get(f"compute:{unit}", 0) + ops * table.flop_j(prec)
    for level in cost.levels:
        out[f"memory:{level}"] = cost.bytes_at(level) * table.byte_j(level)
    out["total"] = sympy.Add(*out.values())
    return out


@dataclass(frozen=True)
class GraphEnergy(Result):
    """Joules of a graph's op nodes (``x repeat``): ``terms`` per unit (``compute:<unit>``) and
    level (``memory:<level>``); ``weight_reads`` is the DRAM energy of the bytes read from weight
    nodes (the graph's edge bytes), part of ``memory:dram``."""

    terms: dict[str, sympy.Expr]
    arithmetic: sympy.Expr
    weight_reads: sympy.Expr
    total: sympy.Expr


def graph_energy(g: Any, table: EnergyTable = HOROWITZ_45NM) -> GraphEnergy:
    """Energy of a graph's op nodes (``x repeat``), split into arithmetic, DRAM and weight reads."""
    from .graph import edge_bytes_total

    terms: dict[str, sympy.Expr] = {}
    for n in op_nodes(g):
        e = energy(g.nodes[n][COST], table)
        rep = g.nodes[n].get(REPEAT, 1)
        for k, v in e.items():
            if k != "total":
                terms[k] = terms.get(k, 0) + v * rep
    return GraphEnergy(
        terms=terms,
        arithmetic=sympy.Add(*(v for k, v in terms.items() if k.startswith("compute:"))),
        weight_reads=edge_bytes_total(g, source_kind=NodeKind.WEIGHT) * table.byte_j(Level.DRAM),
        total=sympy.Add(*terms.values()),
    )


def energy_ridge(
    precision: str = "bf16", level: str = "dram", table: EnergyTable = HOROWITZ_45NM
) -> sympy.Expr:
    """FLOPs per byte at which arithmetic energy equals movement energy: ``e_byte / e_flop``.

    >>> energy_ridge("bf16", "dram")
    650/3
    """
    return table.byte_j(level) / table.flop_j(precision)


def reuse_factor(
    fraction: Any = "1/2",
    precision: str = "bf16",
    level: str = "dram",
    table: EnergyTable = HOROWITZ_45NM,
) -> sympy.Expr:
    """FLOPs each byte must feed so arithmetic is ``fraction`` of the energy.

    From ``F e_F / (F e_F + D e_D) = f``:

    .. math::

        \\frac{F}{D} = \\frac{f}{1 - f}\\,\\frac{e_D}{e_F}

    (``f = 1/2`` is the energy ridge point). Specialised hardware earns its
    efficiency only if its dataflow reuses each fetched byte this many times.

    >>> reuse_factor(sympy.Rational(9, 10))
    1950
    """
    f = to_expr(fraction, field="fraction")
    if not (f.is_number and 0 < f < 1):
        raise CostModelError(f"fraction must be in (0, 1), got {f}")
    return f / (1 - f) * energy_ridge(precision, level, table)
