"""A ``calibrate serving`` request: the runs, the predictor, the engine and the fit's choices,
typed and checked in one place (issue 43 item 3).

:class:`ServingFitRequest` is what ``costmodel calibrate serving`` parses its command line into and
what a Python caller builds without one. Building it checks each setting's range, the output file
(a path that can be written, never through a link: :func:`costmodel.outfiles.check_output`), the
terms to fit, the ``holdout`` text, and the settings that depend on each other (``fp8_scales``
prices measured kernels: it needs ``predict``), each refusal one line naming the option as the
command line spells it (``--max-requests``, ``--terms``). Its methods read the runs
(:meth:`~ServingFitRequest.read_runs`, :func:`graphs.serving.planning.bench_results.read_results`)
and pick those held out (:meth:`~ServingFitRequest.held_out`);
:func:`graphs.serving.present.serving_fit_report.run_serving_fit` runs the fit.

What stays with the caller: the model (a :class:`~models.ModelConfig`, resolved from a name or a
file), progress lines, and the report's format.
"""

from __future__ import annotations

import hashlib
import math
import os
import stat
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from costmodel.errors import CostModelError

from ..engines.knobs import FIT_DEFAULT_TERMS, TERMS
from ..step.option_checks import check_choice, check_number

if TYPE_CHECKING:
    from ..engines import EngineProfile
    from .bench_results import BenchRun

__all__ = ["ServingFitRequest", "RANGES", "HOLDOUT_WHY"]

#: whole-number settings: (smallest, largest) accepted
RANGES: dict[str, tuple[int, int]] = {
    "tp": (1, 4096),
    "seed": (0, 2**32 - 1),
    "max_requests": (1, 10**7),
    "shared_prefix": (0, 10**7),
    "num_blocks": (1, 10**9),
}

#: why the default holds runs out (said with them)
HOLDOUT_WHY = (
    "the default with three or more runs: every second run by rate, so that the fit is checked on loads "
    "it did not see (--holdout none fits every run; --holdout RATES picks them)"
)


def _holdout_rates(text: str) -> list[float] | None:
    """``holdout``'s rates (req/s), or None for ``none``; a one-line error for anything else."""
    if text.strip().lower() == "none":
        return None
    rates = []
    for part in text.split(","):
        try:
            rate = float(part)
        except ValueError:
            raise CostModelError(
                f"--holdout must be 'none' or a comma list of rates (req/s), got {part[:40]!r}"
            ) from None
        if not (math.isfinite(rate) and rate > 0):
            raise CostModelError(
                f"--holdout: a rate must be a finite positive rate (req/s), got {part.strip()[:40]!r}"
            )
        rates.append(rate)
    return rates


