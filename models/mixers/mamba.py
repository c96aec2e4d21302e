"""The Mamba-1 mixer (Gu & Dao 2023; ``transformers``' ``JambaMambaMixer``)::

    xz    = in_proj(h)                     # [T, 2 D]: x and the gate z
    x     = silu(conv1d(x))                # depthwise, width K, over the D channels
    dbc   = x_proj(x)                      # [T, R + 2N]: the step's low rank, B and C
    (dt, B, C = rmsnorm each, when ssm_inner_norms: Jamba)
    delta = dt_proj(dt)                    # [T, D] (+ bias); softplus inside the scan
    y     = selective_scan_s6(x, delta, A, B, C, D)
    y     = y * silu(z)
    out   = out_proj(y)                    # [T, d], row parallel

Each sequence keeps a ``D x N`` state and a conv state of ``K - 1`` inputs per
channel: the ``state`` footprint. Under tensor parallelism the ``D`` channels
split ``tp`` ways; ``x_proj`` then sums partial products over the devices.
"""

from __future__ import annotations

from typing import Any

import sympy

from costmodel.cost import Cost
from costmodel.dtypes import get_dtype
from costmodel.keys import Role
from costmodel.tensor import Tensor

from .base import ConfigView, LayerContext, Mixer, Ref, register_mixer
from .recurrent import SSMSpec, carries_state, causal_conv, recurrent_state, silu_gate

__all__ = ["Mamba"]


@register_mixer
class Mamba(Mixer):
    """Mamba-1's selective state-space mixer (module doc)."""

    name = "mamba"
    spec_slot = "ssm"
    needs = ("ssm_state_size", "ssm_inner_size", "ssm_dt_rank")

    def params(self, cfg: ConfigView) -> sympy.Expr:
        """Mamba-1 mixer weights of one layer: ``in_proj`` ``2dD``, the conv ``D(K + 1)``,
        ``x_proj`` ``D(R + 2N)``, ``dt_proj`` ``RD + D``, ``A`` ``DN``, ``D`` skip ``D``, ``out_proj``
        ``Dd`` (Gu & Dao 2023; ``JambaMambaMixer``, whose three inner RMSNorms of ``R``, ``N`` and ``N``
        add ``R + 2N``)."""
        s = cfg.need(SSMSpec)
        d, D, N = cfg.hidden_size, s.ssm_inner_size, s.ssm_state_size
        R, K = s.ssm_dt_rank, s.ssm_conv_kernel
        assert D is not None and N is not None and R is not None  # check_layers requires them of mamba layers
        norms = R + 2 * N if s.ssm_inner_norms else 0
        return 2 * d * D + D * (K + 1) + D * (R + 2 * N) + R * D + D + D * N + D + D * d + norms

    def linear_inputs(self, cfg: ConfigView) -> dict[str, Any]:
        """in_proj reads ``d``; x_proj and out_proj the ``D`` inner channels; dt_proj the rank ``R``."""
        s = cfg.need(SSMSpec)
        D = s.ssm_inner_size
        return {"in_proj": cfg.hidden_size, "x_proj": D, "dt_proj": s.ssm_dt_rank, "out_proj": D}

    def build(self, layer: LayerContext, h: Ref) -> Ref:
        """Mamba-1's selective state-space mixer (module doc)."""
        cfg, dims = layer.cfg, layer.dims
        s = cfg.need(SSMSpec)
        T, B = dims.tokens, dims.batch
        D = layer.split(s.ssm_inner_size, "ssm_inner_size")
        N, R, K = s.ssm_state_size, s.ssm_dt_rank, s.ssm_conv_kernel
        assert N is not None and R is not None  # check_layers requires them of mamba layers
        sdt = cfg.recurrent_state_dtype
        carried = carries_state(layer)
        xz = layer.linear("in_proj", h, 2 * D)
        conv = causal_conv(layer, xz, D, K)
        dbc = layer.linear("x_proj", conv, R + 2 * N, reduce=True)
        parts = {}
        for name, width in (("dt", R), ("b", N), ("c", N)):  # slices of x_proj's output: views, no bytes
            v = layer.b.op(
                f"{name}_slice",
                "view",
                Role.VIEW,
                [(*dbc, 0)],
                [Tensor(layer.b.name(f"{name}_slice"), (T, width), layer.act)],
                elements=T * width,
            )[0]
            parts[name] = layer.norm(f"{name}_norm", v, T, width) if s.ssm_inner_norms else v
        delta = layer.linear("dt_proj", parts["dt"], D, bias=True)
        scan_w = layer.weight("A_log_D", (D * N + D,))
        scan_in: list[Any] = [conv, delta, parts["b"], parts["c"], scan_w]
        if carried:
            scan_in.append(recurrent_state(layer, "ssm_state", D * N, sdt))
        y = layer.b.op(
            "scan",
            "selective_scan_s6",
            Role.SCAN,
            scan_in,
            [Tensor(layer.b.name("scan"), (T, D), layer.act)],
            # A and D are read beside the activations; the state stays resident per sequence
            extra=Cost.resident(state=B * D * N * get_dtype(sdt).bytes) + Cost.traffic(read=scan_w[1].bytes),
            tokens=T,
            channels=D,
            state_size=N,
            batch=B,
            dtype=layer.act,
            state_dtype=sdt,
            read_state=carried,
        )[0]
        gated = silu_gate(layer, y, xz, D)
        return layer.linear("out_proj", gated, cfg.hidden_size, reduce=True)
