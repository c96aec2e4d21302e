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
capacity": the tables state no capacity).

    python -m benchmarks.request_path_fit --table-terms vllm:0.004:0,trtllm:0.003:0,sglang:0.004:0
    python -m benchmarks.request_path_fit --write        # docs/request_path.md

``--table-terms`` names the ``r0, p0`` the tables were generated with (default: the profiles'
current terms, right once the tables are regenerated with them).
"""

from __future__ import annotations

import argparse
import math
import statistics
from pathlib import Path
from typing import Any

from benchmarks import served_errors as se
from benchmarks.replay import load_rows
from benchmarks.replay.pages import write_page
from graphs.serving.engines import get_engine

__all__ = ["GRID_MS", "LIGHT_CLIENTS", "fit", "main", "rows"]

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "request_path.md"
GRID_MS = range(0, 61)  #: the candidate request_s values (ms)
LIGHT_CLIENTS = 8  #: a closed loop of at most this many clients is light load (module doc)
FRAMEWORKS = ("vllm", "trtllm", "sglang")


def rows() -> list[dict[str, Any]]:
    """Every compared TTFT row: id, framework, held out or not, light or not, measured (s),
    simulated (s) and prompt tokens."""
    from benchmarks.replay.silicon import load_sample, silicon_rows

    by_id = {r["id"]: r for r in load_rows(subset="core")}
    by_id.update({r["id"]: r for r in silicon_rows(load_sample())[0]})
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
                "held": r["deployment"] in held,
                "measured": measured,
                "simulated": measured * (1 + r["error"]),
                "prompt": float(d["isl"]),
                "clients": int(d["concurrency"]) if d.get("concurrency") else None,
                "rate": float(d["request_rate"]) if d.get("request_rate") else None,
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


def report(table_terms: dict[str, tuple[float, float]]) -> str:
    """The fit and its errors, fitted and held-out rows apart, as Markdown."""
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
        fitted = [r for r in data if r["framework"] == fw and not r["held"]]
        held = [r for r in data if r["framework"] == fw and r["held"]]
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
            "Generated by `benchmarks/request_path_fit.py --write` (its docstring states the model). "
            f"The tables were generated with {terms}; `after` applies each profile's current "
            "`request_s` and `per_prompt_token_s`. A framework's `request_s` is fitted only on its rows "
            "outside the held-out split; its rows inside it are reported apart. Light load: at most "
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
        ]
    )


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
    args = ap.parse_args(argv)
    text = report(_table_terms(args.table_terms))
    if args.write:
        write_page(DOC, text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
