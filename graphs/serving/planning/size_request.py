"""A ``size`` request: the load, the SLOs and the candidates of one sizing, typed and checked in
one place (issue 43 item 3).

:class:`SizeRequest` is what ``costmodel size`` parses its command line into and what a Python
caller builds without one; building it checks each setting's range, the candidates (devices, tp
degrees) and the settings that depend on each other (a KV link needs P:D splits, prices must name
devices searched), each refusal one line naming the option as the command line spells it.
:meth:`SizeRequest.run` sizes a model with it (:func:`graphs.serving.planning.sizing.size_deployment`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from costmodel.errors import CostModelError
from graphs.serving.step.option_checks import (
    check_choice,
    check_device_repeats,
    check_devices,
    check_number,
    check_whole_list,
)

if TYPE_CHECKING:
    from graphs.serving.engines import EngineProfile

__all__ = ["SizeRequest", "RANGES"]

#: numeric settings: (low, high, low inclusive); whole numbers where the default is an int
RANGES: dict[str, tuple[float, float, bool]] = {
    "rate": (1e-6, 1e9, True),  # requests/s: graphs.serving.sim.requests.RATE_RANGE
    "slo_ttft": (1e-6, 1e6, True),  # s
    "slo_tpot": (1e-6, 1e6, True),  # s
    "percentile": (0.0, 100.0, False),
    "electricity_per_kwh": (0.0, 10.0, True),  # USD/kWh: graphs.serving.planning.cost.ELECTRICITY_RANGE
    "link_bandwidth": (1e6, 1e15, True),  # bytes/s per direction
    "requests": (1, 10**7, True),
    "seed": (0, 2**32 - 1, True),
    "max_simulations": (1, 10_000, True),
}
_WHOLE = ("requests", "seed", "max_simulations")
#: tensor-parallel degrees: the largest accepted, the most values
_TP_MAX, _TP_MOST = 4096, 64


@dataclass(frozen=True, slots=True)
class SizeRequest:
    """The load, SLOs and candidates of one sizing, checked when built (module doc).

    Parameters
    ----------
    rate : float
        Offered load (requests/s).
    slo_ttft, slo_tpot : float
        The TTFT and TPOT SLOs (s) at ``percentile``.
    devices : tuple of str
        Catalog devices to choose from.
    tps : tuple of int
        Tensor-parallel degrees to try.
    objective : str
        ``cost`` (USD/h) or ``gpus`` (devices), minimised.
    disaggregated : bool
        Also try P:D splits (the command line's ``--no-disagg`` turns it off).
    price_per_hour : str, optional
        USD per device-hour: one number or ``DEVICE=USD,...``
        (:func:`graphs.serving.planning.cost.parse_prices`).
    electricity_per_kwh : float
        USD per kWh over TDP.
    link_bandwidth : float, optional
        The KV link between P and D pools (bytes/s; None:
        :data:`~graphs.serving.planning.sizing.DEFAULT_LINK_BANDWIDTH`); refused without P:D splits.
    requests, prompt, output, arrival, seed
        The drawn workload every candidate simulates (:func:`graphs.serving.sim.requests.synthetic`).
    percentile : float
        The SLO percentile.
    profile : EngineProfile, optional
        The engine every candidate runs (None: vLLM's).
    max_simulations : int
        Most candidates simulated.
    allow_long_context : bool
        Simulate requests beyond the model's context limit, with a warning.
    dps : tuple of int
        Data-parallel attention ranks per replica to try (an MoE model; 1: none;
        :mod:`graphs.serving.sim.data_parallel`).
    expert_parallel : bool
        With ``dp > 1``: each device holds whole experts instead of every expert split dp x tp ways.
    moe_dispatch : str
        With ``dp > 1``: ``allgather_reducescatter`` or ``all_to_all``.
    """

    rate: float
    slo_ttft: float
    slo_tpot: float
    devices: tuple[str, ...] = ("h100", "h200", "b200")
    tps: tuple[int, ...] = (1, 2, 4, 8)
    objective: str = "cost"
    disaggregated: bool = True
    price_per_hour: str | None = None
    electricity_per_kwh: float = 0.0
    link_bandwidth: float | None = None
    requests: int = 500
    prompt: str = "lognormal:1000,1.0"
    output: str = "lognormal:250,1.0"
    arrival: str = "poisson"
    seed: int = 0
    percentile: float = 99.0
    profile: EngineProfile | None = None
    max_simulations: int = 60
    allow_long_context: bool = False
    dps: tuple[int, ...] = (1,)
    expert_parallel: bool = False
    moe_dispatch: str = "allgather_reducescatter"

    def __post_init__(self) -> None:
        from graphs.serving.engines import get_engine

        from .sizing import OBJECTIVES

        for name, (lo, hi, inclusive) in RANGES.items():
            if getattr(self, name) is not None:
                check_number(name, getattr(self, name), lo, hi, whole=name in _WHOLE, inclusive=inclusive)
        check_choice("objective", self.objective, OBJECTIVES)
        check_devices(self.devices)
        check_device_repeats(self.devices, "--devices")  # an alias is its device
        check_whole_list("tp", self.tps, _TP_MAX, _TP_MOST)
        check_whole_list("dp", self.dps, _TP_MAX, _TP_MOST)
        check_choice("moe_dispatch", self.moe_dispatch, ("allgather_reducescatter", "all_to_all"))
        if self.link_bandwidth is not None and not self.disaggregated:
            raise CostModelError("--link-bandwidth prices the P:D KV transfer: drop it or --no-disagg")
        if self.profile is None:
            object.__setattr__(self, "profile", get_engine("vllm"))
        self.prices()  # a bad price, or one for a device not offered

    @property
    def link_bps(self) -> float:
        """The P:D KV link (bytes/s): ``link_bandwidth``, else the sizing's default."""
        from .sizing import DEFAULT_LINK_BANDWIDTH

        return DEFAULT_LINK_BANDWIDTH if self.link_bandwidth is None else float(self.link_bandwidth)

    @property
    def engine(self) -> EngineProfile:
        """The engine profile (resolved when built: never None)."""
        assert self.profile is not None  # set by __post_init__
        return self.profile

    def prices(self) -> dict[str, float]:
        """``price_per_hour`` by catalog device name (empty: the catalog's prices)."""
        from .cost import parse_prices

        return parse_prices(self.price_per_hour, list(self.devices))

    def run(
        self,
        config: Any,
        *,
        executor: Any = None,
        lookahead: int = 2,
        progress: Callable[[int, int], None] | None = None,
        run_cards: bool = False,
    ) -> Any:
        """Size ``config`` for this load.

        Parameters
        ----------
        config : ModelConfig
            The model.
        executor : optional
            Where the candidate simulations run (a Dask ``Client`` or a ``concurrent.futures``
            executor); None: here, one by one.
        lookahead : int
            Candidates simulated ahead of the one the search waits for (at least 1).
        progress : callable, optional
            ``progress(done, total)`` as candidates finish.
        run_cards : bool
            Reuse and keep the candidates' runs as cards
            (:mod:`graphs.serving.planning.run_cards`; a deployment read from one has no ``sim``).

        Returns
        -------
        SizingResult
            The winner, the runners-up and what was pruned
            (:func:`graphs.serving.planning.sizing.size_deployment`).
        """
        from .sizing import size_deployment

        return size_deployment(
            config,
            rate=self.rate,
            slo_ttft=self.slo_ttft,
            slo_tpot=self.slo_tpot,
            devices=list(self.devices),
            tps=list(self.tps),
            objective=self.objective,
            disaggregated=self.disaggregated,
            prices=self.prices(),
            electricity_per_kwh=self.electricity_per_kwh,
            requests=self.requests,
            prompt=self.prompt,
            output=self.output,
            arrival=self.arrival,
            seed=self.seed,
            percentile=self.percentile,
            profile=self.engine,
            link_bandwidth=self.link_bps,
            max_simulations=self.max_simulations,
            progress=progress,
            allow_long_context=self.allow_long_context,
            executor=executor,
            lookahead=lookahead,
            dps=list(self.dps),
            expert_parallel=self.expert_parallel,
            moe_dispatch=self.moe_dispatch,
            run_cards=run_cards,
        )
