"""Result files that contradict themselves or the format are refused with one line naming the
field, the value and what is allowed (a review of ``calibrate serving`` and ``simulate
--workload-from`` inputs: each test one of its reproducers, pinned to the input itself or to a
hand computation given with it)."""

from __future__ import annotations

import json

import pytest

from costmodel.errors import CostModelError
from graphs.serving.planning.bench_results import read_results


def _vllm(n: int = 4, rate: object = 4.0, **extra: object) -> dict:
    """A ``vllm bench serve --save-detailed`` result of ``n`` requests: 100-token prompts, 3-token
    outputs, TTFT 20 ms and two 10 ms gaps (E2E 40 ms each)."""
    doc: dict = {
        "request_rate": rate,
        "burstiness": 1.0,
        "max_concurrency": None,
        "duration": 2.0,
        "completed": n,
        "input_lens": [100] * n,
        "output_lens": [3] * n,
        "ttfts": [0.02] * n,
        "itls": [[0.01, 0.01] for _ in range(n)],
        "errors": [""] * n,
    }
    doc.update(extra)
    return doc


def _write(tmp_path, doc: object, name: str = "r.json") -> str:
    path = tmp_path / name
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return str(path)


def test_a_vllm_result_of_no_requests_at_a_finite_rate_says_so(tmp_path):
    # H1: no request to draw arrivals for: said as at rate inf, never an IndexError
    doc = _vllm(0)
    for rate in (4.0, "inf"):
        with pytest.raises(CostModelError, match=r"r\.json: no successful request"):
            read_results(_write(tmp_path, {**doc, "request_rate": rate}))