@dataclass(frozen=True, slots=True)
class ServingFitRequest:
    """Every setting of one ``calibrate serving`` fit, checked when built (module doc). The fields
    are the command line's options, by the same names (``max_requests`` is ``--max-requests``).

    Parameters
    ----------
    results : tuple of str
        The measured runs' files: ``vllm bench serve`` JSON, GuideLLM report JSON or a per-request
        CSV (:func:`graphs.serving.planning.bench_results.read_results`); at least one.
    device : str
        Catalog device name or alias the runs were served on.
    out : str, optional
        The fit file to write (``-o``; None: the fit is not written).
    tp : int
        Tensor-parallel degree the runs were served with.
    predict : str, optional
        The corpus framework whose measured kernels price the replays (None: the roofline bound).
    fp8_scales : str, optional
        ``dynamic`` or ``static`` FP8 activation scales, with ``predict`` (None: dynamic).
    holdout : str, optional
        ``none``, or a comma list of the rates (req/s) held out (None: every second run by rate
        when there are three or more: :meth:`held_out`).
    terms : tuple of str
        The terms fitted, of :data:`graphs.serving.engines.knobs.TERMS`; the others keep the
        profile's values (zero for the bound).
    seed : int
        Seed of the arrivals redrawn for a ``vllm bench serve`` result (it records none).
    max_requests : int, optional
        Requests of each run replayed, its first by arrival (None:
        :data:`graphs.serving.planning.serving_fit.MAX_FIT_REQUESTS`).
    profile : EngineProfile, optional
        The serving engine replayed (None: ``predict``'s framework's, else vLLM's).
    enable_prefix_caching : bool
        Replay the runs with prefix caching.
    shared_prefix : int, optional
        Tokens every prompt of a run that names no prefix starts with (None: none).
    num_blocks : int, optional
        KV blocks the engine ran with (None: the profile's pool rule).
    engine_named : bool
        The caller named the engine (the command line's ``--engine``): the report's last line
        repeats it for the ``simulate`` that uses the fit.
    allow_long_context : bool
        Replay a request whose prompt + output exceed the model's context limit, with a warning
        (``--allow-long-context``; default: refused, naming the file and request).
    """

    results: tuple[str, ...]
    device: str
    out: str | None = None
    tp: int = 1
    predict: str | None = None
    fp8_scales: str | None = None
    holdout: str | None = None
    terms: tuple[str, ...] = FIT_DEFAULT_TERMS
    seed: int = 0
    max_requests: int | None = None
    profile: EngineProfile | None = None
    enable_prefix_caching: bool = False
    shared_prefix: int | None = None
    num_blocks: int | None = None
    engine_named: bool = False
    allow_long_context: bool = False

    def __post_init__(self) -> None:
        from costmodel.measured.corpus import FP8_SCALES, FRAMEWORKS  # stdlib only
        from costmodel.outfiles import check_output

        if not isinstance(self.results, tuple) or not self.results:
            raise CostModelError("calibrate serving needs at least one RESULT file (a tuple of paths)")
        for path in self.results:
            if not isinstance(path, str) or not path:
                raise CostModelError(f"a RESULT file must be a non-empty path, got {str(path)[:60]!r}")
        if self.out is not None:
            check_output(self.out, "-o")
        for name, (lo, hi) in RANGES.items():
            if getattr(self, name) is not None:
                check_number(name, getattr(self, name), lo, hi, whole=True)
        if self.predict is not None:
            check_choice("predict", self.predict, FRAMEWORKS)
        if self.fp8_scales is not None:
            check_choice("fp8_scales", self.fp8_scales, FP8_SCALES)
            if self.predict is None:
                raise CostModelError(
                    f"--fp8-scales {self.fp8_scales} prices measured FP8 kernels: add --predict FRAMEWORK "
                    "(the bound has none)"
                )
        if not isinstance(self.terms, tuple) or not self.terms:
            raise CostModelError(f"--terms must name at least one term of {', '.join(TERMS)}")
        if any(t == "" for t in self.terms):  # "" or "a,,b": a name left out, not the default terms
            raise CostModelError(
                f"--terms {','.join(map(str, self.terms))[:80]!r} has an empty term name; terms: {', '.join(TERMS)}"
            )
        bad = [t for t in self.terms if t not in TERMS]
        if bad:
            raise CostModelError(f"--terms: {str(bad[0])[:40]!r} is not a term; terms: {', '.join(TERMS)}")
        twice = next((t for t in self.terms if self.terms.count(t) > 1), None)
        if twice is not None:  # one column twice: the fit would hold one copy at its bound, said so
            raise CostModelError(
                f"--terms names {twice!r} {self.terms.count(twice)} times; give each term once"
            )
        if not isinstance(self.allow_long_context, bool):
            raise CostModelError(
                f"allow_long_context must be True or False, got {str(self.allow_long_context)[:40]!r}"
            )
        if self.holdout is not None:
            _holdout_rates(self.holdout)
        if self.profile is None:
            from ..engines import get_engine

            object.__setattr__(self, "profile", get_engine(self.predict or "vllm"))

    @property
    def engine(self) -> EngineProfile:
        """The engine profile (resolved when built: never None)."""
        assert self.profile is not None  # set by __post_init__
        return self.profile

    @property
    def scales(self) -> str:
        """The FP8 activation scale mode the kernels are priced with (``fp8_scales``, else dynamic)."""
        return self.fp8_scales or "dynamic"

    @property
    def cap(self) -> int:
        """Requests of each run replayed: ``max_requests``, else
        :data:`~graphs.serving.planning.serving_fit.MAX_FIT_REQUESTS`."""
        from .serving_fit import MAX_FIT_REQUESTS

        return MAX_FIT_REQUESTS if self.max_requests is None else self.max_requests

    def read_runs(self) -> list[BenchRun]:
        """Every run of every result file, in order, each cut to :attr:`cap` requests and given
        ``shared_prefix`` (:meth:`~graphs.serving.planning.bench_results.BenchRun.with_shared_prefix`).

        Returns
        -------
        list of BenchRun

        Raises
        ------
        CostModelError
            When a file is unreadable or not one of the formats, or two name one file or hold the
            same bytes (:func:`_check_distinct`).
        """
        from .bench_results import read_results

        _check_distinct(self.results)
        return [
            run.with_shared_prefix(self.shared_prefix or 0)
            for path in self.results
            for run in read_results(path, seed=self.seed, max_requests=self.cap)
        ]

    def held_out(self, runs: list[BenchRun]) -> tuple[list[int], str]:
        """The indices of ``runs`` held out, and why: ``holdout`` ``none``: none; a comma list of
        rates (req/s, matched to 0.1 %): the runs at them; not given: every second run by rate
        (the second, fourth ...) when there are three or more.

        Parameters
        ----------
        runs : list of BenchRun
            The runs read (:meth:`read_runs`).

        Returns
        -------
        tuple of (list of int, str)
            The indices held out, sorted, and why (empty: none held out by default).

        Raises
        ------
        CostModelError
            When a rate of ``holdout`` matches no run.
        """
        order = sorted(range(len(runs)), key=lambda i: (runs[i].rate is None, runs[i].rate or 0.0))
        if self.holdout is None:
            return (sorted(order[1::2]), HOLDOUT_WHY) if len(runs) >= 3 else ([], "")
        rates = _holdout_rates(self.holdout)
        if rates is None:
            return [], "--holdout none"
        out: list[int] = []
        for rate in rates:
            hit = [i for i in order if _at(runs[i].rate, rate)]
            if not hit:
                have = ", ".join(f"{r.rate:.4g}" for r in runs if r.rate is not None) or "none"
                raise CostModelError(f"--holdout: no run at {rate:g} req/s; the runs' rates: {have}")
            out += hit
        return sorted(set(out)), f"--holdout {self.holdout[:200]}"


