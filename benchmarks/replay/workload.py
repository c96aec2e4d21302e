"""A published row as a replay: the model with the row's dtypes, the device, the topology, the
engine (the row's profile with only the overrides its source states), the requests and the load.

Loads (``RowWorkload.load``): ``offline`` (every request at t = 0; a throughput extrapolated from
:data:`WAVES` full batches to the published count, a latency row's every request simulated), ``rate`` (Poisson arrivals at the published
QPS), ``concurrency`` (a closed loop of N clients, :data:`ROUNDS` x N requests), ``batch`` (one
fixed batch, or one wave of the silicon sample's requests), ``client`` (a benchmark client's closed
loop from a burst, every request read) and ``steady`` (that loop in its steady state).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from costmodel.errors import CostModelError
from graphs.cli.options import apply_dtypes
from graphs.serving.engines import get_engine
from graphs.serving.pricing.predictor import Predictor
from graphs.serving.sim.engine import EngineConfig, profile_engine
from graphs.serving.sim.requests import Request, synthetic
from graphs.serving.sim.simulator import Topology
from models.resolver import resolve_model

from .rows import ENGINE, FRAMEWORK, excluded, metric_group
from .rows import whole as _int

__all__ = [
    "QUICK_MAX_REQUESTS",
    "QUICK_WAVES",
    "ROUNDS",
    "WAVES",
    "RowWorkload",
    "overheads_profile",
    "predictor",
    "row_workload",
    "stated_settings",
]

WAVES, QUICK_WAVES = 5, 2  #: full batches an offline run simulates (then extrapolates)
QUICK_MAX_REQUESTS = 100  #: --quick: at most this many requests of a rate-driven run
ROUNDS = 4  #: a closed loop of N clients sends ROUNDS x N requests


@dataclass(frozen=True)
class RowWorkload:
    """One row's replay: what :func:`simulate` is given, and how the metric is read back."""

    config: Any  #: the ModelConfig with the row's dtypes applied
    device: str
    topology: Topology
    engine: EngineConfig
    framework: str
    load: str  #: offline | rate | concurrency | batch | client | steady
    requests: tuple[Request, ...]
    published_requests: int  #: the count an offline throughput is extrapolated to
    concurrency: int | None = None
    rate: float | None = None
    #: the FP8 GEMMs' activation scales (``static`` | ``dynamic``) where the row states them;
    #: None: :func:`predictor`'s rule
    fp8_scales: str | None = None
    #: assumptions and approximations, shown beside the row (not part of the run's identity)
    notes: tuple[str, ...] = field(default_factory=tuple, compare=False)
    #: the engine profile whose CPU and request-path terms price ``simulated`` (None: the corpus
    #: framework's own, ``framework``): the row's engine where its source names one
    profile: str | None = None

    @property
    def key(self) -> tuple[Any, ...]:
        """Rows with equal keys (the TTFT, ITL and throughput of one run) share one simulation."""
        return (
            self.config,
            self.device,
            self.topology,
            self.engine,
            self.load,
            self.requests,
            self.concurrency,
            self.rate,
            self.fp8_scales,
            self.profile,  # its CPU terms and the MoE kernels it runs
        )


def _dtypes(row: dict[str, str]) -> SimpleNamespace:
    """The ``--weight-dtype/--kv-dtype/--matmul-dtype`` a row's precision columns give.

    fp8/fp4 are ModelOpt W8A8 / W4A4 checkpoints (weights and GEMM operands); their KV cache is
    FP8 (the v0.14 page: FP8 quantization sets the KV cache to FP8; the FP8/FP4 checkpoints'
    quantization configs carry an FP8 KV cache) unless ``precision_kv`` is ``auto`` (the
    checkpoint's dtype); bf16 and unstated precision keep the checkpoint's dtype."""
    w = row["precision_weights"]
    kv = row["precision_kv"]
    if w == "fp8":
        return SimpleNamespace(
            weight_dtype="fp8", matmul_dtype="fp8", kv_dtype="fp8" if kv != "auto" else None
        )
    if w == "fp4":
        return SimpleNamespace(
            weight_dtype="nvfp4", matmul_dtype="nvfp4", kv_dtype="fp8" if kv != "auto" else None
        )
    return SimpleNamespace(weight_dtype=None, matmul_dtype=None, kv_dtype=None)


