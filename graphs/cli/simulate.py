"""``costmodel simulate``: request-level serving simulation (:mod:`graphs.serving.sim.simulator`)."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from graphs.serving.sim.simulation_request import DEFAULT_PREFIX_EPS, DRAWN_DEFAULTS

from .common import dump, progress_bar
from .cost_option import add_cost_options
from .engine_option import LIST, add_engine_options, engine_list, profile_of
from .group_options import add_group_options
from .html_option import add_html_option, keep
from .options import add_dtype_options, apply_dtypes, check_output_path
from .predict_option import add_predict_option
from .spec_options import add_spec_options

#: the timeline figure beside ``--plot``'s latency CDFs
_TIMELINE = "timeline"

__all__ = ["add_simulate_parser", "cmd_simulate", "request_of"]


def _request_tokens(args: argparse.Namespace, reqs: Any = None) -> int | None:
    """Prompt + output tokens of every request when they are all equal (the no-evict cap of an
    engine that reserves blocks at admission), else None: from the requests, or from
    ``fixed:`` lengths of single-turn drawn requests (what ``--max-rate`` draws)."""
    if reqs is not None:
        sizes = {r.prompt + r.output for r in reqs}
        return sizes.pop() if len(sizes) == 1 else None
    if args.trace or args.turns > 1 or args.shared_prefix or args.prompt_pool:
        return None
    if args.prompt.startswith("fixed:") and args.output.startswith("fixed:"):
        try:
            return int(args.prompt[6:]) + int(args.output[6:])
        except ValueError:
            return None
    return None


def _engine(args: argparse.Namespace, cfg: Any, profile: Any, reqs: Any = None) -> Any:
    """The :class:`EngineConfig` of ``profile`` (``--engine`` and the flags that override it)
    for ``cfg`` on ``--device`` (:func:`graphs.serving.sim.engine.profile_engine`)."""
    import dataclasses

    from graphs.serving.sim.engine import profile_engine

    eng = profile_engine(
        profile,
        cfg,
        args.device,
        tp=args.tp,
        dp=args.dp,
        request_tokens=_request_tokens(args, reqs),
        enable_prefix_caching=args.enable_prefix_caching,  # None: the profile's
        iteration_overhead_s=args.overhead_s,
        num_blocks=args.num_blocks,
    )
    if args.scheduler_policy:  # an explicit policy holds whatever overheads the run takes
        eng = dataclasses.replace(eng, scheduler_policy=args.scheduler_policy)
    return eng


def _overheads(args: argparse.Namespace, profile: Any, eng: Any, fit: Any) -> Any:
    """The engine overheads: a ``--predict-file`` fit's; else the profile's CPU terms, capture
    sizes and policy when ``--predict`` prices the kernels; for the bound the profile's policy
    alone (None under recompute: the bound runs exactly as it did before profiles)."""
    if fit is not None:
        return fit.overheads
    if args.predict:
        return profile.overheads(
            max_num_seqs=eng.max_num_seqs, max_num_batched_tokens=eng.max_num_batched_tokens
        )
    return profile.overheads(terms=False) if profile.policy != "recompute" else None


def _workload_from(args: argparse.Namespace) -> tuple[Any, str]:
    """``--workload-from``'s run (``--workload-run`` picks one of several) with ``--shared-prefix``
    for a run that names none, and what the replay takes from it in words."""
    from costmodel.errors import CostModelError
    from graphs.serving.planning.bench_results import read_results, replay_text

    runs = read_results(args.workload_from, seed=args.seed)
    k = args.workload_run
    if k is None and len(runs) > 1:
        rates = ", ".join(f"{i}: {r.label}" for i, r in enumerate(runs))
        raise CostModelError(
            f"--workload-from {args.workload_from[:200]!r} holds {len(runs)} runs ({rates[:400]}): pick one with --workload-run INDEX"
        )
    if k is not None and not 0 <= k < len(runs):
        raise CostModelError(
            f"--workload-run {k}: {args.workload_from[:200]!r} holds runs 0 to {len(runs) - 1}"
        )
    run = runs[k or 0].with_shared_prefix(args.shared_prefix)
    return run, f"workload from {args.workload_from[:200]} ({run.source}): {replay_text(run, args.seed)}"


def _load(args: argparse.Namespace) -> str:
    """The offered load in words, for titles."""
    rate = (
        f"at {args.rate:g} requests/s"
        if args.rate is not None
        else ("" if args.concurrency else "of the trace")
    )
    clients = f"{args.concurrency} clients" if args.concurrency else ""
    return " with ".join(x for x in (rate, clients) if x)


def _comparison(
    args: argparse.Namespace,
    cfg: Any,
    reqs: Any,
    run: dict[str, Any],
    res: Any,
    interval: Any,
    replayed: Any,
    plain_overheads: Any = None,
) -> Any:
    """``--compare``: the bound (the same requests, every kernel at its roofline, no engine time),
    with a fit file the prediction under the engine profile's own terms (``plain_overheads``),
    this run (predicted with its interval, or calibrated) and, with ``--workload-from``, the
    measured run (:mod:`graphs.serving.present.comparison`)."""
    from graphs.serving.engines import EngineOverheads
    from graphs.serving.present.comparison import compare, measured_column, sim_column
    from graphs.serving.sim.simulator import simulate

    if args.predict or getattr(args, "predict_file", None):
        bound_run = {**run, "overheads": EngineOverheads(), "progress": None}
        bound = simulate(cfg, args.device, reqs, predictor=None, **bound_run)
        cols = [sim_column("bound", bound)]
        if plain_overheads is not None:  # the same kernels under the profile's terms, not the fit's
            from .predict_option import predictor_of

            plain_run = {**run, "overheads": plain_overheads, "progress": None}
            plain = simulate(cfg, args.device, reqs, predictor=predictor_of(args), **plain_run)
            cols.append(sim_column(f"predicted ({args.predict} kernels)", plain))
        cols.append(sim_column(_priced_by(args), res, interval.calibrated if interval else None))
    else:
        cols = [sim_column("bound", res)]
    measured = None
    if replayed is not None:
        measured = f"measured ({os.path.basename(args.workload_from)})"
        cols.append(measured_column(measured, replayed))
    return compare(res.model, res.device, cols, measured=measured)


def _priced_by(args: argparse.Namespace) -> str:
    """How the iterations were priced, for titles: ``bound`` (every kernel at its roofline),
    ``predicted (vllm kernels)`` or ``calibrated (FILE)``."""
    if getattr(args, "predict_file", None):
        return f"calibrated ({os.path.basename(args.predict_file)})"
    if getattr(args, "predict", None):
        return f"predicted ({args.predict} kernels)"
    return "bound (kernels at their roofline)"


def _predicted_lines(args: argparse.Namespace, res: Any) -> list[str]:
    """What priced the iterations: ``--predict``'s kernels, what their seconds rest on (the
    coverage line decode prints) and the share clamped to the bound."""
    from .predicted import predicted_lines

    return predicted_lines(
        args.predict, res.device, res.coverage, what="every iteration's kernels", clamped_s=res.clamped_s
    )


def _interval_lines(iv: Any) -> list[str]:
    """Each metric's P10-P90 interval beside its point value (``--interval``)."""
    from .predicted import interval_text

    lo, hi = (round(100 * q) for q in iv.quantiles)
    out = [
        f"  P{lo}-P{hi} prediction interval (calibrated on whole simulations of validated deployments, "
        "never narrower than every kernel at that quantile of its held-out error):"
    ]
    calibrated, basis = iv.calibrated, iv.basis
    for label, (a, b) in calibrated.items():
        v = iv.value(label)
        fmt = ".4f" if label.endswith(" s") else ",.1f"
        out.append(f"    {label:16s} {v:{fmt}}  {interval_text(a, b, fmt)}  ({basis[label]})")
    out += [f"  {line}" for line in iv.expected_errors()]
    return out


