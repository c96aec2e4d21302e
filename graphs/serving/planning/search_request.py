"""A ``search`` request: the design space and the objectives of one Pareto search, typed and checked
in one place (issue 43 item 3).

:class:`SearchRequest` is what ``costmodel search`` parses its command line into and what a Python
caller builds without one; building it checks each axis (whole numbers in range, at least one
value), the SLOs and the settings that depend on each other (``rank_by='pessimistic'`` needs a
predictor, a price needs the cost objective), each refusal one line naming the option as the
command line spells it. :meth:`SearchRequest.run` searches a model with it
(:func:`graphs.serving.planning.design_search.search`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from costmodel.errors import CostModelError
from graphs.serving.step.option_checks import (
    check_choice,
    check_device_repeats,
    check_devices,
    check_number,
    check_whole_list,
    flag,
)

__all__ = ["SearchRequest", "AXES"]

#: each grid axis: (largest value accepted, most values accepted); the smallest is 1
AXES: dict[str, tuple[int, int]] = {
    "tp": (4096, 10_000),
    "pp": (4096, 10_000),
    "ep": (4096, 10_000),
    "microbatches": (4096, 10_000),
    "batches": (10**7, 100_000),
    "ctxs": (10**8, 100_000),
    "dp": (4096, 64),
}
#: the SLOs accepted (s), as the command line's ``--slo-ttft`` / ``--slo-tpot``
_SLO_RANGE = (1e-6, 1e6)
_PROMPT_RANGE = (1, 10**8)


@dataclass(frozen=True, slots=True)
class SearchRequest:
    """The design space and objectives of one search, checked when built (module doc).

    Parameters
    ----------
    batches, ctxs : tuple of int
        Batch sizes and contexts (tokens) to evaluate.
    devices : tuple of str
        Catalog device names or aliases.
    tp, pp, ep, microbatches : tuple of int
        Tensor-parallel, pipeline, expert-parallel degrees and pipeline micro-batches.
    weight_dtypes, kv_dtypes : tuple of str or None
        Data types to try (None: the model's own).
    prompt : int, optional
        Prompt tokens for TTFT (None: each point's context).
    slo_ttft, slo_tpot : float, optional
        Drop points above these (s).
    energy, cost : bool
        Energy per token, USD per million output tokens as further objectives.
    price_per_hour : str, optional
        USD per device-hour: one number, or ``DEVICE=USD,...``
        (:func:`graphs.serving.planning.cost.parse_prices`); needs ``cost``.
    electricity_per_kwh : float
        USD per kWh over TDP (needs ``cost`` when not 0).
    predict : str, optional
        The corpus framework whose measured kernels price every step (None: the bound).
    rank_by : str
        ``point`` or ``pessimistic`` (the P90 end of each point's interval; needs ``predict``).
    spec_draft, spec_k, spec_accept
        Speculative decoding at every point
        (:func:`graphs.serving.sim.simulation_request.spec_config`).
    dp : tuple of int
        Data-parallel attention ranks per replica to try (an MoE model; 1: none;
        :mod:`graphs.serving.sim.data_parallel`).
    expert_parallel : bool
        With ``dp > 1``: each device holds whole experts instead of every expert split dp x tp ways.
    moe_dispatch : str
        With ``dp > 1``: ``allgather_reducescatter`` or ``all_to_all``.
    """

    batches: tuple[int, ...]
    ctxs: tuple[int, ...]
    devices: tuple[str, ...] = ("h100-sxm",)
    tp: tuple[int, ...] = (1,)
    pp: tuple[int, ...] = (1,)
    ep: tuple[int, ...] = (1,)
    microbatches: tuple[int, ...] = (1,)
    weight_dtypes: tuple[str | None, ...] = (None,)
    kv_dtypes: tuple[str | None, ...] = (None,)
    prompt: int | None = None
    slo_ttft: float | None = None
    slo_tpot: float | None = None
    energy: bool = False
    cost: bool = False
    price_per_hour: str | None = None
    electricity_per_kwh: float = 0.0
    predict: str | None = None
    rank_by: str = "point"
    spec_draft: str | None = None
    spec_k: int | None = None
    spec_accept: str | None = None
    dp: tuple[int, ...] = (1,)
    expert_parallel: bool = False
    moe_dispatch: str = "allgather_reducescatter"

    def __post_init__(self) -> None:
        from .cost import ELECTRICITY_RANGE
        from .design_search import RANK_BY

        check_choice("rank_by", self.rank_by, RANK_BY)
        if self.rank_by == "pessimistic" and not self.predict:
            raise CostModelError(
                "--rank-by pessimistic needs --predict FRAMEWORK (the bound has no interval)"
            )
        check_devices(self.devices)
        check_device_repeats(self.devices, "--devices")  # an alias is its device
        check_choice("moe_dispatch", self.moe_dispatch, ("allgather_reducescatter", "all_to_all"))
        for name, (hi, most) in AXES.items():
            check_whole_list(name, getattr(self, name), hi, most)
        for name in ("weight_dtypes", "kv_dtypes"):
            if not isinstance(getattr(self, name), tuple) or not getattr(self, name):
                raise CostModelError(f"{flag(name)} must list at least one data type (None: the model's)")
        if self.prompt is not None:
            check_number("prompt", self.prompt, *_PROMPT_RANGE, whole=True)
            from .design_search import check_prompt_within

            check_prompt_within(self.prompt, self.ctxs, flags=True)
        for name in ("slo_ttft", "slo_tpot"):
            if getattr(self, name) is not None:
                check_number(name, getattr(self, name), *_SLO_RANGE)
        check_number("electricity_per_kwh", self.electricity_per_kwh, *ELECTRICITY_RANGE)
        if not self.cost and (self.price_per_hour is not None or self.electricity_per_kwh):
            raise CostModelError(
                "--price-per-hour/--electricity-per-kwh price the --cost objective: add --cost (else they are unused)"
            )
        self.prices()  # a bad price, or one for a device not searched
        self.spec()

    def prices(self) -> dict[str, float]:
        """``price_per_hour`` by catalog device name (empty: the catalog's prices)."""
        from .cost import parse_prices

        return parse_prices(self.price_per_hour, list(self.devices))

    def spec(self) -> Any:
        """Speculative decoding at every point: a :class:`~graphs.serving.sim.specdec_sim.SpecConfig`,
        or None."""
        from graphs.serving.sim.simulation_request import spec_config

        return spec_config(self.spec_draft, self.spec_k, self.spec_accept)

    def run(
        self,
        config: Any,
        *,
        predictor: Any = None,
        client: Any = None,
        progress: Callable[[int, int], None] | None = None,
    ) -> Any:
        """Search ``config`` over this design space.

        Parameters
        ----------
        config : ModelConfig
            The model.
        predictor : Predictor, optional
            Prices every step (``predict``'s; None: the bound).
        client : dask.distributed.Client, optional
            Runs the grid's blocks on its workers.
        progress : callable, optional
            ``progress(done, total)`` as blocks complete.

        Returns
        -------
        SearchResult
            The Pareto frontier (:func:`graphs.serving.planning.design_search.search`).
        """
        from .design_search import search

        kw: dict[str, Any] = dict(
            predictor=predictor,
            rank_by=self.rank_by,
            devices=list(self.devices),
            tp=list(self.tp),
            pp=list(self.pp),
            ep=list(self.ep),
            microbatches=list(self.microbatches),
            batches=list(self.batches),
            ctxs=list(self.ctxs),
            weight_dtypes=list(self.weight_dtypes),
            kv_dtypes=list(self.kv_dtypes),
            prompt=self.prompt,
            slo_ttft=self.slo_ttft,
            slo_tpot=self.slo_tpot,
            energy=self.energy,
            cost=self.cost,
            prices=self.prices(),
            electricity_per_kwh=self.electricity_per_kwh,
            progress=progress,
            spec=self.spec(),
            dp=list(self.dp),
            expert_parallel=self.expert_parallel,
            moe_dispatch=self.moe_dispatch,
        )
        return search(config, client=client, **kw) if client is not None else search(config, **kw)
