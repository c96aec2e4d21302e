"""When a burst's first tokens reach the client: the measured mean TTFT over the benchmark's
duration, beside the simulation's, for every GPUStack run that prints both (source 7 of
``benchmarks/data/README.md``: ``vllm bench serve``, every request sent at once).

An engine that prefills a burst of ``N`` requests first come, first served, at a steady rate
hands out the first tokens evenly over its prefill phase, so their mean is half of it; when the
prefill is most of the run (long prompts, few output tokens) that is half the run:

.. math::

    \\frac{\\overline{\\mathrm{TTFT}}}{D} \\approx \\frac{1}{2}
    \\qquad (\\mathrm{TTFT}_i \\approx i\\,D / N)

A ratio well above one half says the first tokens reached the client late in the run and close
together, which no prefill order does: something between the engine and the client (the API
server's single event loop, which also takes in the ``N`` requests, or the benchmark client's
own) held them back. The run's duration over ``N`` bounds the per-request time of any serial
stage that handles every request (it cannot have taken longer than the run): ``D / N``.

Every number comes from the CSV (the mean TTFT row's value and the "Benchmark duration" its notes
quote from the page) or, with ``--simulate``, from the row's replay (``simulated`` mode, the
accuracy page's: its mean TTFT and the simulated run's duration). The rows are held out: nothing
here is fitted to them.

    python -m benchmarks.burst_ttft                    # measured ratios (seconds)
    python -m benchmarks.burst_ttft --simulate         # and each row's replay (minutes)
    python -m benchmarks.burst_ttft --simulate --write # docs/burst_ttft.md
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
from dataclasses import dataclass

from benchmarks.replay.pages import DOCS, write_page
from benchmarks.replay.rows import excluded, load_rows
from costmodel.errors import CostModelError

__all__ = ["Burst", "bursts", "main", "report"]

DOC = DOCS / "burst_ttft.md"
#: the source whose runs print their duration beside the mean TTFT
SOURCE = "gpustack_performance_lab"
_DURATION = re.compile(r"Benchmark duration ([0-9]+(?:\.[0-9]+)?) s")
#: prompts at most this long count as short (the source's "128 input" case; the others are 1,000+)
SHORT_PROMPT = 256
#: a long-prompt run whose prompts are at least this many times its outputs is prefill-bound
PREFILL_BOUND = 10


@dataclass(frozen=True)
class Burst:
    """One run's mean TTFT row: ``ratio`` its mean TTFT over the run's duration (s / s)."""

    id: str
    engine: str
    version: str
    prompt: int
    output: int
    requests: int
    ttft_s: float
    duration_s: float

    @property
    def ratio(self) -> float:
        return self.ttft_s / self.duration_s

    @property
    def per_request_ms(self) -> float:
        """``D / N`` (ms): the most any serial per-request stage can have taken."""
        return 1e3 * self.duration_s / self.requests


def bursts() -> list[Burst]:
    """Every replayable mean-TTFT row of :data:`SOURCE` whose notes quote the run's duration."""
    out = []
    for r in load_rows(subset=None):
        if r["source_kind"] != SOURCE or r["metric"] != "ttft_mean_s" or excluded(r):
            continue
        m = _DURATION.search(r["notes"])
        if m is None:  # every run of the source prints it: a row without it is a transcription fault
            raise CostModelError(
                f"row {r['id']}: its notes quote no 'Benchmark duration <seconds> s' (every {SOURCE} run prints one)"
            )
        out.append(
            Burst(
                id=r["id"],
                engine=r["engine"],
                version=r["engine_version"],
                prompt=int(float(r["isl"])),
                output=int(float(r["osl"])),
                requests=int(r["num_requests"]),
                ttft_s=float(r["value"]),
                duration_s=float(m.group(1)),
            )
        )
    return out


def _simulated(row: dict[str, str]) -> tuple[float, float]:
    """The replay's mean TTFT and run duration (s) for ``row``."""
    import numpy as np

    from benchmarks.replay.run import simulate_row
    from benchmarks.replay.workload import row_workload

    run = simulate_row(row_workload(row), "simulated")
    return float(np.mean(run.ttft)), float(run.res.duration_s)


