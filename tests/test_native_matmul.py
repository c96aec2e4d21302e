"""FP8/NVFP4 weights run W8A8/W4A4 where the tensor cores can, weight-only elsewhere, and the
output says which (issue 25, item 2).

The rule is vLLM's, as its FP8 page states it: "Ada Lovelace, Hopper, and Blackwell GPUs are
supported for W8A8. Turing/Ampere GPUs are supported for W8A16 (weight-only FP8) utilizing
Marlin kernels" (https://docs.vllm.ai/en/v0.32.0/features/quantization/llm_compressor/fp8/).
"""

from __future__ import annotations

import json

import pytest

from costmodel.errors import CostModelError
from costmodel.hardware import get_device
from graphs.cli import main
from graphs.serving.planning.search_plans import plans_of
from models import get_model
from models.quantization import native_matmul

CFG = get_model("llama-3.1-8b")


@pytest.mark.parametrize(
    ("weight", "device", "matmul", "says"),
    [
        ("fp8", "h100", "fp8_e4m3", "W8A8"),  # Hopper: FP8 tensor cores
        ("fp8", "l40s", "fp8_e4m3", "W8A8"),  # Ada Lovelace
        ("fp8", "b200", "fp8_e4m3", "W8A8"),  # Blackwell
        ("nvfp4", "b200", "nvfp4", "W4A4"),  # Blackwell's FP4 tensor cores
        ("fp8", "a100", None, "weight-only"),  # Ampere: W8A16 (FP8 Marlin)
        ("nvfp4", "h100", None, "weight-only"),  # Hopper has no FP4 roof
    ],
)
def test_native_matmul_by_device(weight, device, matmul, says):
    cfg, note = native_matmul(CFG.replace(dtype=weight), [get_device(device)])
    assert cfg.matmul_dtype == matmul
    assert says in note and get_device(device).name in note


def test_native_matmul_leaves_other_weights_and_explicit_matmuls_alone():
    for weight in ("bf16", "int4_g128", "int8"):
        cfg, note = native_matmul(CFG.replace(dtype=weight), [get_device("h100")])
        assert cfg.matmul_dtype is None and note is None
    explicit = CFG.replace(dtype="fp8", matmul_dtype="bf16")  # the user asked for weight-only
    assert native_matmul(explicit, [get_device("h100")]) == (explicit, None)


def test_native_matmul_refuses_devices_that_disagree():
    with pytest.raises(CostModelError, match=r"h100-sxm has it, a100-sxm-40gb lacks it.*--matmul-dtype"):
        native_matmul(CFG.replace(dtype="fp8"), [get_device("h100"), get_device("a100")])


def test_search_plans_pick_the_matmul_per_device():
    plans, _, _, notes = plans_of(CFG, ["h100", "a100"], ["fp8"], [None], [1], [1])
    by_device = {p.device.name: p.config.matmul_dtype for p in plans}
    assert by_device == {"h100-sxm": "fp8_e4m3", "a100-sxm-40gb": None}
    assert len(notes) == 2 and any("W8A8" in n for n in notes) and any("weight-only" in n for n in notes)


def test_decode_weight_dtype_fp8_is_w8a8_on_h100_and_says_so(capsys):
    args = ["decode", "llama-3.1-8b", "--device", "h100", "--batch", "256", "--ctx", "1024", "--json"]
    assert main([*args, "--weight-dtype", "fp8"]) == 0
    implied = capsys.readouterr()
    assert "matmuls in fp8_e4m3 (W8A8)" in implied.err
    # which FP8 kernels price it: per-tensor scales unless a config gives a block (models.quantization)
    assert "per-tensor scales: a block-scaled FP8 checkpoint" in implied.err
    assert main([*args, "--weight-dtype", "fp8", "--matmul-dtype", "fp8_e4m3"]) == 0
    # the same step as asking for W8A8; the implied run's JSON also keeps the note it said
    asked, inferred = json.loads(capsys.readouterr().out), json.loads(implied.out)
    said = [n for n in inferred.pop("notes", []) if n not in asked.pop("notes", [])]
    assert asked == inferred and len(said) == 1 and "matmuls in fp8_e4m3 (W8A8)" in said[0]
    assert main([*args, "--weight-dtype", "fp8", "--matmul-dtype", "bf16"]) == 0
    weight_only = capsys.readouterr()
    assert weight_only.err == "" and weight_only.out != implied.out
