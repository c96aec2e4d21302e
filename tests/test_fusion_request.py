"""The ``fusion audit`` and ``fusion plan`` requests (graphs/serving/analysis/fusion_request.py):
built and refused without argparse, in the command line's words; the library's reports
(graphs/serving/present/fusion_report.py) print what the command prints."""

from __future__ import annotations

import contextlib
import io
import json
from typing import Any

import pytest

from costmodel.errors import CostModelError
from graphs.cli import main
from graphs.cli import options as cli_options
from graphs.serving.analysis.fusion_request import AuditRequest, FusionStep, PlanRequest
from graphs.serving.present.fusion_report import run_audit, run_plan
from models import get_model

REFUSALS: list[tuple[type, dict[str, Any], str]] = [
    (AuditRequest, {"phase": "train"}, "phase (--phase) must be one of decode, prefill, got 'train'"),
    (AuditRequest, {"batch": 0}, "batch (--batch) must be in [1, 10000000], got 0"),
    (AuditRequest, {"ctx": 2.5}, "ctx (--ctx) must be a whole number, got 2.5"),
    (AuditRequest, {"plan": "greedy"}, "plan (--plan) must be one of suggested, unfused, got 'greedy'"),
    (AuditRequest, {"top": -1}, "top (--top) must be in [0, 1000000], got -1"),
    (PlanRequest, {"seq": 10**9}, "seq (--seq) must be in [1, 100000000], got 1000000000"),
    (
        PlanRequest,
        {"backend": "xla"},
        "backend (--backend) must be one of default, inductor, cublaslt, got 'xla'",
    ),
    (
        PlanRequest,
        {"objective": "energy"},
        "objective (--objective) must be one of time, bytes, got 'energy'",
    ),
    (PlanRequest, {"method": "ilp"}, "method (--method) must be one of auto, exact, heuristic, got 'ilp'"),
    (PlanRequest, {"time_limit": 0.0}, "time_limit (--time-limit) must be in (0, inf], got 0"),
    (PlanRequest, {"time_limit": float("nan")}, "time_limit (--time-limit) must be a finite number, got nan"),
    (
        PlanRequest,
        {"hf_layer": True, "whole_model": True},
        "--hf-layer exports one decoder layer: drop --whole-model",
    ),
]


@pytest.mark.parametrize(("kind", "settings", "message"), REFUSALS, ids=[m[:40] for *_, m in REFUSALS])
def test_each_refusal_without_argparse(kind: type, settings: dict[str, Any], message: str) -> None:
    with pytest.raises(CostModelError) as exc:
        kind(**settings)
    assert str(exc.value) == message


def test_the_ranges_are_the_command_lines() -> None:
    """The step's ranges are the parser's for the same options (the parser refuses first)."""
    from graphs.serving.analysis.phase_request import INT_RANGES

    assert all(INT_RANGES[k] == cli_options.INT_RANGES[k] for k in ("batch", "seq", "ctx"))


def test_the_step_and_its_words() -> None:
    assert FusionStep(phase="prefill", batch=2, seq=512).where == "batch 2, seq 512"
    assert FusionStep(batch=4, ctx=1024).where == "batch 4, ctx 1024"
    assert AuditRequest(whole_model=True).scope == "model"
    assert PlanRequest(hf_layer=True).scope == "Hugging Face layer (ATen, meta device)"


