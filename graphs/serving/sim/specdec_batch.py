"""Where speculative decoding stops paying: speculation's speed-up by batch, each batch a served
closed loop simulated with and without it (:func:`graphs.serving.sim.simulator.simulate` with a
:class:`~graphs.serving.sim.specdec_sim.SpecConfig`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from costmodel.errors import CostModelError
from costmodel.results import Result

from ..engines import EngineConfig
from .requests import Request
from .simulator import Topology, simulate
from .specdec_sim import SpecConfig

__all__ = ["BatchRow", "speedup_by_batch"]


@dataclass(frozen=True)
class BatchRow(Result):
    """One batch: plain and speculative TPOT (s) and output tokens/s, and speculation's counters.

    Attributes
    ----------
    batch : int
        Concurrent clients ``B``.
    plain_tpot_s, spec_tpot_s : float
        Mean TPOT without and with speculation (s).
    plain_tokens_per_s, spec_tokens_per_s : float
        Output tokens per second without and with speculation.
    speedup : float
        ``plain_tpot_s / spec_tpot_s``: > 1 while speculation pays.
    tokens_per_verification : float
        Tokens emitted per verifying sequence and iteration.
    draft_share : float
        The proposer's share of the speculating run's iteration seconds.
    """

    batch: int
    plain_tpot_s: float
    spec_tpot_s: float
    plain_tokens_per_s: float
    spec_tokens_per_s: float
    speedup: float  #: plain_tpot_s / spec_tpot_s: > 1 while speculation pays
    tokens_per_verification: float
    draft_share: float


def speedup_by_batch(
    target: Any,
    device: Any,
    spec: SpecConfig,
    batches: Sequence[int],
    *,
    tp: int = 1,
    prompt: int = 1024,
    output: int = 256,
    waves: int = 3,
) -> tuple[BatchRow, ...]:
    """Speculation's speed-up at each batch ``B``: a closed loop of ``B`` clients sending
    ``waves x B`` requests of ``prompt`` and ``output`` tokens back to back, served with and
    without ``spec``; the speed-up is the ratio of mean TPOTs (each client's decode speed;
    prefill iterations of other requests included, as a loaded server runs them).

    Where it stops paying, per token at large ``B`` (:mod:`graphs.serving.sim.specdec_sim`): the token-wise kernels turn
    compute-bound, ``C`` per token, while attention reads each sequence's cache once, ``A`` per
    sequence; plain decoding costs ``C + A`` per token and speculation ``((k + 1) C + A) / E``,
    so it pays at large batch only while ``A / C > (k + 1 - E) / (E - 1)``: short contexts and
    low acceptance lose first.

    Parameters
    ----------
    target : ModelConfig, str or Workload
        The target model.
    device : Hardware or str
        The device.
    spec : SpecConfig
        The drafter, ``k`` and the acceptance per position.
    batches : sequence of int
        Concurrent clients ``B`` to try.
    tp : int
        Tensor-parallel degree.
    prompt, output : int
        Tokens per request.
    waves : int
        Requests per client.

    Returns
    -------
    tuple of BatchRow
        Per batch: mean TPOT with and without speculation (s) and their ratio.

    Raises
    ------
    CostModelError
        When ``spec`` is not a :class:`SpecConfig`.
    """
    if not isinstance(spec, SpecConfig):  # None reached an AssertionError after a whole simulation
        raise CostModelError(
            f"spec must be a SpecConfig (the draft, its device, k and acceptance), got "
            f"{type(spec).__name__} {spec!r:.40}"
        )
    topo = Topology(tp=tp)
    rows = []
    for b in batches:
        reqs = [Request(i, 0.0, prompt, output) for i in range(waves * b)]
        kw: dict[str, Any] = {
            "topology": topo,
            "concurrency": b,
            "engine": EngineConfig(max_num_seqs=max(b, 1)),
        }
        plain = simulate(target, device, reqs, **kw)
        sp = simulate(target, device, reqs, spec=spec, **kw)
        assert sp.spec is not None
        rows.append(
            BatchRow(
                b,
                plain.tpot.mean,
                sp.tpot.mean,
                plain.output_tokens_per_s,
                sp.output_tokens_per_s,
                plain.tpot.mean / sp.tpot.mean,
                sp.spec.tokens_per_verification,
                sp.spec.draft_share,
            )
        )
    return tuple(rows)
