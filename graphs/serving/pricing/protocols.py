"""What every priced step offers: one protocol per level, so that the simulator, search, sizing
and the speculator price any step type alike, with no ``type: ignore``.

Two levels of step exist, and each has one protocol:

* :class:`IterationStep`: the seconds of one scheduler iteration of a mixed batch (``n``
  decodes with their summed KV length, and prefill chunks). The roofline's
  :class:`graphs.serving.step.mixed.MixedStep` and the predictor's
  :class:`graphs.serving.pricing.predictor.PredictedStep` (each kernel at ``max(prediction, bound)``)
  satisfy it; the replica's scheduler and the speculator take either.
* :class:`PointStep`: the seconds of a uniform decode or prefill step at a point ``(B, ctx)``
  or ``(B, S)``, scalar or vectorised over arrays. The compiled bound
  :class:`graphs.serving.step.compiled.CompiledStep` and the predictor's
  :class:`graphs.serving.pricing.priced.PricedStep` satisfy it; phases, sweeps, search and sizing take
  either.

A predicted step also says what its seconds rest on (measured kernels, neighbours, the bound
alone): it satisfies :class:`MeteredIterationStep` or :class:`MeteredPointStep`. The bound
meters nothing (every second it gives is the bound), so a caller asks
``isinstance(step, MeteredIterationStep)`` (or ``MeteredPointStep``) before reading coverage.

>>> from graphs.serving.step.mixed import mixed_step
>>> from graphs.serving.step.compiled import compiled_step
>>> bound = mixed_step("tiny", "h100")
>>> isinstance(bound, IterationStep), isinstance(bound, MeteredIterationStep)
(True, False)
>>> isinstance(compiled_step("tiny", "h100", "decode"), PointStep)
True
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    import numpy as np

    from .kernel_sources import Coverage

__all__ = ["IterationStep", "MeteredIterationStep", "MeteredPointStep", "PointStep"]


@runtime_checkable
class IterationStep(Protocol):
    """The seconds of one iteration of a mixed batch (module doc)."""

    @property
    def windowed(self) -> bool:
        """Whether a sliding-window kernel needs each decode's context, not only their sum."""
        ...

    def time_sums(
        self,
        n_dec: int,
        sum_ctx: float,
        chunks: Sequence[tuple[float, float]] = (),
        ctxs: Sequence[float] | None = None,
        logit_rows: int = 0,
    ) -> float:
        """Seconds of an iteration of ``n_dec`` decodes whose KV lengths sum to ``sum_ctx``,
        plus prefill ``chunks`` ``(new tokens, cached prefix)``.

        Parameters
        ----------
        n_dec : int
            Decoding sequences in the batch.
        sum_ctx : float
            The sum of their KV lengths (tokens, the new one included).
        chunks : sequence of (float, float)
            Prefill chunks: new tokens and the cached prefix before them.
        ctxs : sequence of float or None
            Each decode's KV length; needed only when :attr:`windowed`.
        logit_rows : int
            lm_head rows beyond one per sequence (speculative verification).

        Returns
        -------
        float
            Seconds (never below the iteration's roofline bound).
        """
        ...

    def time(
        self,
        decode_ctx: Sequence[int] | np.ndarray = (),
        chunks: Sequence[tuple[int, int]] = (),
    ) -> float:
        """:meth:`time_sums` from each decode's KV length ``decode_ctx`` (s).

        Parameters
        ----------
        decode_ctx : sequence of int or numpy.ndarray
            Each decode's KV length (tokens, the new one included).
        chunks : sequence of (int, int)
            Prefill chunks as ``(new tokens, cached prefix tokens)``.

        Returns
        -------
        float
            Seconds for the iteration.
        """
        ...

    def max_tokens_per_s(self, budget: int, overhead_s: float = 0.0) -> float:
        """Tokens per second one replica never exceeds at ``budget`` tokens per iteration.

        Parameters
        ----------
        budget : int
            Tokens per iteration at most (``max_num_batched_tokens``).
        overhead_s : float
            Fixed seconds added to every iteration (CPU).

        Returns
        -------
        float
            Tokens per second.
        """
        ...


@runtime_checkable
class MeteredIterationStep(IterationStep, Protocol):
    """An :class:`IterationStep` that counts what its seconds rest on since :meth:`reset`."""

    def reset(self) -> None:
        """Start counting afresh (one simulation)."""
        ...

    def coverage(self) -> Coverage:
        """The seconds priced since :meth:`reset`, by what they rest on.

        Returns
        -------
        Coverage
            Seconds (s) resting on measured, neighbour and bound pricing.
        """
        ...

    @property
    def clamped_s(self) -> float:
        """Seconds since :meth:`reset` where a prediction fell below its bound (clamped)."""
        ...


@runtime_checkable
class PointStep(Protocol):
    """The seconds of a uniform step at a point, scalar or vectorised (module doc)."""

    def step(self, *values: float) -> float:
        """Seconds at one point (the step's symbols' values, in its order).

        Parameters
        ----------
        *values : float
            The step's dims, in its order (decode: ``B``, ``ctx``).

        Returns
        -------
        float
            Seconds.
        """
        ...

    def step_array(self, *arrays: Any) -> np.ndarray:
        """Seconds over arrays of points (broadcast), vectorised.

        Parameters
        ----------
        *arrays : numpy.ndarray
            The step's dims as arrays (broadcast together).

        Returns
        -------
        numpy.ndarray
            Seconds per point.
        """
        ...

    def memo(self, key: str, build: Callable[[], Any]) -> Any:
        """A quantity derived from the step's forms, built once per step and key.

        Parameters
        ----------
        key : str
            The quantity's name.
        build : callable
            ``build()`` makes it (called once per step and key).

        Returns
        -------
        object
            What ``build`` returned, cached.
        """
        ...


@runtime_checkable
class MeteredPointStep(PointStep, Protocol):
    """A :class:`PointStep` that says what its seconds rest on."""

    def coverage_array(self, *arrays: Any) -> Coverage:
        """The seconds summed over the points of ``arrays``, by what they rest on.

        Parameters
        ----------
        *arrays : numpy.ndarray
            The points' dims as arrays (broadcast).

        Returns
        -------
        Coverage
            Seconds summed over the points, by source.
        """
        ...
