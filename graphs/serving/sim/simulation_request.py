"""A ``simulate`` request: every setting of a request-level serving simulation, typed and checked
in one place (issue 43 item 3).

:class:`SimulationRequest` is what ``costmodel simulate`` parses its command line into, and what a
Python caller builds without one. Building it checks every setting's range and every dependency
between settings (a prefix router needs prefix caching, a trace fixes the drawn lengths,
``max_rate`` draws its own requests ...), each refusal one line naming the option as the command
line spells it (``--rate``, ``--disagg``), so the command and the library refuse the same input
with the same words. Its methods build the simulator's typed pieces: :meth:`~SimulationRequest.topology`,
:meth:`~SimulationRequest.spec`, :meth:`~SimulationRequest.kv_tiers`.

What stays with the caller: the model (a :class:`~models.ModelConfig`, resolved from a name or a
file), the predictor, output files and the report's format.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

from costmodel.errors import CostModelError

from ..step.option_checks import check_choice, check_number, flag, label

if TYPE_CHECKING:
    from graphs.serving.engines import EngineProfile

__all__ = [
    "SimulationRequest",
    "DRAWN_DEFAULTS",
    "INT_RANGES",
    "FLOAT_RANGES",
    "ROUTER_CHOICES",
    "DISPATCH_CHOICES",
    "DEFAULT_SPEC_K",
    "DEFAULT_PREFIX_EPS",
    "MAX_SWEEP_RATES",
    "spec_config",
]

#: the drawn workload's settings and their defaults: a trace or a replayed run fixes what they draw
DRAWN_DEFAULTS: dict[str, Any] = {
    "requests": 1000,
    "prompt": "lognormal:1000,1.0",
    "output": "lognormal:250,1.0",
    "seed": 0,
}
#: the most rates one ``rates`` sweep simulates (each a whole run: a bound on the work one command asks)
MAX_SWEEP_RATES = 64
#: tokens drafted per step when ``spec_draft`` is given without ``spec_k``
DEFAULT_SPEC_K = 3
#: the prefix router's load bound when none is given (dimensionless: :mod:`.replica_routing`)
DEFAULT_PREFIX_EPS = 0.5
#: :data:`graphs.serving.sim.simulator.ROUTERS` and :data:`graphs.serving.sim.data_parallel.DISPATCHES`
#: (named here so that the command line's parser needs no simulator; a test keeps them equal)
ROUTER_CHOICES = ("round_robin", "least_outstanding", "prefix")
DISPATCH_CHOICES = ("allgather_reducescatter", "all_to_all")

#: whole-number settings: (smallest, largest) accepted
INT_RANGES: dict[str, tuple[int, int]] = {
    "tp": (1, 4096),
    "requests": (1, 10**7),
    "concurrency": (1, 10**7),  # graphs.serving.sim.simulator.MAX_CONCURRENCY
    "prompt_pool": (1, 10**7),
    "turns": (1, 10**4),  # graphs.serving.sim.requests.MAX_TURNS
    "seed": (0, 2**32 - 1),
    "workload_run": (0, 10**6),
    "shared_prefix": (0, 10**7),
    "num_blocks": (1, 10**9),
    "replicas": (1, 4096),
    "dp": (1, 4096),
    "spec_k": (1, 256),  # graphs.serving.analysis.specdec.K_MAX_LIMIT
}
#: real-valued settings (SI units): (low, high, low inclusive) accepted; each must be finite
FLOAT_RANGES: dict[str, tuple[float, float, bool]] = {
    "rate": (1e-6, 1e9, True),  # requests/s: graphs.serving.sim.requests.RATE_RANGE
    "think_time": (0.0, 1e6, True),  # s: graphs.serving.sim.requests.THINK_RANGE
    "prefix_eps": (0.0, 1e3, True),  # graphs.serving.sim.replica_routing.EPS_RANGE
    "link_bandwidth": (1e6, 1e15, True),  # bytes/s
    "link_latency": (0.0, 1.0, True),  # s per layer
    "overhead_s": (0.0, 10.0, True),  # s per iteration
    "host_kv_bytes": (0.0, 1e15, True),  # graphs.serving.sim.kv_tiers.BYTES_RANGE
    "ssd_kv_bytes": (0.0, 1e15, True),
    "host_link_bandwidth": (1e6, 1e13, True),  # bytes/s: graphs.serving.sim.kv_tiers.BANDWIDTH_RANGE
    "ssd_bandwidth": (1e6, 1e13, True),
    "slo_ttft": (1e-6, 1e6, True),  # s
    "slo_tpot": (1e-6, 1e6, True),  # s
    "percentile": (0.0, 100.0, False),
}


def spec_config(
    draft: str | None, k: int | None, accept: str | None, *, expected: bool = False, seed: int = 0
) -> Any:
    """Speculative decoding's settings as a :class:`~.specdec_sim.SpecConfig`, or None without a
    draft; ``k`` None: :data:`DEFAULT_SPEC_K`.

    Parameters
    ----------
    draft : str or None
        A catalog draft model sharing the vocabulary, ``mtp`` or ``ngram``.
    k : int or None
        Tokens drafted per step.
    accept : str or None
        One acceptance rate ``A`` in [0, 1] for every position, or ``k`` rates ``a1,..,ak``.
    expected : bool
        Advance every sequence by the expected accepted tokens instead of seeded draws.
    seed : int
        The draws' seed.

    Returns
    -------
    SpecConfig or None

    Raises
    ------
    CostModelError
        When a speculation setting is given without a draft, or a setting is out of range.
    """
    if draft is None:
        if accept is not None or expected or k is not None:
            raise CostModelError(
                "--spec-k/--spec-accept/--spec-expected need --spec-draft (what drafts the tokens)"
            )
        return None
    if accept is None:
        raise CostModelError(
            f"--spec-draft {draft[:60]} needs --spec-accept (the rate its drafted tokens are accepted at)"
        )
    from .specdec_sim import SpecConfig

    return SpecConfig.parse(draft, DEFAULT_SPEC_K if k is None else k, accept, expected=expected, seed=seed)


def _check_range(name: str, value: Any) -> None:
    """``value`` of setting ``name`` in its range (:data:`INT_RANGES`, :data:`FLOAT_RANGES`)."""
    if value is None:
        return
    if name in INT_RANGES:
        check_number(name, value, *INT_RANGES[name], whole=True)
    else:
        if name == "rate" and value == float("inf"):
            from .requests import ALL_AT_ONCE

            raise CostModelError(f"{label('rate')} must be a finite number, got inf; {ALL_AT_ONCE}")
        lo, hi, inclusive = FLOAT_RANGES[name]
        check_number(name, value, lo, hi, inclusive=inclusive)


@dataclass(frozen=True, slots=True)
class SimulationRequest:
    """Every setting of one ``costmodel simulate`` run (a rate, a closed loop, a trace or a replayed
    run; or ``max_rate``'s search), checked when built (module doc). The fields are the command
    line's options, by the same names (``think_time`` is ``--think-time``).

    Parameters
    ----------
    device : str
        Catalog device name or alias.
    tp, replicas, dp : int
        Tensor-parallel degree of each replica, replicas behind the router, data-parallel attention
        ranks per replica.
    profile : EngineProfile or str, optional
        The serving engine, or its name (``vllm``, ``sglang@0.4``: the command's ``--engine``;
        its scheduler flags applied: :meth:`EngineProfile.with_overrides`);
        None: ``predict``'s framework's, else vLLM's, with ``enable_prefix_caching`` when given.
    predict, predict_file : str, optional
        The corpus framework pricing the kernels (None: the roofline bound); a fit file's path.
    compare, interval : bool
        Also run the bound beside the prediction; the P10-P90 interval (None: on with ``predict``;
        with ``max_rate`` the max rate's band, with ``rates`` each rate's calibrated bands, which
        ``False`` leaves out).
    rate : float, optional
        Requests (or conversations) per second.
    rates : str, optional
        A rate sweep: a comma list of rates (requests/s, at most :data:`MAX_SWEEP_RATES`), the
        same drawn workload simulated at each (:meth:`rate_list`), instead of ``rate``.
    requests, prompt, output, arrival, seed : int, str, str, str, int
        The drawn workload: how many, the length distributions (``fixed:N``, ``uniform:LO,HI``,
        ``lognormal:MEAN,SIGMA``), the gaps of ``rate`` and the seed.
    concurrency, stagger : int, str, optional
        A closed loop's clients, and their first sends spread over ``stagger`` s (or ``cycle``).
    prompt_pool, turns, think_time, shared_prefix : int, int, float, int
        Distinct prompts, turns per conversation, a client's pause (s), a system prompt's tokens.
    trace, workload_from, workload_run : str, str, int, optional
        A trace file; a benchmark result to replay, and which of its runs.
    scheduler_policy : str, optional
        ``recompute`` or ``guaranteed_no_evict`` over the engine's.
    num_blocks : int, optional
        KV blocks per replica (None: the engine's pool rule).
    enable_prefix_caching : bool, optional
        Over the engine's default (None: the engine's).
    overhead_s : float
        CPU time per iteration (s).
    router, prefix_eps : str, float, optional
        How requests pick a replica; the prefix router's load bound (None: 0.5).
    enable_expert_parallel, moe_dispatch : bool, str
        With ``dp``: whole experts per device; how tokens reach them.
    disagg, link_bandwidth, link_latency : str, float, float, optional
        ``PREFILL:DECODE`` replicas; the KV link (bytes/s) and its latency per layer (s).
    spec_draft, spec_k, spec_accept, spec_expected
        Speculative decoding (:func:`spec_config`).
    host_kv_bytes, host_link_bandwidth, ssd_kv_bytes, ssd_bandwidth : float
        KV tiers below the GPU per replica (bytes, bytes/s; 0 or None: none).
    slo_ttft, slo_tpot : float, optional
        SLOs (s): ``max_rate`` holds them at ``percentile``; a single run or ``rates`` counts the
        requests that meet both (goodput).
    percentile : float, optional
        The percentile ``max_rate`` holds the SLOs at (default 99). Only ``max_rate`` reads it:
        given without it, it is refused (a run prints its P50 and P99 and counts goodput per
        request, so a percentile would change nothing it says).
    max_rate : bool
        Search the highest rate within the SLOs.
    csv, plot : str, optional
        Per-request rows and latency plots to write (paths; checked by the caller).
    """

    device: str = "h100-sxm"
    tp: int = 1
    profile: EngineProfile | str | None = None
    predict: str | None = None
    predict_file: str | None = None
    compare: bool = False
    interval: bool | None = None
    rate: float | None = None
    rates: str | None = None
    requests: int = DRAWN_DEFAULTS["requests"]
    arrival: str = "poisson"
    concurrency: int | None = None
    stagger: str | None = None
    prompt_pool: int | None = None
    turns: int = 1
    think_time: float = 0.0
    prompt: str = DRAWN_DEFAULTS["prompt"]
    output: str = DRAWN_DEFAULTS["output"]
    trace: str | None = None
    workload_from: str | None = None
    workload_run: int | None = None
    seed: int = DRAWN_DEFAULTS["seed"]
    scheduler_policy: str | None = None
    num_blocks: int | None = None
    enable_prefix_caching: bool | None = None
    shared_prefix: int = 0
    overhead_s: float = 0.0
    replicas: int = 1
    router: str = "least_outstanding"
    prefix_eps: float | None = None
    dp: int = 1
    enable_expert_parallel: bool = False
    moe_dispatch: str = "allgather_reducescatter"
    disagg: str | None = None
    link_bandwidth: float | None = None
    link_latency: float = 0.0
    spec_draft: str | None = None
    spec_k: int | None = None
    spec_accept: str | None = None
    spec_expected: bool = False
    host_kv_bytes: float = 0.0
    host_link_bandwidth: float | None = None
    ssd_kv_bytes: float = 0.0
    ssd_bandwidth: float | None = None
    slo_ttft: float | None = None
    slo_tpot: float | None = None
    max_rate: bool = False
    percentile: float | None = None
    csv: str | None = None
    plot: str | None = None

    def __post_init__(self) -> None:
        for name in (*INT_RANGES, *FLOAT_RANGES):
            _check_range(name, getattr(self, name))
        check_choice("router", self.router, ROUTER_CHOICES)
        check_choice("moe_dispatch", self.moe_dispatch, DISPATCH_CHOICES)
        from costmodel.measured.corpus import FRAMEWORKS

        if self.predict is not None:
            check_choice("predict", self.predict, FRAMEWORKS)
        self._resolve_profile()
        self._check_workload()
        self.topology()  # --disagg's counts and the topology's own checks
        self.spec()
        if self.percentile is not None and not self.max_rate:
            raise CostModelError(
                f"--percentile {self.percentile:g} is the percentile --max-rate holds the SLOs at; without "
                "--max-rate nothing reads it (a run prints P50 and P99, and its goodput counts each request "
                "against the SLOs): add --max-rate or drop --percentile"
            )
        if self.max_rate and self.percentile is None:
            object.__setattr__(self, "percentile", 99.0)
        if self.spec_draft is not None and self.max_rate:
            raise CostModelError(
                "--max-rate searches plain decoding only so far; drop --spec-draft (or give --rate)"
            )
        self.kv_tiers()
        self._check_modes()

    def _resolve_profile(self) -> None:
        """``profile`` None: the engine ``predict`` implies (its kernels and scheduler go together),
        else vLLM's; ``enable_prefix_caching`` and ``scheduler_policy`` given apply over it."""
        from graphs.serving.engines import POLICIES, EngineProfile, get_engine

        if self.scheduler_policy is not None:
            check_choice("scheduler_policy", self.scheduler_policy, POLICIES)
        if isinstance(self.profile, str):  # an engine by name, as --engine takes it (vllm, sglang@0.4)
            prof = get_engine(self.profile, what="profile")
        elif self.profile is None:
            prof = get_engine(self.predict or "vllm")
        elif isinstance(self.profile, EngineProfile):
            prof = self.profile
        else:
            raise CostModelError(
                f"profile must be an EngineProfile or an engine's name (--engine), got "
                f"{type(self.profile).__name__} {repr(self.profile)[:40]}"
            )
        given: dict[str, Any] = {}  # a setting the profile was already given stays as given
        if self.enable_prefix_caching is not None and "enable_prefix_caching" not in prof.overridden:
            given["enable_prefix_caching"] = self.enable_prefix_caching
        if self.scheduler_policy is not None and "policy" not in prof.overridden:
            given["policy"] = self.scheduler_policy
        object.__setattr__(self, "profile", prof.with_overrides(**given) if given else prof)

    @property
    def slo_percentile(self) -> float:
        """The percentile the SLOs are held at by ``max_rate`` (``percentile``, default 99)."""
        return 99.0 if self.percentile is None else self.percentile

    @property
    def engine(self) -> EngineProfile:
        """The engine profile (resolved when built: never None)."""
        assert self.profile is not None and not isinstance(self.profile, str)  # set by __post_init__
        return self.profile

    @property
    def prefix_caching(self) -> bool:
        """Whether full KV blocks stay cached: ``enable_prefix_caching``, else the engine's default."""
        return bool(self.engine.enable_prefix_caching)

    @property
    def eps(self) -> float:
        """``prefix_eps``, or the router's default load bound (:data:`DEFAULT_PREFIX_EPS`)."""
        return DEFAULT_PREFIX_EPS if self.prefix_eps is None else float(self.prefix_eps)

    def _given(self, name: str) -> bool:
        return bool(getattr(self, name) != DRAWN_DEFAULTS[name])

    def _check_workload(self) -> None:
        """Refuse workload settings that do not go together, in one line naming them."""
        if self.prefix_eps is not None and self.router != "prefix":
            raise CostModelError(f"--prefix-eps bounds --router prefix; the router here is {self.router}")
        if self.router == "prefix" and not self.prefix_caching:
            raise CostModelError(
                "--router prefix sends a request where its prefix is cached: give --enable-prefix-caching"
            )
        if self.workload_from:
            given = [flag(k) for k in DRAWN_DEFAULTS if k != "seed" and self._given(k)]
            given += [
                f
                for f, on in (
                    ("--trace", self.trace),
                    ("--rate", self.rate is not None),
                    ("--concurrency", self.concurrency is not None),
                    ("--turns", self.turns > 1),
                    ("--prompt-pool", self.prompt_pool is not None),
                    ("--max-rate", self.max_rate),
                    ("--arrival", self.arrival != "poisson"),
                )
                if on
            ]
            if given:
                raise CostModelError(
                    "--workload-from replays the run's own requests, arrivals and clients; drop "
                    + "/".join(given)
                )
        elif self.workload_run is not None:
            raise CostModelError("--workload-run picks a run of --workload-from RESULT: give --workload-from")
        if self.trace:
            unused = [flag(k) for k in DRAWN_DEFAULTS if self._given(k)]
            if unused:
                raise CostModelError(
                    f"--trace fixes every request's prompt, output and arrival; drop {'/'.join(unused)}"
                )
        drawn = [
            f
            for f, on in (
                ("--turns", self.turns > 1),
                ("--prompt-pool", self.prompt_pool is not None),
                ("--shared-prefix", self.shared_prefix > 0),
            )
            if on
        ]
        if self.rates is not None:
            self._check_rates()
        if self.max_rate:
            closed = [
                f for f, on in (("--concurrency", self.concurrency), ("--think-time", self.think_time)) if on
            ]
            if closed or drawn:
                raise CostModelError(
                    f"--max-rate searches an open-loop rate of single requests; drop {'/'.join(closed + drawn)}"
                )
            return
        self._check_load(drawn)

    @property
    def rate_list(self) -> tuple[float, ...]:
        """``rates`` as numbers (requests/s), in the order given (empty without ``rates``).

        Returns
        -------
        tuple of float

        Raises
        ------
        CostModelError
            A part that is not a number.
        """
        if self.rates is None:
            return ()
        out = []
        for part in self.rates.split(","):
            try:
                out.append(float(part))
            except ValueError:
                raise CostModelError(
                    f"--rates must be a comma list of rates (requests/s), got {part.strip()[:40]!r}"
                ) from None
        return tuple(out)

    def _check_rates(self) -> None:
        """``rates``: numbers in ``rate``'s range, at most :data:`MAX_SWEEP_RATES`, and the drawn
        open-loop workload (no other load)."""
        if not isinstance(self.rates, str):
            raise CostModelError(
                f"--rates must be a comma list of rates (text), got {type(self.rates).__name__}"
            )
        rates = self.rate_list
        if len(rates) > MAX_SWEEP_RATES:
            raise CostModelError(f"--rates takes at most {MAX_SWEEP_RATES} rates, got {len(rates)}")
        for i, r in enumerate(rates):
            check_number("rates", r, *FLOAT_RANGES["rate"][:2])
            if r in rates[:i]:  # the same run twice, printed twice
                raise CostModelError(f"--rates gives {r:g} twice: list each rate once")
        given = [
            f
            for f, on in (
                ("--rate", self.rate is not None),
                ("--max-rate", self.max_rate),
                ("--trace", self.trace),
                ("--workload-from", self.workload_from),
                ("--concurrency", self.concurrency is not None),
            )
            if on
        ]
        if given:
            raise CostModelError(f"--rates simulates the drawn workload at each rate; drop {'/'.join(given)}")

    def _check_load(self, drawn: list[str]) -> None:
        """The offered load: one way of sharing prefixes, a rate, clients, a trace or a replay."""
        if self.trace and (drawn or self.rate is not None):
            given = drawn + (["--rate"] if self.rate is not None else [])
            raise CostModelError(f"--trace fixes every request's prompt and arrival; drop {'/'.join(given)}")
        if len(drawn) > 1:
            raise CostModelError(
                f"{' and '.join(drawn)} do not combine: the engine caches one prefix per request "
                "(a system prompt, a pool's whole prompt or a conversation's history)"
            )
        if (
            self.rate is None
            and self.rates is None
            and not self.trace
            and self.concurrency is None
            and not self.workload_from
        ):
            raise CostModelError(
                "give --rate (requests/s), --concurrency N (clients), --trace FILE or --max-rate"
            )
        if self.arrival != "poisson" and self.rate is None and self.rates is None:
            raise CostModelError(f"--arrival {self.arrival[:40]} shapes the gaps of --rate; give --rate")
        if self.stagger is not None:
            if self.concurrency is None:
                raise CostModelError("--stagger spreads a closed loop's first sends: give --concurrency N")
            if self.stagger != "cycle":
                try:
                    v = float(self.stagger)
                except ValueError:
                    v = float("nan")
                if not 0 <= v <= 1e6:  # NaN fails too
                    raise CostModelError(
                        f"--stagger must be seconds in [0, 1e6] or 'cycle', got {self.stagger[:40]!r}"
                    )
        if self.think_time and self.turns == 1 and self.concurrency is None:
            raise CostModelError(
                "--think-time is a client's pause between an answer and its next request: give --turns or --concurrency"
            )

    def _check_modes(self) -> None:
        """``max_rate``, ``interval`` and ``compare`` together, refused where they contradict;
        ``interval`` None becomes on with ``predict`` (with ``max_rate``: the max rate's P10-P90,
        two more searches; a sweep prints its runs' calibrated bands without it)."""
        if self.interval and not self.predict:
            raise CostModelError("--interval needs --predict FRAMEWORK (the bound has no interval)")
        if self.compare:
            if self.max_rate:
                raise CostModelError("--compare compares one run: drop --max-rate (or --compare)")
            if not (self.predict or self.predict_file or self.workload_from):
                raise CostModelError(
                    "--compare sets the bound beside a prediction or a measured run: add --predict FRAMEWORK, "
                    "--predict-file FIT or --workload-from RESULT"
                )
        if self.rates is not None:
            given = [f for f, on in (("--compare", self.compare),) if on]
            given += [f for f, on in (("--csv", self.csv), ("--plot", self.plot)) if on]
            if given:
                raise CostModelError(
                    f"--rates prints one line a rate; drop {'/'.join(given)} (or give --rate for one run)"
                )
        if self.interval is None:  # every predicted number carries its interval unless told not to
            object.__setattr__(self, "interval", bool(self.predict))
        if self.max_rate and self.trace:
            raise CostModelError("--max-rate draws its own requests; it does not take --trace")
        if self.max_rate and (self.csv or self.plot):
            raise CostModelError("--max-rate writes no per-request files; drop --csv/--plot (or give --rate)")

    def topology(self) -> Any:
        """The replicas and how they are reached: a :class:`~.simulator.Topology` (disaggregated
        with ``disagg``: ``PREFILL:DECODE`` replica counts over a ``link_bandwidth`` link)."""
        from .simulator import MAX_REPLICAS, Topology

        shared: dict[str, Any] = dict(
            tp=self.tp,
            router=self.router,
            prefix_eps=self.eps,
            dp=self.dp,  # refused with --disagg by the topology, never dropped
            expert_parallel=self.enable_expert_parallel,
            moe_dispatch=self.moe_dispatch,
        )
        if not self.disagg:
            return Topology(replicas=self.replicas, **shared)
        try:
            p, d = (int(x) for x in self.disagg.split(":"))
        except ValueError:
            raise CostModelError(
                f"--disagg must be PREFILL:DECODE replica counts, e.g. 1:2, got {self.disagg[:40]!r}"
            ) from None
        if not (1 <= p <= MAX_REPLICAS and 1 <= d <= MAX_REPLICAS):
            raise CostModelError(
                f"--disagg needs PREFILL and DECODE replica counts in [1, {MAX_REPLICAS}], got {self.disagg[:40]!r}"
            )
        if self.link_bandwidth is None:
            raise CostModelError("--disagg needs --link-bandwidth (bytes/s of the KV transfer link)")
        return Topology(
            prefill_replicas=p,
            decode_replicas=d,
            link_bandwidth=self.link_bandwidth,
            link_latency=self.link_latency,
            **shared,
        )

    def spec(self) -> Any:
        """Speculative decoding's :class:`~.specdec_sim.SpecConfig` (None without ``spec_draft``)."""
        return spec_config(
            self.spec_draft, self.spec_k, self.spec_accept, expected=self.spec_expected, seed=self.seed
        )

    def kv_tiers(self) -> Any:
        """The host (and SSD) tiers below the GPU's KV blocks: a :class:`~.kv_tiers.KVTierConfig`,
        None without ``host_kv_bytes``."""
        if not self.host_kv_bytes:
            given = [
                f
                for f, v in (
                    ("--host-link-bandwidth", self.host_link_bandwidth),
                    ("--ssd-kv-bytes", self.ssd_kv_bytes),
                    ("--ssd-bandwidth", self.ssd_bandwidth),
                )
                if v
            ]
            if given:
                verb = "needs" if len(given) == 1 else "need"
                raise CostModelError(f"{'/'.join(given)} {verb} a host-memory tier: give --host-kv-bytes")
            return None
        if not self.prefix_caching:
            raise CostModelError("--host-kv-bytes keeps evicted prefixes: give --enable-prefix-caching")
        if self.ssd_kv_bytes and self.ssd_bandwidth is None:
            raise CostModelError("--ssd-kv-bytes needs --ssd-bandwidth (bytes/s of the drive)")
        from .kv_tiers import KVTierConfig

        return KVTierConfig(
            self.host_kv_bytes, self.host_link_bandwidth, self.ssd_kv_bytes, self.ssd_bandwidth
        )

    def workload_text(self, trace: Any = None) -> str:
        """The workload simulated, defaults included, in the command line's words, so that a run
        can be repeated: a ``trace`` (a :class:`~.requests.Trace` read from ``self.trace``) by its
        requests, else the drawn workload's settings, and a closed loop's clients.

        Parameters
        ----------
        trace : Trace, optional
            The trace read from :attr:`trace` (None: the drawn workload).

        Returns
        -------
        str
        """
        clients = f", --concurrency {self.concurrency} clients" if self.concurrency else ""
        if self.stagger is not None:
            clients += f" --stagger {self.stagger}"
        if trace is not None:
            text = f"trace {str(self.trace)[:200]}: {len(trace.requests):,} requests{clients}"
            if trace.origin_s:
                text += f", arrivals rebased to the first one (t = {trace.origin_s!r} s taken as 0)"
            return text + (f", {trace.prefixes} shared prefix(es)" if trace.prefixes else "")
        n = f"--requests {self.requests}"
        if self.turns > 1:
            n += f" conversations x --turns {self.turns} = {self.requests * self.turns:,} requests"
        text = f"workload: {n} --seed {self.seed} --prompt {self.prompt} --output {self.output}"
        if self.max_rate:  # one draw, its arrival gaps scaled to each probed rate
            text += f" --arrival {self.arrival} (the same draw at every probed rate)"
        elif self.rate is not None or self.rates is not None:
            text += f" --arrival {self.arrival}"
        elif not self.concurrency:  # a closed loop sends as its clients free up (said below)
            text += " (all sent at once, no --rate)"
        for f, value in (
            ("--shared-prefix", self.shared_prefix),
            ("--prompt-pool", self.prompt_pool),
            ("--think-time", self.think_time),
        ):
            text += f" {f} {value}" if value else ""
        return text + clients

    @classmethod
    def settings(cls) -> tuple[str, ...]:
        """Every field's name (the command line builds a request from its options of these names)."""
        return tuple(f.name for f in fields(cls))
