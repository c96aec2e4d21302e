"""The engine profiles' shared front end ``frontend_token_s``, fitted to the validation tables'
TPOT rows outside the held-out split.

The front end (``graphs/serving/engines/knobs.py``, module doc) drains every output token of
every running request, ``f`` seconds each, one token after another; an iteration is handed over
no sooner than the front end has drained the one before, so in steady state a closed loop of
``C`` clients, every one decoding, has an iteration period and a TPOT of at least ``C f``:

.. math::

    \\mathrm{TPOT} \\ge C f \\quad\\Rightarrow\\quad f \\le \\min_{\\text{rows}} \\mathrm{TPOT} / C

(``C`` the row's clients; the replays run them all at once: ``max_num_seqs = max(C, profile's)``,
``benchmarks/replay/workload.py``). Every calibration row of a framework bounds its ``f`` from
above; the fit takes the bound, ``f = min TPOT / C``: the slowest front end no calibration row
contradicts. The bound is the front end's cost only where the rows that reach it are at the
front end's ceiling; its signature is a TPOT that does not fall with tensor parallelism (a GPU
step shrinks as the weights spread over more devices, a single CPU process does not). The fit is
IDENTIFIED when the rows within :data:`TIE` of the bound include one deployment's runs (model,
device, engine version, lengths, clients) at two or more TP sizes; otherwise it is reported as not
identified and the profile keeps no front end (0), as no source publishes the engines' ceilings.
Held-out rows (``benchmarks/data/heldout.toml``) are listed apart and never used.

    python -m benchmarks.frontend_fit            # the report (seconds)
    python -m benchmarks.frontend_fit --write    # docs/frontend_fit.md
"""

from __future__ import annotations

import argparse
import collections
from pathlib import Path
from typing import Any

from benchmarks import served_errors as se
from benchmarks.replay.pages import write_page
from benchmarks.request_path_fit import all_rows

__all__ = ["FRAMEWORKS", "TIE", "Fit", "fit", "main", "report", "rows"]

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "frontend_fit.md"
FRAMEWORKS = ("vllm", "trtllm", "sglang")
#: rows whose TPOT / C lies within this fraction of the bound count as reaching it (module doc)
TIE = 0.10


def rows() -> list[dict[str, Any]]:
    """Every compared TPOT row of a closed loop: id, framework, held out or not, deployment,
    tensor parallelism, the run's lengths and clients, measured TPOT (s) and its bound
    ``TPOT / C`` (s per token)."""
    by_id = all_rows()
    held = se.heldout()
    out = []
    for r in se.residual_rows():
        d = by_id[r["id"]]
        if r["metric"] != "TPOT" or not d.get("concurrency"):
            continue
        c = int(d["concurrency"])
        tpot = float(d["value"])
        parts = r["deployment"].split("|")  # set:engine|version|model|device|dtype|tp|gpus
        out.append(
            {
                "id": r["id"],
                "framework": r["framework"],
                "held": r["deployment"] in held,
                # one deployment's runs at every TP: all but the TP and the device count
                "run": (*parts[:5], d["isl"], d["osl"], c),
                "tp": int(parts[5]),
                "clients": c,
                "tpot": tpot,
                "bound": tpot / c,
                "error": r["error"],
            }
        )
    return out


class Fit(collections.namedtuple("Fit", "framework value_s bound_s identified rows ties")):
    """One framework's fit: the value a profile takes (s per token; 0 when not identified), the
    bound, whether it is identified, the calibration rows used and those reaching the bound."""


def fit(rs: list[dict[str, Any]], framework: str) -> Fit:
    """The fit of ``framework``'s ``frontend_token_s`` (module doc) on its calibration rows.

    Parameters
    ----------
    rs : list of dict
        :func:`rows`.
    framework : str
        The corpus framework.

    Returns
    -------
    Fit
    """
    cal = [r for r in rs if r["framework"] == framework and not r["held"]]
    if not cal:
        return Fit(framework, 0.0, None, False, 0, [])
    b = min(r["bound"] for r in cal)
    ties = sorted((r for r in cal if r["bound"] <= b * (1 + TIE)), key=lambda r: r["bound"])
    tps: dict[tuple[Any, ...], set[int]] = collections.defaultdict(set)
    for r in ties:
        tps[r["run"]].add(r["tp"])
    identified = any(len(s) >= 2 for s in tps.values())
    return Fit(framework, b if identified else 0.0, b, identified, len(cal), ties)


def report(rs: list[dict[str, Any]] | None = None) -> str:
    """The page: per framework the bound, the rows reaching it and whether it is identified.

    Parameters
    ----------
    rs : list of dict, optional
        :func:`rows` (default: read them).

    Returns
    -------
    str
        Markdown.
    """
    rs = rows() if rs is None else rs
    lines = [
        "# The shared front end's cost per output token, fitted",
        "",
        "Generated by `python -m benchmarks.frontend_fit --write` (the method: its module doc).",
        "`f <= min TPOT / C` over each framework's calibration rows (closed loops, outside the held-out",
        f"split); identified when the rows within {TIE:.0%} of the bound include one deployment's runs at",
        "two or more TP sizes (a ceiling that does not move with TP is a CPU's, not the GPU's).",
        "",
        "| framework | calibration rows | bound f (us/token) | ceiling (tokens/s) | identified | profile takes |",
        "|---|---:|---:|---:|---|---:|",
    ]
    fits = [fit(rs, fw) for fw in FRAMEWORKS]
    for f in fits:
        bound = f"{f.bound_s * 1e6:.1f}" if f.bound_s else "-"
        ceiling = f"{1 / f.bound_s:,.0f}" if f.bound_s else "-"
        lines.append(
            f"| {f.framework} | {f.rows} | {bound} | {ceiling} | {'yes' if f.identified else 'no'} "
            f"| {f.value_s * 1e6:.1f} us |"
        )
    for f in fits:
        lines += ["", f"## {f.framework}: the rows within {TIE:.0%} of the bound", ""]
        lines += ["| row | TP | clients | TPOT (ms) | TPOT / C (us) |", "|---|---:|---:|---:|---:|"]
        lines += [
            f"| {r['id']} | {r['tp']} | {r['clients']} | {r['tpot'] * 1e3:.2f} | {r['bound'] * 1e6:.1f} |"
            for r in f.ties
        ]
        held = sorted(
            (
                r
                for r in rs
                if r["framework"] == f.framework and r["held"] and f.bound_s and r["bound"] < f.bound_s
            ),
            key=lambda r: r["bound"],
        )
        lines += ["", f"Held-out rows below the bound (not used): {len(held)}"]
        lines += [f"- {r['id']}: TP {r['tp']}, {r['bound'] * 1e6:.1f} us" for r in held]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--write", action="store_true", help=f"write {DOC.relative_to(ROOT)}")
    args = ap.parse_args(argv)
    text = report()
    if args.write:
        write_page(DOC, text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