def _span(xs: list[float], pct: bool = False) -> str:
    if not xs:
        return "-"
    if pct:
        return f"{min(xs):+.0%} to {max(xs):+.0%} (median {statistics.median(xs):+.0%})".replace("%", " %")
    return f"{min(xs):.2f}-{max(xs):.2f} (median {statistics.median(xs):.2f})"


def report(simulate: bool = False) -> str:
    """The page: one line per run and a summary by prompt length and engine (module doc)."""
    rows = bursts()
    sims: dict[str, tuple[float, float]] = {}
    if simulate:
        by_id = {r["id"]: r for r in load_rows(subset=None)}
        for i, b in enumerate(rows, 1):
            print(f"[{i}/{len(rows)}] {b.id}", file=sys.stderr, flush=True)
            sims[b.id] = _simulated(by_id[b.id])
    lines = [
        "# When a burst's first tokens reach the client",
        "",
        "Generated by `python -m benchmarks.burst_ttft --simulate --write` (module doc: the formula and "
        "what a ratio above one half means). Each GPUStack run (every request sent at once; held out) "
        "with its mean TTFT over the benchmark's duration, measured and simulated. An engine that "
        "prefills a burst first come, first served hands out the first tokens evenly over its prefill, "
        "so a prefill-bound run has a ratio near 0.5; `simulated ratio / measured - 1` is the TTFT "
        "error the hand-out alone would leave were the simulated run as long as the measured one; "
        "`D / N` bounds the per-request time of any serial stage.",
        "",
        "| prompt | engine | runs | measured TTFT / duration | simulated TTFT / duration | "
        "simulated ratio / measured - 1 | D / N (ms) |",
        "|---|---|---|---|---|---|---|",
    ]
    groups: dict[tuple[str, str], list[Burst]] = {}
    for b in rows:
        if b.prompt <= SHORT_PROMPT:
            size = "short prompts (<= 256 tokens)"
        elif b.prompt >= PREFILL_BOUND * b.output:
            size = "long prompts, few outputs (prefill-bound)"
        else:
            size = "outputs >= a tenth of the prompt (decode in the run)"
        groups.setdefault((size, b.engine), []).append(b)
    for (size, engine), bs in sorted(groups.items()):
        sim = [sims[b.id][0] / sims[b.id][1] for b in bs if b.id in sims]
        # the TTFT error the hand-out alone leaves at the simulated duration (a run as long as measured)
        off = [sims[b.id][0] / sims[b.id][1] / b.ratio - 1 for b in bs if b.id in sims]
        lines.append(
            f"| {size} | {engine} | {len(bs)} | {_span([b.ratio for b in bs])} | {_span(sim)} | "
            f"{_span(off, pct=True)} | {_span([b.per_request_ms for b in bs])} |"
        )
    lines += [
        "",
        "| row | engine | prompt / output | requests | measured mean TTFT | duration | ratio | "
        "simulated mean TTFT | simulated duration | ratio |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for b in rows:
        s = sims.get(b.id)
        cells = f"{s[0]:.2f} s | {s[1]:.2f} s | {s[0] / s[1]:.2f}" if s else "- | - | -"
        lines.append(
            f"| {b.id} | {b.engine} {b.version} | {b.prompt:,} / {b.output:,} | {b.requests:,} | "
            f"{b.ttft_s:.2f} s | {b.duration_s:.2f} s | {b.ratio:.2f} | {cells} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--simulate", action="store_true", help="replay each row (minutes)")
    ap.add_argument("--write", action="store_true", help=f"write {DOC.name} in docs/ (needs --simulate)")
    args = ap.parse_args(argv)
    if args.write and not args.simulate:
        ap.error("--write needs --simulate: the page shows the simulated ratios")
    text = report(simulate=args.simulate)
    if args.write:
        write_page(DOC, text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