def request_of(args: argparse.Namespace) -> Any:
    """The command line's options as a :class:`~graphs.serving.sim.simulation_request.SimulationRequest`,
    which checks them (ranges, and every dependency between them); the engine profile is
    ``--engine``'s (or ``--predict``'s framework's) with the scheduler flags over it."""
    from graphs.serving.sim.simulation_request import SimulationRequest

    given = {name: getattr(args, name) for name in SimulationRequest.settings() if name != "profile"}
    return SimulationRequest(**given, profile=profile_of(args))


def cmd_simulate(args: argparse.Namespace) -> int:
    """``costmodel simulate``: the options as a checked request and every output path checked, then
    one run (or ``--max-rate``'s probes), written and printed; each step is a function below."""
    from costmodel.errors import CostModelError
    from costmodel.hardware import get_device

    from .model_option import resolve_model
    from .predict_option import load_predict_file

    if args.engine == LIST:
        print(engine_list(args.json))
        return 0
    if args.model is None:
        raise CostModelError("simulate needs a MODEL (catalog name or config.json path)")
    fit = load_predict_file(args)  # sets args.predict from the file
    _check_outputs(args)
    req = request_of(args)
    args.interval = req.interval  # its default settled by the request (on with --predict)
    cfg = apply_dtypes(resolve_model(args.model, args), args)
    topo, spec, tiers = req.topology(), req.spec(), req.kv_tiers()
    profile = req.engine.for_device(get_device(args.device))  # the defaults it picks there
    if args.max_rate:
        return _max_rate_run(args, req, cfg, profile, topo, fit)
    trace, replayed, replay_said, reqs = _requests(args)
    eng = _engine(args, cfg, profile, reqs)
    run = _run_settings(args, cfg, reqs, eng, topo, spec, tiers, _overheads(args, profile, eng, fit))
    res, interval, comparison = _simulate_run(args, cfg, reqs, run, profile, eng, fit, replayed)
    keep(args, result=res, config=cfg, comparison=comparison)
    _write_files(args, res)
    settings = replay_said or req.workload_text(trace)
    from graphs.serving.planning.cost import sim_cost

    from .cost_option import rates_of

    cost = sim_cost(res, rates_of(args, [args.device])[args.device])
    keep(args, cost=cost)
    if args.json:
        doc = {"settings": settings, "engine": profile.to_dict(), **res.to_dict(), "cost": cost}
        if interval is not None:
            doc.update({k: v for k, v in interval.to_dict().items() if k not in ("point", "quantiles")})
        if comparison is not None:
            doc["comparison"] = comparison.to_dict()
        print(dump(doc))
        return 0
    _print_head(args, res, cfg, topo, spec, profile, fit, settings, run)
    _print_latencies(args, res, interval, comparison)
    _print_throughput(args, res, topo, cost)
    return 0


