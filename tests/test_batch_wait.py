"""TensorRT-LLM's batch waiting (``EngineConfig.batch_wait_timeout_iters`` /
``batch_wait_max_tokens_ratio``, :mod:`graphs.serving.sim.engine`'s module doc).

The rule pinned here is TensorRT-LLM's ``PyExecutor._waiting_requests`` (``tensorrt_llm/_torch/
pyexecutor/py_executor.py``): when an iteration has generation requests and context requests,
the context requests wait unless ``waited >= batch_wait_timeout_iters`` or the iteration's tokens
reach ``batch_wait_max_tokens_ratio * max_num_tokens``; either knob at 0 disables waiting.
"""

from __future__ import annotations

import json

import pytest

from costmodel.errors import CostModelError
from graphs.serving.sim.engine import EngineConfig
from graphs.serving.sim.requests import Request
from graphs.serving.sim.simulator import simulate

M, D = "llama-3.1-8b", "h100"
#: one request decoding alone, a second arriving while it decodes
REQS = [Request(0, 0.0, 512, 400), Request(1, 0.5, 256, 8)]


def _run(**knobs):
    eng = EngineConfig(enable_chunked_prefill=False, **knobs)
    return simulate(M, D, REQS, engine=eng).per_request


def test_a_new_prompt_waits_the_timeout_in_decode_steps():
    """Below the token threshold the second prompt is held ``w`` iterations, each a decode step of
    the first request alone: its TTFT grows by ``w`` such steps (the first request's TPOT)."""
    base = _run()
    w = 20
    held = _run(batch_wait_timeout_iters=w, batch_wait_max_tokens_ratio=0.9)
    step = base["tpot_s"][0]  # request 0 decodes alone but for one mixed iteration among 399
    assert held["ttft_s"][1] - base["ttft_s"][1] == pytest.approx(w * step, rel=0.02)
    assert held["ttft_s"][0] == base["ttft_s"][0]  # no generation request yet: nothing waits


def test_no_wait_at_the_threshold_or_with_a_knob_at_zero():
    base = _run()
    # 0.02 x 8192 = 163.8 tokens: the 256-token prompt plus one decode reaches it at once
    assert list(_run(batch_wait_timeout_iters=20, batch_wait_max_tokens_ratio=0.02)["ttft_s"]) == list(
        base["ttft_s"]
    )
    # the engine's test is waited >= timeout or tokens >= ratio x budget: a 0 knob always stops
    for knobs in ({"batch_wait_timeout_iters": 20}, {"batch_wait_max_tokens_ratio": 0.9}):
        assert list(_run(**knobs)["ttft_s"]) == list(base["ttft_s"])


def test_bad_knobs_are_refused():
    with pytest.raises(CostModelError, match="batch_wait_timeout_iters must be a whole number in"):
        EngineConfig(batch_wait_timeout_iters=-1)
    with pytest.raises(CostModelError, match=r"batch_wait_max_tokens_ratio must be in \[0, 1\], got 1.5"):
        EngineConfig(batch_wait_max_tokens_ratio=1.5)


def test_simulate_takes_the_knobs_from_the_command_line(capsys):
    from graphs.cli import main

    common = [
        "simulate",
        M,
        "--device",
        D,
        "--requests",
        "40",
        "--rate",
        "2",
        "--no-chunked-prefill",
        "--json",
    ]
    assert main(common) == 0
    base = json.loads(capsys.readouterr().out)
    assert main([*common, "--batch-wait-iters", "20", "--batch-wait-ratio", "0.9"]) == 0
    held = json.loads(capsys.readouterr().out)
    assert held["ttft"]["mean_s"] > base["ttft"]["mean_s"]
    assert main(["simulate", M, "--device", D, "--batch-wait-ratio", "1.5"]) != 0
    assert "--batch-wait-ratio must be in [0, 1], got 1.5" in capsys.readouterr().err
