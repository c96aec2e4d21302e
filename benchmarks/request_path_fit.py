"""The engine profiles' fixed request path ``request_s``, fitted to the validation tables' TTFT rows
outside the held-out split.

What a client measures as TTFT is the request path (:meth:`EngineOverheads.request_path_s`:
``r + p S``, plus the prompt's block hashing with prefix caching on), the wait for the running
iteration to end, the iterations to the first token and its streaming. Every term but ``r`` has a
source or a fit of its own (``graphs/serving/engines/``); ``r`` is fitted here, per corpus
framework, on the rows of ``docs/serving_accuracy.md`` and ``docs/silicon_accuracy.md`` whose
TTFT is compared and whose deployment is not in ``benchmarks/data/heldout.toml``.

The model of a row under other request-path terms: the row's simulated TTFT (the tables'
``simulated`` column, run with the terms ``r0, p0`` the tables were generated with) moved by the
change of the path,

.. math::

    \\mathrm{TTFT}(r, p) = \\mathrm{TTFT}_{table} + (r - r_0) + (p - p_0)\\,S

with ``S`` the row's stated prompt length (a constant shift of every send moves each request's
first token by the same amount when the load is light; at heavy load the later arrivals change
the queue a little, which the shift leaves out). ``r`` is chosen on a 1 ms grid in [0, 60] ms to
make the median of ``|TTFT(r, p) / measured - 1|`` over the framework's fitted rows least (the
accuracy target's own statistic); the least-squares choice over the rows within 50 % is printed
beside it. Held-out rows are reported apart, never used. Light load: a closed loop of at most 8
clients, or a finite rate at most half the highest finite rate of its table (a proxy of "below half of
capacity": the tables state no capacity). Rows priced by a profile with a request path of its
own (Triton's, sourced) neither enter a fit nor move (:func:`own_path`).

The light-load check (:func:`light_load`, the page's last section) lists instead the TTFT rows
whose run offered less than half the replay's own capacity (:func:`offered_rps`,
:func:`capacity_rps`), per engine, with their error against the 15 % target.

    python -m benchmarks.request_path_fit --table-terms vllm:0.025:2e-6,trtllm:0.025:2e-6,sglang:0.025:2e-6
    python -m benchmarks.request_path_fit --skip-light   # the fit alone, in seconds
    python -m benchmarks.request_path_fit --write        # docs/request_path.md (minutes)

``--table-terms`` names the ``r0, p0`` the tables were generated with (default: the profiles'
current terms, right once the tables are regenerated with them).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import statistics
import sys
from pathlib import Path
from typing import Any

from benchmarks import served_errors as se
from benchmarks.replay import load_rows, row_workload, simulate_row, steady_rate
from benchmarks.replay.pages import write_page
from benchmarks.replay.rows import ENGINE
from benchmarks.replay.workload import overheads_profile, stated_settings
from graphs.serving.engines import get_engine
from graphs.serving.sim.engine import profile_engine
from graphs.serving.sim.requests import Request

__all__ = [
    "GRID_MS",
    "LIGHT_CLIENTS",
    "LIGHT_FRACTION",
    "capacity_rps",
    "fit",
    "light_load",
    "main",
    "offered_rps",
    "own_path",
    "rows",
]

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "request_path.md"
GRID_MS = range(0, 61)  #: the candidate request_s values (ms)
LIGHT_CLIENTS = 8  #: a closed loop of at most this many clients is light load (module doc)
#: the light-load check's threshold: the offered load below this share of capacity (:func:`light_load`)
LIGHT_FRACTION = 0.5
FRAMEWORKS = ("vllm", "trtllm", "sglang")


def all_rows() -> dict[str, dict[str, str]]:
    """Every row of both validation tables by id (the published core rows, the silicon sample's)."""
    from benchmarks.replay.silicon import load_sample, silicon_rows

    by_id = {r["id"]: r for r in load_rows(subset="core")}
    by_id.update({r["id"]: r for r in silicon_rows(load_sample())[0]})
    return by_id


def rows() -> list[dict[str, Any]]:
    """Every compared TTFT row: id, framework, held out or not, light or not, measured (s),
    simulated (s) and prompt tokens."""
    by_id = all_rows()
    held = se.heldout()
    out = []
    for r in se.residual_rows():
        if r["metric"] != "TTFT":
            continue
        d = by_id[r["id"]]
        measured = float(d["value"])
        out.append(
            {
                "id": r["id"],
                "deployment": r["deployment"],
                "framework": r["framework"],
                "own_path": own_path(d, r["framework"]),
                "held": r["deployment"] in held,
                "measured": measured,
                "simulated": measured * (1 + r["error"]),
                "prompt": float(d["isl"]),
                "clients": int(d["concurrency"]) if d.get("concurrency") else None,
                "rate": float(d["request_rate"]) if d.get("request_rate") else None,
                "row": d,
            }
        )
    top: dict[str, float] = {}  # each table's highest finite rate (an "inf" row sends all at once)
    for r in out:
        if r["rate"] is not None and math.isfinite(r["rate"]):
            top[r["deployment"]] = max(top.get(r["deployment"], 0.0), r["rate"])
    for r in out:
        r["light"] = (r["clients"] is not None and r["clients"] <= LIGHT_CLIENTS) or (
            r["rate"] is not None and math.isfinite(r["rate"]) and r["rate"] <= 0.5 * top[r["deployment"]]
        )
    return out


def capacity_rps(row: dict[str, str]) -> float:
    """The replay's capacity (requests/s) for a row: its deployment, engine and ``simulated``
    terms (:func:`benchmarks.replay.row_workload`; a wave's engine without its cap of the wave's
    size) at the row's stated lengths, three full batches sent at once, read as the completion
    rate while the batch is full (:func:`benchmarks.replay.steady_rate`). The simulator's
    capacity, not a measured one: the tables state none.

    Parameters
    ----------
    row : dict
        A compared TTFT row.

    Returns
    -------
    float
        Requests per second.
    """
    w = row_workload(row)
    isl, osl = int(row["isl"]), int(row["osl"])
    eng = w.engine
    if w.load == "batch":  # a wave's engine admits at most the wave: the engine's own limit here
        prof = get_engine(row.get("engine_profile") or ENGINE[row["engine"]])
        prof = prof.with_overrides(**stated_settings(row)) if stated_settings(row) else prof
        eng = profile_engine(prof, w.config, w.device, tp=w.topology.tp, request_tokens=isl + osl)
    full = eng.max_num_seqs * w.topology.replicas
    reqs = tuple(Request(i, 0.0, isl, osl) for i in range(3 * full))
    sat = dataclasses.replace(
        w,
        engine=eng,
        load="offline",
        requests=reqs,
        published_requests=len(reqs),
        concurrency=None,
        rate=None,
    )
    return steady_rate(simulate_row(sat, "simulated").finish, full)


def offered_rps(row: dict[str, str], by_id: dict[str, dict[str, str]]) -> float | None:
    """The load a row's run offered (requests/s): a finite rate as stated; a closed loop (or a
    wave) of ``C`` clients by Little's law, ``C / E2E`` with the run's measured mean E2E (its E2E
    row where it has one, :func:`benchmarks.replay.silicon.recovered_e2e_s`; else measured TTFT
    + ``(mean OSL - 1)`` x measured TPOT, the mean of lengths uniform on ``[int(ratio L), L]``
    being ``(int(ratio L) + L) / 2``: approximate where lengths vary). None: everything sent at
    once (an ``inf`` rate), or no TPOT to read.

    Parameters
    ----------
    row : dict
        A compared TTFT row (its id ends in ``ttft``).
    by_id : dict
        Every row of both tables by id (the run's TPOT or ITL and E2E rows among them).

    Returns
    -------
    float or None
    """
    if row.get("request_rate"):
        rate = float(row["request_rate"])
        return rate if math.isfinite(rate) else None
    if not row.get("concurrency"):
        return None
    base = row["id"].removesuffix("ttft")
    if base + "e2e" in by_id:
        e2e = float(by_id[base + "e2e"]["value"])
    else:
        tpot = by_id.get(base + "tpot") or by_id.get(base + "itl")
        if tpot is None:
            return None
        osl = int(row["osl"])
        mean_osl = (int(float(row.get("length_range_ratio") or 1.0) * osl) + osl) / 2
        e2e = float(row["value"]) + (mean_osl - 1) * float(tpot["value"])
    return int(row["concurrency"]) / e2e


def light_load(data: list[dict[str, Any]], by_id: dict[str, dict[str, str]], progress: Any = None) -> str:
    """The light-load check (issue 42 item 2): every compared TTFT row whose run offered less
    than :data:`LIGHT_FRACTION` of the replay's capacity (:func:`offered_rps` over
    :func:`capacity_rps`), per engine, with its error, and per engine the median |error|
    against the 15 % target, calibration and held-out rows apart.

    Parameters
    ----------
    data : list of dict
        :func:`rows`.
    by_id : dict
        Every row of both tables by id.
    progress : callable, optional
        Called with a line per capacity simulated.

    Returns
    -------
    str
        Markdown: the summary table, then the rows.
    """
    caps: dict[tuple[Any, ...], float] = {}
    light = []
    for i, r in enumerate(data):
        lam = offered_rps(r["row"], by_id)
        if lam is None:
            continue
        w = row_workload(r["row"])
        key = (w.config, w.device, w.topology, r["row"]["isl"], r["row"]["osl"], w.load == "batch", w.profile)
        if key not in caps:
            caps[key] = capacity_rps(r["row"])
            if progress:
                progress(f"[{i + 1}/{len(data)}] capacity {caps[key]:.4g} req/s for {r['id']}")
        frac = lam / caps[key]
        if frac < LIGHT_FRACTION:
            light.append({**r, "fraction": frac, "offered": lam})
    summary = [
        "| engine | split | light-load TTFT rows (deployments) | median abs. error | target <= 15 % | within 15 % |",
        "|---|---|---|---|---|---|",
    ]
    body = [
        "| engine | row | split | load | offered / capacity | measured | simulated | error |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for fw in FRAMEWORKS:
        mine = [r for r in light if r["framework"] == fw]
        for name, held in (("calibration", False), ("held out", True)):
            sel = [r for r in mine if r["held"] == held]
            if not sel:
                summary.append(f"| {fw} | {name} | 0 | | | |")
                continue
            errs = [_err(r, 0.0, 0.0) for r in sel]
            med = statistics.median(abs(e) for e in errs)
            deps = len({r["deployment"] for r in sel})
            summary.append(
                f"| {fw} | {name} | {len(sel)} ({deps}) | {_pct(med)} | {'meets' if med <= 0.15 else 'misses'} "
                f"| {sum(abs(e) <= 0.15 for e in errs)} of {len(sel)} |"
            )
        for r in sorted(mine, key=lambda r: (r["held"], r["id"])):
            n = r["clients"]
            load = f"{n} client{'' if n == 1 else 's'}" if n else f"{r['rate']:g} req/s"
            body.append(
                f"| {fw} | {r['id']} | {'held out' if r['held'] else 'calibration'} | {load} "
                f"| {r['fraction']:.2f} | {r['measured'] * 1e3:.1f} ms | {r['simulated'] * 1e3:.1f} ms "
                f"| {_err(r, 0.0, 0.0):+.1%} |"
            )
    return "\n".join([*summary, "", *body])


def own_path(row: dict[str, str], framework: str) -> bool:
    """Whether a row's replay takes its request path from ``framework``'s profile, whose
    ``request_s`` is fitted here: its overheads' profile
    (:func:`benchmarks.replay.workload.overheads_profile`; ``trtllm-bench`` inherits ``trtllm``'s
    terms) has the same ``request_s`` from the same source. A row priced by a profile with a
    request path of its own (Triton's, sourced: 0.77 ms) neither enters the fit nor moves with it.

    Parameters
    ----------
    row : dict
        The published or silicon row.
    framework : str
        Its corpus framework (``vllm``, ``trtllm``, ``sglang``).

    Returns
    -------
    bool
    """
    prof = get_engine(overheads_profile(row) or framework)
    base = get_engine(framework)
    same = prof.cpu_terms["request_s"] == base.cpu_terms["request_s"]
    return same and prof.sources["request_s"] == base.sources["request_s"]


def _err(r: dict[str, Any], shift_s: float, per_token_s: float) -> float:
    return (r["simulated"] + shift_s + per_token_s * r["prompt"]) / r["measured"] - 1


def _median(rs: list[dict[str, Any]], shift_s: float, per_token_s: float) -> float | None:
    return statistics.median(abs(_err(r, shift_s, per_token_s)) for r in rs) if rs else None


def fit(rs: list[dict[str, Any]], r0: float, dp: float) -> tuple[float, float]:
    """``(r by the median, r by least squares)`` (s) over ``rs`` (module doc), given the table's
    ``r0`` and the change ``dp`` of the per-prompt-token term."""
    by_median = min(GRID_MS, key=lambda ms: (_median(rs, ms * 1e-3 - r0, dp) or 0.0, ms))
    near = [r for r in rs if abs(r["simulated"] / r["measured"] - 1) < 0.5]
    by_ls = min(GRID_MS, key=lambda ms: (sum(_err(r, ms * 1e-3 - r0, dp) ** 2 for r in near), ms))
    return by_median * 1e-3, by_ls * 1e-3


def _pct(x: float | None) -> str:
    return "" if x is None else f"{100 * x:.1f} %"


def report(table_terms: dict[str, tuple[float, float]], light: bool = True, progress: Any = None) -> str:
    """The fit and its errors, fitted and held-out rows apart, and (``light``) the light-load
    check (:func:`light_load`, minutes: a capacity simulation per deployment and lengths), as
    Markdown."""
    data = rows()
    lines = [
        "| framework | term | rows fitted (light) | request_s fitted | by least squares | profile's value "
        "| fitted rows: median abs. error before / after (light) | held-out rows (light) "
        "| held-out: median abs. error before / after (light) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for fw in FRAMEWORKS:
        r0, p0 = table_terms[fw]
        prof = get_engine(fw).cpu_terms
        dp = prof["per_prompt_token_s"] - p0
        fitted = [r for r in data if r["framework"] == fw and r["own_path"] and not r["held"]]
        held = [r for r in data if r["framework"] == fw and r["own_path"] and r["held"]]
        by_med, by_ls = fit(fitted, r0, dp)
        new = prof["request_s"] - r0

        def cell(rs: list[dict[str, Any]], new: float = new, dp: float = dp) -> str:
            light = [r for r in rs if r["light"]]
            return (
                f"{_pct(_median(rs, 0.0, 0.0))} / {_pct(_median(rs, new, dp))} "
                f"({_pct(_median(light, 0.0, 0.0)) or 'none'} / {_pct(_median(light, new, dp)) or 'none'})"
            )

        n_light = sum(r["light"] for r in fitted)
        lines.append(
            f"| {fw} | `request_s` | {len(fitted)} ({n_light}) | {by_med:.3f} s | {by_ls:.3f} s "
            f"| {prof['request_s']:.3f} s | {cell(fitted)} | {len(held)} ({sum(r['light'] for r in held)}) "
            f"| {cell(held)} |"
        )

    def change(r: dict[str, Any]) -> tuple[float, float]:
        if not r["own_path"]:  # a profile with a request path of its own (own_path): not moved
            return 0.0, 0.0
        r0, p0 = table_terms[r["framework"]]
        prof = get_engine(r["framework"]).cpu_terms
        return prof["request_s"] - r0, prof["per_prompt_token_s"] - p0

    overall = []
    for name, held in (("outside the held-out split", False), ("held out", True)):
        sel = [r for r in data if r["held"] == held]
        before = statistics.median(abs(_err(r, 0.0, 0.0)) for r in sel)
        after = statistics.median(abs(_err(r, *change(r))) for r in sel)
        overall.append(
            f"- TTFT rows {name} ({len(sel)}): median abs. error {_pct(before)} before, {_pct(after)} after."
        )
    published = [
        f"| {r['id']} | {'held out' if r['held'] else 'fitted'} | {r['measured'] * 1e3:.1f} ms "
        f"| {_err(r, 0.0, 0.0):+.1%} | {_err(r, *change(r)):+.1%} |"
        for r in data
        if r["deployment"].startswith("published:") and r["light"]
    ]
    terms = ", ".join(
        f"{fw} r0 {r0 * 1e3:g} ms, p0 {p0 * 1e6:g} us/token" for fw, (r0, p0) in table_terms.items()
    )
    return "\n".join(
        [
            "# The request path, fitted",
            "",
            "Generated by `python -m benchmarks.request_path_fit --write` (its docstring states the model). "
            f"The tables were generated with {terms}; `after` applies each profile's current "
            "`request_s` and `per_prompt_token_s`. A framework's `request_s` is fitted only on its rows "
            "outside the held-out split; its rows inside it are reported apart. Rows priced by a profile "
            f"with a request path of its own (Triton's, sourced; `own_path()`: {sum(not r['own_path'] for r in data)} "
            "rows) neither enter a fit nor move. Light load: at most "
            f"{LIGHT_CLIENTS} closed-loop clients, or a finite rate at most half its table's highest.",
            "",
            *lines,
            "",
            *overall,
            "",
            "The published tables' TTFT rows at light load (`before`: the tables' simulated error; "
            "`after`: moved by the change of the request path):",
            "",
            "| row | split | measured | before | after |",
            "|---|---|---|---|---|",
            *published,
            "",
            *(_light_section(data, progress) if light else []),
        ]
    )


def _light_section(data: list[dict[str, Any]], progress: Any) -> list[str]:
    """The light-load check's section (:func:`light_load`)."""
    return [
        "## Light load: TTFT below half of capacity",
        "",
        "At light load a request meets no queue, so its TTFT is the request path plus one prefill "
        "iteration and the first token's streaming (`tests/test_request_path.py` pins the simulator "
        "to that sum, each term from the profile and the prefill step priced by the step model). "
        "The rows below are the compared TTFT rows whose run offered less than "
        f"{100 * LIGHT_FRACTION:.0f} % of its capacity: the offered load is the stated rate, or for `C` clients "
        "`C / E2E` (Little's law) with the run's measured mean E2E (its recovered E2E row where it has one, "
        "else measured TTFT + (mean OSL - 1) x measured TPOT); the capacity is the replay's own, its "
        "deployment and engine with three full batches of the row's lengths sent at once (`capacity_rps()`: "
        "the tables state none). Errors are the tables' `simulated` column (their request path as "
        "generated). Target (issue 42): <= 15 % on every engine.",
        "",
        light_load(data, all_rows(), progress),
        "",
    ]


def _table_terms(text: str | None) -> dict[str, tuple[float, float]]:
    if text is None:
        return {
            fw: (get_engine(fw).cpu_terms["request_s"], get_engine(fw).cpu_terms["per_prompt_token_s"])
            for fw in FRAMEWORKS
        }
    out = {}
    for part in text.split(","):
        fw, r0, p0 = part.split(":")
        out[fw] = (float(r0), float(p0))
    if set(out) != set(FRAMEWORKS):
        raise SystemExit(f"--table-terms must name {', '.join(FRAMEWORKS)}")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--table-terms", default=None, help="FW:R0:P0,... the tables were generated with")
    ap.add_argument("--write", action="store_true", help=f"write {DOC.relative_to(ROOT)}")
    ap.add_argument(
        "--skip-light",
        action="store_true",
        help="leave out the light-load check (its capacity runs take minutes)",
    )
    args = ap.parse_args(argv)
    if args.write and args.skip_light:
        raise SystemExit("--write writes the whole page: drop --skip-light")
    prog = (lambda line: print(line, file=sys.stderr)) if sys.stderr.isatty() else None
    text = report(_table_terms(args.table_terms), light=not args.skip_light, progress=prog)
    if args.write:
        write_page(DOC, text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