def _simulate_run(
    args: argparse.Namespace,
    cfg: Any,
    reqs: Any,
    run: dict[str, Any],
    profile: Any,
    eng: Any,
    fit: Any,
    replayed: Any,
) -> tuple[Any, Any, Any]:
    """The run (with ``--interval`` its ends too: :func:`graphs.serving.sim.intervals.simulate_interval`)
    and ``--compare``'s side-by-side; returns ``(result, interval or None, comparison or None)``."""
    from .predict_option import predictor_of

    interval = None
    if args.interval:
        from graphs.serving.sim.intervals import simulate_interval

        interval = simulate_interval(cfg, args.device, reqs, predictor=predictor_of(args), **run)
        res = interval.point
    else:
        from graphs.serving.sim.simulator import simulate

        res = simulate(cfg, args.device, reqs, predictor=predictor_of(args), **run)
    comparison = None
    if args.compare:  # with a fit, the profile's own terms price a "predicted" column beside it
        plain = _overheads(args, profile, eng, None) if fit is not None and args.predict else None
        comparison = _comparison(args, cfg, reqs, run, res, interval, replayed, plain)
    return res, interval, comparison


def _check_outputs(args: argparse.Namespace) -> None:
    """Every output path (``--csv``, ``--plot`` and its timeline) checked before any work."""
    from costmodel.outfiles import PLOT_SUFFIXES, sibling

    if args.csv:
        check_output_path(args.csv, "--csv")
    if args.plot:
        check_output_path(args.plot, "--plot", suffixes=PLOT_SUFFIXES)
        check_output_path(sibling(args.plot, _TIMELINE, default_suffix=".png"), "--plot (its timeline)")


