"""A ``--predict-file`` fit and the predictor settings beside it, reconciled (issue 43 item 3).

A ``calibrate serving`` fit file (:func:`graphs.serving.planning.serving_fit.read_fit`) was fitted
with kernels priced one way: a corpus framework's measured kernels (or the roofline bound) and an
FP8 activation scale mode. Its kernel scale corrects kernels priced that way only, so the file sets
both, and a predictor or scale mode given beside it must agree. :func:`read_predict_file` takes
the values as typed arguments (the command line passes its ``--predict`` and ``--fp8-scales``) and
returns them resolved in a :class:`PredictFile`; a Python caller never builds an argparse namespace.
"""

from __future__ import annotations

from dataclasses import dataclass

from costmodel.errors import CostModelError

from .serving_fit import ServingFit, read_fit

__all__ = ["PredictFile", "read_predict_file"]


@dataclass(frozen=True, slots=True)
class PredictFile:
    """A fit file read, and the predictor it sets.

    Attributes
    ----------
    path : str
        The fit file, as given.
    fit : ServingFit
        The fit read from it.
    predict : str or None
        The corpus framework whose kernels the fit priced (None: the roofline bound).
    fp8_scales : str or None
        The FP8 activation scale mode those kernels were priced with (None with the bound, which
        prices no measured kernel).
    """

    path: str
    fit: ServingFit
    predict: str | None
    fp8_scales: str | None


def read_predict_file(path: str, *, predict: str | None = None, fp8_scales: str | None = None) -> PredictFile:
    """Read the fit file at ``path`` and reconcile it with a predictor given beside it.

    The fit's framework and scale mode are what its kernel scale corrects, so they become the
    predictor's; a ``predict`` or ``fp8_scales`` given that differs is refused (the file sets it).

    Parameters
    ----------
    path : str
        A ``calibrate serving`` fit file.
    predict : str, optional
        The framework given beside it (the command line's ``--predict``; None: not given).
    fp8_scales : str, optional
        The FP8 scale mode given beside it (``--fp8-scales``; None: not given).

    Returns
    -------
    PredictFile
        The fit, with the framework and scale mode it sets.

    Raises
    ------
    CostModelError
        When the file is not a fit (:func:`read_fit`), or ``predict`` or ``fp8_scales`` disagree
        with it.
    """
    fit = read_fit(path)
    if predict and predict != fit.predict:
        raise CostModelError(
            f"--predict {predict} but --predict-file {path[:200]!r} was fitted with "
            f"{fit.predict or 'the bound'}; drop --predict (the file sets it)"
        )
    if fp8_scales and fp8_scales != fit.fp8_scales:
        raise CostModelError(
            f"--fp8-scales {fp8_scales} but --predict-file {path[:200]!r} was fitted with {fit.fp8_scales} "
            "FP8 activation scales; drop --fp8-scales (the file sets it)"
        )
    return PredictFile(path, fit, fit.predict, fit.fp8_scales if fit.predict else None)