def _identity(path: str) -> tuple[tuple[int, int], str] | None:
    """A regular file's ``((device, inode), sha256 of its bytes)``, None for anything else (a
    missing file, a FIFO, one past the readers' size bound: :func:`read_results` refuses those)."""
    from .bench_results import MAX_BYTES

    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_BYTES:
            return None
        digest = hashlib.sha256()
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
    except OSError:
        return None
    return (st.st_dev, st.st_ino), digest.hexdigest()


def _check_distinct(paths: tuple[str, ...]) -> None:
    """Refuse two RESULT files that are one file (the same path, a link to it) or hold the same
    bytes: a run given twice would be fitted twice, or one copy held out as a run the fit did not
    see."""
    files: dict[tuple[int, int], str] = {}
    digests: dict[str, str] = {}
    for path in paths:
        ident = _identity(path)
        if ident is None:
            continue
        node, digest = ident
        first = files.get(node) or digests.get(digest)
        if first is not None:
            how = "are one file" if node in files else f"hold the same bytes (sha256 {digest[:16]}...)"
            raise CostModelError(
                f"RESULT files {first[:200]!r} and {path[:200]!r} {how}: a run given twice is fitted twice "
                "(or one copy held out as a run the fit did not see); give each once"
            )
        files[node], digests[digest] = path, path


def _at(run_rate: Any, rate: float) -> bool:
    """A run at ``run_rate`` (req/s; None: all at once) is at ``rate`` (to 0.1 %)."""
    return run_rate is not None and math.isclose(run_rate, rate, rel_tol=1e-3)