def _max_rate_run(args: argparse.Namespace, req: Any, cfg: Any, profile: Any, topo: Any, fit: Any) -> int:
    """``--max-rate``: the highest rate meeting the SLOs (:func:`graphs.serving.planning.capacity_search.max_rate`),
    every probe on the same engine, printed or as JSON."""
    from graphs.serving.planning.capacity_search import max_rate
    from graphs.serving.planning.cost import sim_cost

    from .cost_option import cost_text, rates_of
    from .predict_option import predict_file_line, predictor_of

    eng = _engine(args, cfg, profile)
    m = max_rate(
        cfg,
        args.device,
        slo_ttft=args.slo_ttft,
        slo_tpot=args.slo_tpot,
        requests=args.requests,
        prompt=args.prompt,
        output=args.output,
        arrival=args.arrival,
        seed=args.seed,
        percentile=args.percentile,
        progress=progress_bar("max-rate", args.quiet, "probes"),
        predictor=predictor_of(args),
        overheads=_overheads(args, profile, eng, fit),  # every probe with the same engine
        topology=topo,
        engine=eng,
    )
    cost = sim_cost(m.at_rate, rates_of(args, [args.device])[args.device]) if m.at_rate else None
    keep(args, result=m, config=cfg, cost=cost)
    if args.json:
        print(dump({**m.to_dict(), "engine": profile.to_dict(), "cost": cost}))
        return 0
    print(
        f"{cfg.name} on {args.device}, {topo.devices} device(s): highest rate with P{args.percentile:g} "
        f"TTFT <= {args.slo_ttft} s and TPOT <= {args.slo_tpot} s"
    )
    print(f"  {req.workload_text()}")
    print(f"  physical ceiling {m.ceiling_rate:,.3f} requests/s (the token-wise kernels back to back)")
    print(f"  {profile.summary()}")
    if fit is not None:
        print(predict_file_line(args.predict_file, fit, cfg.name, args.device))
    if m.at_rate is not None and m.at_rate.coverage is not None:
        print("\n".join(_predicted_lines(args, m.at_rate)))
        print("  (coverage of the simulation at the max rate)")
    for rate, ok, t, p in m.probes:
        print(
            f"  {rate:10.3f} req/s  P{args.percentile:g} TTFT {t:8.4f} s  TPOT {p:8.4f} s  {'meets' if ok else 'misses'}"
        )
    if m.rate is None and not m.saturated:
        print(
            f"  not determined: every probe up to the physical ceiling ({m.ceiling_rate:,.3f} requests/s, "
            f"the token-wise kernels back to back at their roofline) meets the SLOs; {args.requests:,} "
            "requests are too few to load the deployment (raise --requests)"
        )
        return 0
    if m.rate is None:
        print("  no probed rate meets the SLOs")
        return 0
    print(f"  max rate {m.rate:.3f} requests/s = {m.rate_per_device:.3f} requests/s per device")
    if m.at_rate is not None:
        print(f"  at that rate, {cost_text(cost)}")
    return 0


def _requests(args: argparse.Namespace) -> tuple[Any, Any, str, Any]:
    """The run's requests: a ``--trace``'s, a ``--workload-from`` run's (its clients become
    ``--concurrency``), or drawn (:func:`graphs.serving.sim.requests.synthetic`); checked against the
    model's context. Returns ``(trace, replayed run, what the replay took, requests)``."""
    from graphs.serving.sim.requests import read_trace, synthetic

    from .model_option import check_context

    trace = read_trace(args.trace) if args.trace else None
    replayed, replay_said = _workload_from(args) if args.workload_from else (None, "")
    if replayed is not None:
        args.concurrency = replayed.concurrency  # the run's own clients (vllm's --max-concurrency)
    if trace is not None:
        reqs = trace.requests
    elif replayed is not None:
        reqs = replayed.requests
    else:
        reqs = synthetic(
            args.requests,
            rate=args.rate,
            prompt=args.prompt,
            output=args.output,
            arrival=args.arrival,
            seed=args.seed,
            shared_prefix=args.shared_prefix,
            prompt_pool=args.prompt_pool or 0,
            turns=args.turns,
            think_s=args.think_time,
        )
    longest = max(r.prompt + r.output for r in reqs)  # the most a sequence holds: its prompt and answer
    check_context(args, longest, "--prompt + --output" if trace is None else "the trace's prompt + output")
    return trace, replayed, replay_said, reqs


