"""The ``decode``/``prefill`` request (graphs/serving/analysis/phase_request.py): built and refused
without argparse, the same words as the command line."""

from __future__ import annotations

from typing import Any

import pytest

from costmodel.errors import CostModelError
from graphs.cli import build_parser, main
from graphs.cli import options as cli_options
from graphs.cli import phases as cli_phases
from graphs.serving.analysis.phase_request import INT_RANGES, PhaseRequest

REFUSALS: list[tuple[dict[str, Any], str]] = [
    ({"phase": "train"}, "phase (--phase) must be one of decode, prefill, got 'train'"),
    ({"phase": "decode", "batch": 0}, "batch (--batch) must be in [1, 10000000], got 0"),
    ({"phase": "decode", "ctx": 2.5}, "ctx (--ctx) must be a whole number, got 2.5"),
    (
        {"phase": "decode", "placement": "random"},
        "placement (--placement) must be one of contiguous, balanced, got 'random'",
    ),
    (
        {"phase": "decode", "predict": "tgi"},
        "predict (--predict) must be one of vllm, sglang, trtllm, got 'tgi'",
    ),
    (
        {"phase": "decode", "fp8_scales": "static"},
        "--fp8-scales static prices measured FP8 kernels: add --predict FRAMEWORK (the bound has none)",
    ),
    ({"phase": "decode", "chunk": 512}, "--chunk 512 splits a prefill's prompt; a decode step has none"),
    (
        {"phase": "prefill", "chunk": 512, "predict": "vllm"},
        "--chunk 512 with --predict: the calibrated prediction prices whole-prompt prefill only",
    ),
    # 10^8 tokens in chunks of 1 make 10^8 chunks, more than the step sums
    ({"phase": "prefill", "seq": 10**8, "chunk": 1}, "100000000 tokens in chunks of 1 make 100000000 chunks"),
    ({"phase": "decode", "routing": "pareto"}, "--routing must be uniform, zipf:S or hist:C1,C2,..."),
    (
        {"phase": "decode", "replicate_hot": -1},
        "replicate_hot (--replicate-hot) must be in [0, 4096], got -1",
    ),
]


@pytest.mark.parametrize(("settings", "message"), REFUSALS, ids=[m[:40] for _, m in REFUSALS])
def test_each_refusal_without_argparse(settings: dict[str, Any], message: str) -> None:
    with pytest.raises(CostModelError) as exc:
        PhaseRequest(**settings)
    assert message in str(exc.value) and "\n" not in str(exc.value)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["prefill", "tiny", "--seq", "100000000", "--chunk", "1", "--allow-long-context"], REFUSALS[8][1]),
        (["decode", "tiny", "--routing", "pareto"], REFUSALS[9][1]),
        (["prefill", "tiny", "--chunk", "512", "--predict", "vllm"], REFUSALS[7][1]),
        (["decode", "tiny", "--fp8-scales", "static"], REFUSALS[5][1]),
    ],
)
def test_the_command_refuses_with_the_same_line(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("costmodel: error: ")]
    assert len(errors) == 1 and message in errors[0]  # (a long context's warning may come before it)


def test_the_ranges_are_the_command_lines_and_the_command_builds_the_request() -> None:
    assert {k: cli_options.INT_RANGES[k] for k in INT_RANGES} == INT_RANGES
    args = build_parser().parse_args(["prefill", "tiny", "--seq", "2048", "--chunk", "512", "--tp", "2"])
    req = cli_phases.request_of(args, "prefill")
    assert req == PhaseRequest("prefill", seq=2048, chunk=512, tp=2)
    assert req.tokens == 2048 and not req.routed and req.plan() == {}  # the default step: a cached card's
    routed = PhaseRequest("decode", ctx=1024, ep=4, routing="zipf:1")
    assert routed.tokens == 1024 and routed.routed
    plan = routed.plan()
    assert plan["ep"] == 4 and plan["routing"].kind == "zipf" and plan["routing"].exponent == 1.0