def _weight_block(row: dict[str, str], cfg: Any) -> Any:
    """``cfg`` with the weight-scale block a row's ``weight_block`` column states (``128x128``: a
    block-scaled FP8 checkpoint's ``weight_block_size``), as a config.json with that
    ``quantization_config`` gives it (:mod:`models.quantization`); the column empty: ``cfg``. Only
    FP8 weights have such a block: another precision with one is refused."""
    text = row.get("weight_block", "")
    if not text:
        return cfg
    parts = text.split("x")
    if len(parts) != 2 or not all(p.isdigit() and int(p) > 0 for p in parts):
        raise CostModelError(f"row {row['id']}: weight_block {text[:20]!r} is not RxC (e.g. 128x128)")
    if row["precision_weights"] != "fp8":
        raise CostModelError(
            f"row {row['id']}: weight_block {text!r} needs precision_weights fp8, got {row['precision_weights']!r}"
        )
    return cfg.replace(weight_scale_block=(int(parts[0]), int(parts[1])))


def predictor(w: RowWorkload) -> Predictor:
    """The source engine's kernels for a row: FP8 rows are ModelOpt checkpoints (:func:`_dtypes`),
    whose per-tensor activation scales are calibrated (static), so their FP8 GEMMs do not compute a
    scale per call (:func:`graphs.serving.pricing.predict.price_rows`); a row that says otherwise
    (:attr:`RowWorkload.fp8_scales`) is priced as it says. The fused MoE runs the kernels of the
    row's engine profile (:meth:`Predictor.for_engine`)."""
    fp8 = str(w.config.matmul_dtype or "").startswith("fp8")
    scales = w.fp8_scales or ("static" if fp8 else "dynamic")
    # the fused-MoE kernels the row's engine runs (vLLM 0.10-0.11: Marlin for MXFP4 on Hopper)
    engine = get_engine(w.profile or w.framework)
    return Predictor.of(w.framework, fp8_scales=scales if fp8 else "dynamic").for_engine(engine)


def _engine(
    row: dict[str, str],
    cfg: Any,
    tp: int,
    isl: int,
    osl: int,
    cap: int | None = None,
    *,
    profile: str | None = None,
    dp: int = 1,
    fixed: bool = True,
    expert_parallel: bool = False,
    **overrides: Any,
) -> EngineConfig:
    """The row's engine: its profile (``profile``, else the row's ``engine_profile`` field, else
    :data:`ENGINE` of its engine column) with only the ``overrides`` its source states, on the
    row's device (:func:`graphs.serving.sim.engine.profile_engine`: the profile's own KV-pool rule;
    under GUARANTEED_NO_EVICT fixed ``ISL + OSL`` requests cap the running sequences at
    ``floor(blocks / ceil((ISL + OSL) / b))``, never preempted); ``cap``: at most that many
    requests exist (a wave); ``dp``: data-parallel ranks sharing the experts (each rank's pool),
    whole experts per device with ``expert_parallel``.
    ``fixed`` False: the requests' lengths vary (``ISL`` and ``OSL`` are their maxima), so no
    cap by one length: the simulator reserves each request's own prompt + output blocks as it
    admits it (:meth:`graphs.serving.engines.EngineProfile.engine_config`), as the engine's
    capacity scheduler does per request."""
    prof = get_engine(profile or row.get("engine_profile") or ENGINE[row["engine"]])
    prof = prof.with_overrides(**overrides) if overrides else prof
    try:
        return profile_engine(
            prof,
            cfg,
            row["device"],
            tp=tp,
            dp=dp,
            request_tokens=isl + osl if fixed else None,
            max_running=cap,
            expert_parallel=expert_parallel,
        )
    except CostModelError as exc:
        raise CostModelError(f"{cfg.name} on {tp} x {row['device']}: {exc}") from None


def row_workload(row: dict[str, str], *, quick: bool = False) -> RowWorkload:
    """The workload that replays ``row`` (module doc); a row :func:`excluded` names is refused. A
    published row's engine column names its engine: that profile's CPU and request-path terms
    price it (:attr:`RowWorkload.profile`); the silicon sample's rows (which name no engine
    settings) keep their framework's."""
    w = _row_workload(row, quick=quick)
    prof = overheads_profile(row)
    return w if prof is None else dataclasses.replace(w, profile=prof)