def _run_settings(
    args: argparse.Namespace,
    cfg: Any,
    reqs: Any,
    eng: Any,
    topo: Any,
    spec: Any,
    tiers: Any,
    overheads: Any,
) -> dict[str, Any]:
    """The keyword arguments every simulation of this run takes (the interval's ends, the
    comparison's bound): SLOs, load, topology, engine, overheads, and a closed loop's stagger."""
    from .predict_option import predictor_of

    run: dict[str, Any] = dict(
        slo_ttft=args.slo_ttft,
        slo_tpot=args.slo_tpot,
        rate=args.rate,
        concurrency=args.concurrency,
        spec=spec,
        kv_tiers=tiers,
        overheads=overheads,
        topology=topo,
        engine=eng,
    )
    if args.stagger == "cycle":  # one run started together measures the cycle the loop spreads over
        from graphs.serving.sim.simulator import steady_stagger_s

        others = {k: v for k, v in run.items() if k != "concurrency"}
        run["stagger_s"] = steady_stagger_s(
            cfg, args.device, reqs, concurrency=args.concurrency, predictor=predictor_of(args), **others
        )
    elif args.stagger is not None:
        run["stagger_s"] = float(args.stagger)
    if "stagger_s" in run:
        run["stagger_seed"] = args.seed
    run["progress"] = progress_bar("simulate", args.quiet, "requests")
    return run


def _write_files(args: argparse.Namespace, res: Any) -> None:
    """``--csv``'s per-request rows and ``--plot``'s CDFs and timeline, each path said."""
    from costmodel.outfiles import sibling

    if args.csv:
        res.requests_csv(args.csv, "--csv")
    if not args.plot:
        return
    from costmodel.plots import latency_cdf_plot, plot_title, serving_timeline_plot

    point = {"model": res.model, "device": res.device, "tp": args.tp}
    priced = _priced_by(args)
    latency_cdf_plot(
        {
            "TTFT": res.per_request["ttft_s"],
            "TPOT": res.per_request["tpot_s"],
            "end to end": res.per_request["e2e_s"],
        },
        args.plot,
        title=plot_title(f"latency CDFs {_load(args)}, {priced}", **point),
        slos={k: v for k, v in (("TTFT", args.slo_ttft), ("TPOT", args.slo_tpot)) if v is not None},
    )
    timeline = sibling(args.plot, _TIMELINE, default_suffix=".png")
    serving_timeline_plot(
        res.timeline, timeline, title=plot_title(f"batch, queue and KV use over time, {priced}", **point)
    )
    print(f"wrote {args.plot} (latency CDFs) and {timeline} (timeline)", file=sys.stderr)


def _print_head(
    args: argparse.Namespace,
    res: Any,
    cfg: Any,
    topo: Any,
    spec: Any,
    profile: Any,
    fit: Any,
    settings: str,
    run: dict[str, Any],
) -> None:
    """The run's first lines: what ran, the workload, the engine, notes, what priced it."""
    from costmodel.hardware import get_device
    from costmodel.hardware.fallback import roof_notes
    from graphs.blocks.mtp import mtp_notes
    from graphs.serving.sim.data_parallel import dp_line

    from .predict_option import predict_file_line

    print(
        f"{res.model} on {res.device}: {res.requests:,} requests over {res.duration_s:.1f} s, "
        f"{topo.devices} device(s), {res.iterations:,} iterations, {res.preemptions} preemption(s)"
    )
    print(f"  {settings}")
    if topo.dp > 1:
        print(f"  {dp_line(topo)}")
    print(f"  {profile.summary()}")
    if args.predict and args.predict != profile.framework:
        print(
            f"  note: {args.predict} kernels price engine {profile.ref}, whose own are {profile.framework}'s"
        )
    if "stagger_s" in run:
        print(
            f"  closed loop: the clients' first sends drawn uniformly over {run['stagger_s']:.3f} s (--seed {args.seed})"
        )
    plain_mtp = mtp_notes(cfg) if spec is None or spec.draft != "mtp" else ()  # MTP left out, said
    hw = get_device(res.device)  # a unit priced on another unit's roof; a tp group across domains
    for note in roof_notes(hw) + plain_mtp + hw.group_notes(topo.tp):
        print(f"  note: {note}")
    if fit is not None:
        print(predict_file_line(args.predict_file, fit, res.model, res.device))
    if res.overheads is not None:
        print(f"  {res.overheads}")
    if res.coverage is not None:
        print("\n".join(_predicted_lines(args, res)))


