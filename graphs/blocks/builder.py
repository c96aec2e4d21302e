"""A small helper that adds costed nodes and tensor edges to a DiGraph."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import networkx as nx

from costmodel.cost import Cost
from costmodel.expr import to_expr
from costmodel.graph import (
    BYTES,
    COST,
    GROUP,
    INPUTS,
    KIND,
    OP,
    OUTPUTS,
    PARAMS,
    PHASE,
    REPEAT,
    TENSOR,
    GraphError,
)
from costmodel.keys import ROLE, Role
from costmodel.rules import op_cost
from costmodel.tensor import Tensor

__all__ = ["GraphBuilder", "Ref"]

#: A reference to a tensor a node produced: (node name, tensor), optionally
#: with the bytes the consumer actually reads from it.
Ref = tuple[str, Tensor] | tuple[str, Tensor, Any]


class GraphBuilder:
    """Adds nodes under a name prefix, with a group, phase and repeat count."""

    def __init__(self, g: nx.DiGraph, *, phase: str, group: str, repeat: object = 1) -> None:
        self.g = g
        self.phase = phase
        self.group = group
        self.repeat = to_expr(repeat, field="repeat")

    def name(self, local: str) -> str:
        return f"{self.group}.{local}"

    def source(self, local: str, tensor: Tensor, kind: str, *, resident: bool = True) -> tuple[str, Tensor]:
        """A weight, KV-cache or input node; its cost is its residency."""
        n = self.name(local)
        category = {"weight": "weights", "kv_cache": "kv_cache", "input": "activations"}[kind]
        cost = Cost.resident(**{category: tensor.bytes}) if resident else Cost.zero()
        self.g.add_node(
            n,
            **{
                KIND: kind,
                COST: cost,
                OUTPUTS: (tensor,),
                GROUP: self.group,
                PHASE: self.phase,
                REPEAT: self.repeat,
            },
        )
        return n, tensor

    def op(
        self,
        local: str,
        rule: str,
        role: Role,
        ins: Sequence[Ref],
        outs: Sequence[Tensor],
        /,
        *,
        extra: Cost | None = None,
        attrs: Mapping[str, Any] | None = None,
        **params: Any,
    ) -> list[tuple[str, Tensor]]:
        """An op node costed by ``rule(**params)``, doing the job ``role`` names; edges from each
        input ref; ``attrs``: further node attributes (keys of :mod:`costmodel.keys`)."""
        n = self.name(local)
        if n in self.g:
            raise GraphError(f"node {n!r} already exists")
        cost = op_cost(rule, **params)
        if extra is not None:
            cost = cost + extra
        self.g.add_node(
            n,
            **{
                KIND: "op",
                OP: rule,
                ROLE: Role(role),
                PARAMS: params,
                COST: cost,
                INPUTS: tuple(r[1] for r in ins),
                OUTPUTS: tuple(outs),
                GROUP: self.group,
                PHASE: self.phase,
                REPEAT: self.repeat,
                **(attrs or {}),
            },
        )
        for ref in ins:
            src, t = ref[0], ref[1]
            nbytes = ref[2] if len(ref) > 2 else t.bytes
            if self.g.has_edge(src, n):
                raise GraphError(f"two tensors from {src!r} into {n!r}: split the producer")
            self.g.add_edge(
                src, n, **{TENSOR: t, BYTES: to_expr(nbytes, field=f"bytes of the edge {src!r} -> {n!r}")}
            )
        return [(n, t) for t in outs]