def overheads_profile(row: dict[str, str]) -> str | None:
    """The engine profile whose CPU and request-path terms price a row's ``simulated`` replay
    (:attr:`RowWorkload.profile`).

    Parameters
    ----------
    row : dict
        A published or silicon row.

    Returns
    -------
    str or None
        The ``engine_profile`` a row names (it sets the row's scheduler, and its terms price it:
        one engine per row, e.g. the sample's vLLM 0.12.0 runs' ``vllm@0.12``); else the profile
        its engine column names (:data:`ENGINE`) for a published row; None for the silicon
        sample's other rows: the corpus framework's own profile's terms price them.
    """
    if row.get("engine_profile"):
        return row["engine_profile"]
    if row["source_kind"].startswith("aiconfigurator_silicon"):
        return None
    return ENGINE[row["engine"]]


def _row_workload(row: dict[str, str], *, quick: bool = False) -> RowWorkload:
    why = excluded(row)
    if why:
        raise CostModelError(f"row {row['id']}: not replayed ({why})")
    cfg = _weight_block(row, apply_dtypes(resolve_model(row["model"]), _dtypes(row)))
    tp = _int(row["tp"]) or 1
    gpus = _int(row["num_gpus"]) or tp
    ep = _int(row["ep"]) or 1
    adp = _int(row.get("attention_dp", "")) or 1
    if adp > 1:
        # attention data parallel stated beside the TP group (SGLang's --enable-dp-attention with
        # --dp-size D inside --tp-size T): D ranks of T / D devices for attention, the MoE layers
        # over all T (tensor-parallel unless an EP degree is stated: Topology's dp)
        tp, dp = tp // adp, adp
        in_tp = False
        expert_parallel = ep > 1
    else:
        # attention data parallel: the row gives an EP degree and no TP (its notes read the page's
        # "DEP" so); the ranks run TP 1, the experts whole over all of them (Topology's dp)
        dp = ep if ep > 1 and not row["tp"].strip() else 1
        # an EP degree equal to the TP degree: expert parallelism inside the tp group (SGLang's
        # --ep-size beside the same --tp-size, vLLM's --enable-expert-parallel beside TP alone)
        in_tp = ep > 1 and dp == 1 and ep == tp  # any other EP beside a TP degree: rows.excluded
        expert_parallel = dp > 1 or in_tp
    topo = Topology(replicas=gpus // (tp * dp), tp=tp, dp=dp, expert_parallel=expert_parallel)
    isl, osl = _int(row["isl"]), _int(row["osl"])
    assert isl and osl  # every replayed row has fixed lengths (UNPUBLISHED holds the others)
    fw = FRAMEWORK[row["engine"]]
    conc = _int(row["concurrency"])
    rate = float(row["request_rate"]) if row["request_rate"].strip() else None
    n_pub = _int(row["num_requests"])
    notes: list[str] = []
    if row["source_kind"] == "vllm_ci_benchmark":  # benchmark_latency: one batch generated together
        assert conc is not None
        reqs = tuple(Request(i, 0.0, isl, osl) for i in range(conc))
        eng = profile_engine(
            get_engine(ENGINE[row["engine"]]),
            cfg,
            row["device"],
            tp=tp,
            dp=dp,
            expert_parallel=expert_parallel,
        )
        return RowWorkload(cfg, row["device"], topo, eng, fw, "batch", reqs, conc, notes=())
    if row["source_kind"] == "aiconfigurator_silicon":  # one wave of N requests (silicon_accuracy.py)
        assert conc is not None
        # the engine the sample names, with only the settings its campaign states (as its
        # client's replay): an SGLang run under SGLang's pool rule and PrefillAdder admission, not
        # another engine's; vLLM and SGLang at least as many sequences as the wave (their launch
        # limits are not stated), as the client's replay
        stated = stated_settings(row)
        prof = get_engine(row.get("engine_profile") or ENGINE[row["engine"]])
        if prof.policy != "guaranteed_no_evict":
            stated["max_num_seqs"] = max(conc, prof.max_num_seqs)
        eng = _engine(row, cfg, tp, isl, osl, cap=conc, dp=dp, expert_parallel=expert_parallel, **stated)
        reqs = tuple(Request(i, 0.0, isl, osl) for i in range(conc))
        notes.append(f"one wave of {conc} requests sent together (inferred; the sample does not say)")
        if eng.max_num_seqs < conc:
            notes.append(f"the KV pool holds {eng.max_num_seqs} of them at once (the rest wait for a finish)")
        scales = row.get("fp8_scales") or None
        return RowWorkload(
            cfg, row["device"], topo, eng, fw, "batch", reqs, conc, fp8_scales=scales, notes=tuple(notes)
        )
    if conc is not None:  # a closed loop: NIM / AIPerf, or a benchmark client (silicon_accuracy.py)
        if row["source_kind"] in ("aiconfigurator_silicon_client", "aiconfigurator_silicon_steady"):
            steady = row["source_kind"] == "aiconfigurator_silicon_steady"
            eng, reqs, n = _client_load(
                row, cfg, tp, isl, osl, conc, fw, notes, steady=steady, dp=dp, expert_parallel=expert_parallel
            )
            load = "steady" if steady else "client"
        else:
            eng = _engine(row, cfg, tp, isl, osl, dp=dp, expert_parallel=expert_parallel)
            n = ROUNDS * conc
            notes.append(f"{n} requests ({ROUNDS} per client; the count is not published)")
            reqs = tuple(Request(i, 0.0, isl, osl) for i in range(n))
            load = "concurrency"
        return RowWorkload(
            cfg,
            row["device"],
            topo,
            eng,
            fw,
            load,
            reqs,
            n,
            concurrency=conc,
            fp8_scales=row.get("fp8_scales") or None,
            notes=tuple(notes),
        )
    eng = _engine(row, cfg, tp, isl, osl, dp=dp, expert_parallel=expert_parallel, **stated_settings(row))
    scales = row.get("fp8_scales") or None
    if rate is None or math.isinf(rate):  # offline: everything at t = 0
        if n_pub is None:
            n_pub = 3000
            notes.append("num_requests not published for 1000/1000; 3000 assumed (as 1024/1024)")
        full = eng.max_num_seqs * topo.replicas * topo.dp
        waves = QUICK_WAVES if quick else WAVES
        # the published count's last, partial batch kept (its drain), N - n whole batches added;
        # a latency (TTFT, TPOT) is a mean over every request of the burst, each at its own place
        # in the queue: no subset stands for it, so such a row simulates every published request
        n = n_pub if n_pub <= waves * full else (waves - 1) * full + n_pub - full * ((n_pub - 1) // full)
        if metric_group(row["metric"]) != "throughput":
            n = n_pub
        if n < n_pub:
            notes.append(f"{n} of {n_pub} requests simulated, makespan extrapolated")
        reqs = tuple(Request(i, 0.0, isl, osl) for i in range(n))
        return RowWorkload(
            cfg, row["device"], topo, eng, fw, "offline", reqs, n_pub, fp8_scales=scales, notes=tuple(notes)
        )
    assert n_pub is not None
    n = min(n_pub, QUICK_MAX_REQUESTS) if quick else n_pub
    notes.append("Poisson arrivals and fixed lengths assumed (the page states neither)")
    reqs = tuple(synthetic(n, rate=rate, prompt=f"fixed:{isl}", output=f"fixed:{osl}", seed=0))
    return RowWorkload(
        cfg, row["device"], topo, eng, fw, "rate", reqs, n, rate=rate, fp8_scales=scales, notes=tuple(notes)
    )


def stated_settings(row: dict[str, str]) -> dict[str, Any]:
    """The engine settings a row's source states (its ``engine_*`` fields), as profile
    overrides: only these override the profile's defaults."""
    stated: dict[str, Any] = {}
    if row.get("engine_max_tokens"):
        stated["max_num_batched_tokens"] = int(row["engine_max_tokens"])
    if row.get("engine_chunked_prefill"):
        stated["enable_chunked_prefill"] = row["engine_chunked_prefill"] == "true"
    if row.get("engine_prefix_caching"):
        stated["enable_prefix_caching"] = row["engine_prefix_caching"] == "true"
    if row.get("engine_sampler"):
        stated["sampler"] = row["engine_sampler"]
    wait = _int(row.get("engine_batch_wait_iters", ""))
    if wait:  # TensorRT-LLM's batch waiting, as the source's engine options set it
        stated["batch_wait_timeout_iters"] = wait
        stated["batch_wait_max_tokens_ratio"] = float(row["engine_batch_wait_ratio"])
    return stated


def _client_load(
    row: dict[str, str],
    cfg: Any,
    tp: int,
    isl: int,
    osl: int,
    conc: int,
    fw: str,
    notes: list[str],
    steady: bool = False,
    dp: int = 1,
    expert_parallel: bool = False,
) -> tuple[EngineConfig, tuple[Request, ...], int]:
    """A benchmark client's engine, requests and count (``row``'s ``requests_per_client`` per
    client, lengths by ``length_range_ratio``, the engine settings the row states); its
    assumptions go to ``notes``. ``steady``: the client's loop in its steady state (its first
    sends spread over one cycle, the middle rounds read) rather than from a burst, read whole.
    ``dp`` and ``expert_parallel``: the group the engine's pool is sized for (:func:`_engine`)."""
    per, ratio = int(row["requests_per_client"]), float(row["length_range_ratio"])
    n = per * conc
    stated = stated_settings(row)
    wait = stated.get("batch_wait_timeout_iters")
    prof = get_engine(row.get("engine_profile") or ENGINE[row["engine"]])
    reqs = tuple(synthetic(n, rate=None, prompt=_lengths(isl, ratio), output=_lengths(osl, ratio), seed=0))
    if prof.policy == "guaranteed_no_evict":  # a request's blocks reserved at admission
        # lengths drawn per request: each reserves its own prompt + output (not the maxima's)
        eng = _engine(
            row, cfg, tp, isl, osl, fixed=ratio == 1, dp=dp, expert_parallel=expert_parallel, **stated
        )
        if ratio == 1 and eng.max_num_seqs < conc:
            notes.append(f"the KV pool reserves {eng.max_num_seqs} requests' blocks at once (the rest wait)")
        elif ratio != 1 and eng.num_blocks is not None:
            each = [-(-(r.prompt + r.output) // eng.block_size) for r in reqs]
            held = int(eng.num_blocks // (sum(each) / len(each)))
            if held < conc:
                notes.append(
                    f"the KV pool reserves each request's own prompt + output blocks: about {held} "
                    "requests of the mean length at once (the rest wait)"
                )
        if wait:
            notes.append(
                f"new prompts held up to {wait} iterations, to {stated['batch_wait_max_tokens_ratio']:g} "
                "of the token budget"
            )
    else:  # vLLM and SGLang allocate blocks as tokens come and preempt when they run out
        # at least as many sequences per iteration as clients (the sources' launch limits are
        # not stated), the pool by the profile's own rule (SGLang's: vLLM's stands in)
        stated["max_num_seqs"] = max(conc, prof.max_num_seqs)
        eng = profile_engine(
            prof.with_overrides(**stated), cfg, row["device"], tp=tp, dp=dp, expert_parallel=expert_parallel
        )
    spread = (
        "fixed lengths"
        if ratio == 1
        else f"lengths uniform on [{int(ratio * isl)}, {isl}] / [{int(ratio * osl)}, {osl}]"
    )
    if steady:
        notes.append(
            f"{conc} clients, {n} requests in the loop's steady state (first sends spread over one cycle; "
            f"the first and last {conc} not read) ({row['client']}); {spread}"
        )
    else:
        notes.append(f"{conc} clients, {n} requests from a burst, every one read ({row['client']}); {spread}")
    return eng, reqs, n


def _lengths(n: int, ratio: float) -> str:
    """A length spec for :func:`synthetic`: ``n`` tokens, or with ``ratio < 1`` uniform on
    ``[int(ratio n), n]`` (vLLM ``benchmark_serving.py --random-range-ratio``: ``lower =
    int(seq_len * range_ratio)``, ``np.random.randint(lower, upper + 1)``)."""
    return f"fixed:{n}" if ratio == 1 else f"uniform:{max(1, int(ratio * n))},{n}"