def _print_latencies(args: argparse.Namespace, res: Any, interval: Any, comparison: Any) -> None:
    """The latency table, the interval and the comparison."""
    print(f"  {'':10s} {'mean':>10s} {'P50':>10s} {'P90':>10s} {'P99':>10s}")
    for name, s in (("TTFT s", res.ttft), ("TPOT s", res.tpot), ("E2E s", res.e2e)):
        if s.mean != s.mean:  # no samples (Summary.of): every request ended at its first token
            print(f"  {name:10s} none: no request generated a second token (TPOT is the time between tokens)")
            continue
        print(f"  {name:10s} {s.mean:10.4f} {s.p50:10.4f} {s.p90:10.4f} {s.p99:10.4f}")
    if interval is not None:
        print("\n".join(_interval_lines(interval)))
    if comparison is not None:
        print("  side by side, the same requests (the bound: every kernel at its roofline, no engine time):")
        print("\n".join(comparison.lines()))


def _print_throughput(args: argparse.Namespace, res: Any, topo: Any, cost: Any) -> None:
    """Throughput (closed loop, steady state, overall), the caches, routing, speculation,
    goodput and cost."""
    from .cost_option import cost_text

    if res.concurrency is not None:
        print(
            f"  closed loop, {res.concurrency} client(s): {res.requests_per_s:.2f} requests/s, "
            f"{res.output_tokens_per_s:,.0f} output tokens/s ({res.output_tokens_per_s_per_device:,.0f} per device), "
            f"completed over the {res.duration_s:.1f} s from the first send to the last answer (as vllm bench "
            "serve and AIPerf count it)"
        )
        print("  no drain tail apart from it: a closed loop sends a request only when a client is free")
        print(
            f"  mean batch {res.mean_batch:.1f}, KV blocks {100 * res.mean_kv_utilisation:.0f}% used on average"
        )
    elif res.steady_requests_per_s is not None and res.steady_output_tokens_per_s is not None:
        print(
            f"  steady-state throughput (first to last arrival, {res.steady_window_s:.1f} s) "
            f"{res.steady_requests_per_s:.2f} requests/s, {res.steady_output_tokens_per_s:,.0f} output tokens/s "
            f"({res.steady_output_tokens_per_s / topo.devices:,.0f} per device), arrivals "
            f"{res.offered_requests_per_s:.2f} requests/s"
        )
    else:
        print("  steady-state throughput: not defined (every request arrives at once)")
    if res.concurrency is None:
        print(
            f"  overall, the {res.drain_s:.1f} s drain tail after the last arrival included: "
            f"{res.requests_per_s:.2f} requests/s, {res.output_tokens_per_s:,.0f} output tokens/s; "
            f"mean batch {res.mean_batch:.1f}, KV blocks {100 * res.mean_kv_utilisation:.0f}% used on average"
        )
    if (
        res.prefix_cache_hits
        or args.enable_prefix_caching
        or (args.enable_prefix_caching is None and (args.shared_prefix or args.prompt_pool or args.turns > 1))
    ):
        print(f"  prefix cache hits: {res.prefix_cache_hits:,} admission(s)")
    if res.kv_tiers is not None:
        kt = res.kv_tiers
        gpu = res.prefix_cache_hits - kt.host_hits - kt.ssd_hits
        print(
            f"  prefix hits by tier: GPU {gpu:,}, host {kt.host_hits:,} loaded + {kt.host_recomputed:,} recomputed "
            f"instead, SSD {kt.ssd_hits:,} loaded + {kt.ssd_recomputed:,} recomputed instead (recomputing was "
            f"faster than the transfer); loads "
            f"{kt.load_s * 1e3:,.1f} ms in all over the {kt.host_bandwidth / 1e9:g} GB/s host link, "
            f"{kt.exposed_s * 1e3:,.1f} ms of it not hidden by compute (added to TTFTs)"
        )
    if res.prefix_routed is not None:
        eps = DEFAULT_PREFIX_EPS if args.prefix_eps is None else args.prefix_eps
        print(
            f"  prefix router: {res.prefix_routed[0]:,} request(s) sent where their prefix or conversation is, "
            f"{res.prefix_routed[1]:,} sent elsewhere by the load bound (--prefix-eps {eps:g})"
        )
    if res.spec is not None:
        st = res.spec
        print(
            f"  speculative decoding ({st.draft} drafts k = {st.k}): {st.tokens_per_verification:.2f} tokens per "
            f"verification, {100 * st.acceptance:.1f}% of {st.drafted:,} drafted tokens accepted, the draft "
            f"{100 * st.draft_share:.1f}% of the forward time"
        )
    if res.goodput_requests_per_s is not None:
        print(
            f"  goodput {res.goodput_requests_per_s:.2f} requests/s ({100 * (res.slo_attainment or 0):.1f}% meet the SLOs)"
        )
    print(f"  {cost_text(cost)}")
    if args.csv:
        print(f"per-request rows written to {args.csv}")