def _cli(*argv: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(list(argv)) == 0
    return out.getvalue()


def test_the_audit_is_the_commands() -> None:
    """The library's report prints, line for line, what ``fusion audit`` prints; its JSON is the
    command's."""
    report = run_audit(AuditRequest(phase="prefill", seq=256, plan="unfused", top=3), get_model("tiny"))
    argv = [
        "fusion",
        "audit",
        "tiny",
        "--phase",
        "prefill",
        "--seq",
        "256",
        "--plan",
        "unfused",
        "--top",
        "3",
    ]
    assert _cli(*argv) == report.to_text() + "\n"
    doc = json.loads(_cli(*argv, "--json"))
    assert doc["unfused"] == json.loads(json.dumps(report.to_dict()["unfused"]))
    # one kernel per op: the plan audited is the unfused one, so they move the same bytes
    assert report.report.plan is None or report.report.plan.dram_bytes == report.report.unfused.dram_bytes


def test_the_plan_is_the_commands() -> None:
    report = run_plan(PlanRequest(method="heuristic", objective="bytes"), get_model("tiny"))
    text = _cli("fusion", "plan", "tiny", "--method", "heuristic", "--objective", "bytes")
    # the solve's seconds differ run to run: every other line is the same
    strip = [ln for ln in report.to_text().splitlines() if " s)" not in ln]
    assert [ln for ln in text.splitlines() if " s)" not in ln] == strip
    # the planner never moves more bytes than one kernel per op (fusing never adds DRAM traffic)
    unfused = run_audit(AuditRequest(plan="unfused"), get_model("tiny")).report.unfused.dram_bytes
    assert report.result.bytes <= unfused


def test_a_plan_needs_its_model() -> None:
    with pytest.raises(CostModelError, match=r"give its config\.json"):
        run_plan(PlanRequest(hf_layer=True), get_model("tiny"))


_AUDIT_JSON = """
from graphs.cli.common import dump
from graphs.serving.analysis.fusion_request import AuditRequest
from graphs.serving.present.fusion_report import run_audit
from models import get_model

req = AuditRequest(device="h100", phase="decode", batch=8, ctx=1024)
print(dump(run_audit(req, get_model("llama-3.1-8b")).to_dict()))
"""


def test_the_audits_suggestions_do_not_depend_on_the_hash_seed() -> None:
    """``fusion audit --json`` under two string hash seeds, each in its own process: the same
    document (seed 1 put the q projection's epilogue before the o projection's, seed 2 after, when
    the candidates came from a set), best first by time saved, then bytes saved, then name."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = str(Path(__file__).resolve().parents[1])
    path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH", "")) if p)
    docs = [
        subprocess.run(
            [sys.executable, "-c", _AUDIT_JSON],
            env={**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": path},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for seed in ("1", "2")
    ]
    assert docs[0] == docs[1]
    sugg = [(s["members"], s["bytes_saved"]) for s in json.loads(docs[0])["suggestions"]]
    # decode at batch 8, bf16 (2 B): an epilogue saves its [8, width] intermediate written and read
    # once: q and o projections 8 * 4096 * 2 * 2 = 131,072 B, k and v 8 * 1024 * 2 * 2 = 32,768 B;
    # gate*up saves x read once (8 * 4096 * 2 = 65,536) and the two [8, 14336] products written
    # and read (2 * 8 * 14336 * 2 * 2 = 917,504): 983,040 B
    assert sugg == [
        (["layer.mlp.gate_proj", "layer.mlp.up_proj", "layer.mlp.act"], 983_040),
        (["layer.mlp.down_proj", "layer.mlp_residual"], 131_072),  # equal savings: by name, down <
        (["layer.o_proj", "layer.attn_residual"], 131_072),  # o <
        (["layer.q_proj", "layer.rope_q"], 131_072),  # q
        (["layer.k_proj", "layer.rope_k"], 32_768),  # k <
        (["layer.v_proj", "layer.v_cache_write"], 32_768),  # v
    ]


def test_hf_layer_refuses_a_layer_file_first_and_alone(capsys: pytest.CaptureFixture[str]) -> None:
    """``fusion plan --hf-layer`` on a layer file: the refusal is the one line said (moved from
    test_hf_layer, which needs torch; the refusal does not). The example states no dtype (its JSON
    has no ``dtype`` key), which once drew a bf16 note before the error."""
    from pathlib import Path

    path = Path(__file__).resolve().parent.parent / "examples" / "hybrid-layers.json"
    assert "dtype" not in json.loads(path.read_text())  # what would draw the note
    assert main(["fusion", "plan", str(path), "--hf-layer"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.splitlines() == [
        f"costmodel: error: --hf-layer builds a layer from a Hugging Face config.json (its model_type); {path} "
        "is a layer file (layer_types, no model_type): drop --hf-layer to plan its layers"
    ]


@pytest.mark.parametrize(
    ("plan", "heading"),
    [
        ("suggested", "fusion audit of the suggested plan: tiny decode layer on h100-sxm, batch 1, ctx 4096"),
        (
            "unfused",
            "fusion audit of the unfused plan (one kernel per op): tiny decode layer on h100-sxm, batch 1, ctx 4096",
        ),
    ],
)
def test_the_audit_heading_names_the_plan_audited(plan: str, heading: str) -> None:
    """The heading says which plan the boundaries and the bound are of (``--plan``; the default,
    ``suggested``, included), at the command's defaults (device h100-sxm, decode, batch 1, ctx 4096
    in graphs/cli/fusion.py)."""
    argv = ["fusion", "audit", "tiny", "--top", "1"]
    assert _cli(*argv, *(["--plan", plan] if plan != "suggested" else [])).splitlines()[0] == heading
