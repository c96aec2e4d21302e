"""Defaults every command shares, each defined once (standard library only: the command line reads
them while it builds its parsers, so ``--help`` imports no engine).

:data:`DEFAULT_SEQ` is the prompt length of a prefill step that states none: ``prefill``,
``ledger --phase prefill`` (without ``--ctx``), ``model analyze --phase prefill``,
``fusion audit|plan --phase prefill``, ``plot --phase prefill`` and their requests
(:class:`~graphs.serving.analysis.phase_request.PhaseRequest`,
:class:`~graphs.serving.analysis.fusion_request.FusionStep`,
:class:`~graphs.serving.analysis.plot_request.PlotRequest`), and
:func:`graphs.serving.analysis.classify.analyze`. Each command's ``--seq`` help states it. The
commands once differed (``prefill`` 4096, ``model analyze`` 1024, ``fusion`` and ``plot`` 2048):
4096 is ``prefill``'s, the one every README and docs example of a prefill gives (``--seq 4096``).
Commands whose prompt is a workload's (``simulate``, ``size``: length distributions; ``search``:
each point's context; ``serve disagg``: a request of ``--prompt`` plus ``--output`` tokens) keep
their own.

>>> DEFAULT_SEQ
4096
"""

from __future__ import annotations

__all__ = ["DEFAULT_SEQ", "DEFAULT_SPEC_K_MAX"]

#: a prefill's prompt length (tokens, ``--seq``, the ``S`` of ``T = B*S``) when none is given
DEFAULT_SEQ = 4096

#: the longest draft ``serve specdec --k-max`` and :func:`~graphs.serving.analysis.specdec.speculative_decoding`
#: try (they once differed, 12 and 16: one question, best k 12 and 16, 8.87x and 10.33x)
DEFAULT_SPEC_K_MAX = 12