def add_simulate_parser(sub: Any) -> None:
    sp = sub.add_parser(
        "simulate", help="request-level serving simulation: TTFT/TPOT percentiles under a rate"
    )
    sp.add_argument("model", nargs="?", default=None, help="catalog name or path to a config.json")
    sp.add_argument("--device", default="h100-sxm")
    sp.add_argument("--tp", type=int, default=1, help="tensor-parallel degree of each replica")
    add_dtype_options(sp)
    add_predict_option(
        sp,
        help="price every iteration's kernels from this framework's measured kernels instead of the "
        "roofline bound ([measured] extra)",
    )
    sp.add_argument(
        "--compare",
        action="store_true",
        help="print (and with --html draw) the bound, this prediction with its interval and, with "
        "--workload-from, the measured run side by side on the same requests",
    )
    sp.add_argument(
        "--interval",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="also run the optimistic and pessimistic ends (P10, P90 of the kernels' held-out errors) "
        "and print each metric's interval (default: on with --predict, but for --max-rate)",
    )
    sp.add_argument(
        "--rate",
        type=float,
        default=None,
        help="requests per second (with --turns: conversations started per second)",
    )
    sp.add_argument(
        "--requests",
        type=int,
        default=DRAWN_DEFAULTS["requests"],
        help="requests to simulate (with --turns: conversations)",
    )
    sp.add_argument(
        "--arrival",
        default="poisson",
        help="gaps of --rate: poisson, constant (exactly 1/rate apart) or gamma:CV",
    )
    sp.add_argument(
        "--concurrency",
        type=int,
        default=None,
        help="closed loop: N clients, each sending its next request when its answer has arrived "
        "(with --rate: a request waits for a free client, as vllm bench serve --max-concurrency)",
    )
    sp.add_argument(
        "--stagger",
        default=None,
        help="with --concurrency: spread the clients' first sends uniformly over S seconds (seeded by "
        "--seed), or 'cycle': over one request's cycle, measured by a first run that starts them "
        "together (the loop's steady state; started together, identical requests stay in step)",
    )
    sp.add_argument(
        "--prompt-pool",
        type=int,
        default=None,
        help="N distinct prompts drawn once; each request repeats one (whole-prompt prefix-cache hits)",
    )
    sp.add_argument(
        "--turns",
        type=int,
        default=1,
        help="turns per conversation: each prompt is the history (cached) plus a new --prompt message",
    )
    sp.add_argument(
        "--think-time",
        type=float,
        default=0.0,
        help="seconds a client waits after an answer before its next turn or request (--turns, --concurrency)",
    )
    sp.add_argument(
        "--prompt",
        default=DRAWN_DEFAULTS["prompt"],
        help="prompt tokens: fixed:N, uniform:LO,HI, lognormal:MEAN,SIGMA",
    )
    sp.add_argument(
        "--output", default=DRAWN_DEFAULTS["output"], help="output tokens, same forms as --prompt"
    )
    sp.add_argument("--trace", default=None, help="CSV or JSONL: arrival_s, prompt_tokens, output_tokens")
    sp.add_argument(
        "--workload-from",
        default=None,
        metavar="RESULT",
        help="replay the requests of your own benchmark run: its prompt and output lengths, arrivals "
        "(or rate) and clients, read as `calibrate serving` reads it (vllm bench serve JSON, GuideLLM "
        "report, result CSV); what it took is printed",
    )
    sp.add_argument(
        "--workload-run",
        type=int,
        default=None,
        metavar="INDEX",
        help="which run of a --workload-from file holding several (a GuideLLM report's benchmarks, from 0)",
    )
    sp.add_argument(
        "--seed",
        type=int,
        default=DRAWN_DEFAULTS["seed"],
        help="random seed of the drawn arrivals and lengths",
    )
    sp.add_argument(
        "--allow-long-context",
        action="store_true",
        help="simulate requests whose prompt + output exceed the model's context limit, with a warning",
    )
    add_engine_options(sp)
    sp.add_argument(
        "--num-blocks", type=int, default=None, help="KV blocks per replica (default: the engine's pool rule)"
    )
    sp.add_argument(
        "--enable-prefix-caching",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="keep full KV blocks cached for reuse (a shared prompt prefix; a preempted request's own), "
        "or (--no-enable-prefix-caching) not (default: the engine's: on for vLLM V1)",
    )
    sp.add_argument(
        "--shared-prefix", type=int, default=0, help="tokens every drawn prompt starts with (a system prompt)"
    )
    sp.add_argument("--overhead-s", type=float, default=0.0, help="CPU/scheduling time per iteration (s)")
    sp.add_argument("--replicas", type=int, default=1, help="replicas behind the router")
    sp.add_argument(
        "--router",
        choices=("round_robin", "least_outstanding", "prefix"),
        default="least_outstanding",
        help="how requests pick a replica: in turn, the fewest tokens still to process, or prefix: "
        "where the request's prefix (or conversation) is cached, within --prefix-eps",
    )
    sp.add_argument(
        "--prefix-eps",
        type=float,
        default=None,
        help="--router prefix load bound: a replica holding more than (1 + eps) x the mean outstanding "
        "tokens is passed over for the least-outstanding one (dimensionless; default 0.5)",
    )
    add_group_options(sp, many=False)
    sp.add_argument("--disagg", default=None, help="PREFILL:DECODE replicas, e.g. 1:2 (disaggregated)")
    sp.add_argument("--link-bandwidth", type=float, default=None, help="KV transfer link (bytes/s), --disagg")
    sp.add_argument(
        "--link-latency", type=float, default=0.0, help="per-layer transfer latency (s), --disagg"
    )
    add_spec_options(sp)
    sp.add_argument(
        "--host-kv-bytes",
        type=float,
        default=0.0,
        help="host memory for evicted prefix KV per replica (bytes; 0: none; with --enable-prefix-caching)",
    )
    sp.add_argument(
        "--host-link-bandwidth",
        type=float,
        default=None,
        help="device-host link per direction per device (bytes/s; default the catalog's host link: PCIe "
        "Gen5 64e9 on H100/H200, NVLink-C2C 450e9 on GB200)",
    )
    sp.add_argument(
        "--ssd-kv-bytes",
        type=float,
        default=0.0,
        help="local SSD below host memory per replica (bytes; 0: none)",
    )
    sp.add_argument(
        "--ssd-bandwidth", type=float, default=None, help="SSD read bandwidth per device (bytes/s)"
    )
    sp.add_argument("--slo-ttft", type=float, default=None, help="TTFT SLO (s)")
    sp.add_argument("--slo-tpot", type=float, default=None, help="TPOT SLO (s)")
    sp.add_argument("--max-rate", action="store_true", help="search the highest rate within the SLOs")
    add_cost_options(sp)
    sp.add_argument("--percentile", type=float, default=99.0, help="the SLO percentile for --max-rate")
    sp.add_argument("--csv", default=None, help="write one row per request")
    sp.add_argument("--plot", default=None, help="latency CDFs (PNG/SVG) and a -timeline figure (plot extra)")
    sp.add_argument("--quiet", action="store_true", help="no progress bar")
    sp.add_argument("--json", action="store_true")
    sp.set_defaults(func=cmd_simulate)
    add_html_option(sp, "simulate")
