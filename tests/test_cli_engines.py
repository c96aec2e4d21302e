"""``costmodel engines``: the registered profiles, one in full with each default's source, as the
engine picks it on a device (graphs/cli/engines.py)."""

from __future__ import annotations

import json

import pytest

from graphs.cli.main import main
from graphs.serving.engines import engine_names, get_engine


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    cap = capsys.readouterr()
    return code, cap.out, cap.err


def test_lists_every_profile_as_simulate_does(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(["engines"], capsys)
    assert code == 0 and all(f"  {ref}" in out for ref in engine_names())
    assert _run(["simulate", "--engine", "list"], capsys)[1] == out
    code, out, _ = _run(["engines", "--json"], capsys)
    assert code == 0 and [p["engine"] for p in json.loads(out)] == list(engine_names())


def test_one_profile_with_every_source(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(["engines", "trtllm"], capsys)
    assert code == 0 and out.startswith("engine trtllm@1.0: TensorRT-LLM trtllm-serve")
    prof = get_engine("trtllm")
    for key, src in prof.sources.items():  # every sourced default on a line of its own, with its source
        assert any(line.split()[:1] == [key] and line.rstrip().endswith(src) for line in out.splitlines()), (
            key
        )
    # trtllm pads no decode batch (DecodeCudaGraphConfig.enable_padding False); 2048 sequences
    assert "cudagraph_sizes" in out and " none " in out and " 2048 " in out


def test_the_defaults_an_engine_picks_on_a_device(capsys: pytest.CaptureFixture[str]) -> None:
    # vLLM 0.11's EngineArgs._set_default_args: an A100 (a name check) takes 2048 tokens and 256 sequences
    code, out, _ = _run(["engines", "vllm@0.11", "--device", "a100-sxm-80gb"], capsys)
    assert code == 0
    assert "picked for a100-sxm-80gb: max_num_batched_tokens 8192 -> 2048, max_num_seqs 1024 -> 256" in out
    # an H200 (141 GB >= 70 GiB) takes the profile's own values: 8192 and 1024
    code, out, _ = _run(["engines", "vllm@0.11", "--device", "h200", "--json"], capsys)
    doc = json.loads(out)
    assert code == 0 and doc["device"] == "h200-sxm"
    assert (doc["settings"]["max_num_batched_tokens"], doc["settings"]["max_num_seqs"]) == (8192, 1024)
    # capture sizes up to M = min(2 x 1024, 512, 8192) = 512
    assert "cudagraph_sizes" in _run(["engines", "vllm@0.11"], capsys)[1]


def test_the_list_on_a_device_shows_what_each_engine_picks_there(capsys: pytest.CaptureFixture[str]) -> None:
    """``engines --device l40s`` listed every profile's own defaults (vllm@0.11: 8192 tokens)
    while ``engines vllm@0.11 --device l40s`` and ``simulate`` used 2048 (vLLM 0.11's
    _set_default_args: below 70 GiB, 2048 tokens and 256 sequences); the list shows the same."""
    code, out, _ = _run(["engines", "--device", "l40s"], capsys)
    assert code == 0 and "as each picks them on l40s" in out
    lines = out.splitlines()
    i = next(i for i, ln in enumerate(lines) if ln.startswith("  vllm@0.11"))
    assert "max_num_batched_tokens 2048, max_num_seqs 256" in lines[i + 1]
    code, out, _ = _run(["engines", "--device", "l40s", "--json"], capsys)
    doc = {p["engine"]: p for p in json.loads(out)}
    assert doc["vllm@0.11"]["device"] == "l40s"
    assert doc["vllm@0.11"]["settings"]["max_num_batched_tokens"] == 2048


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["engines", "tgi"], "no engine profile 'tgi'; known: "),
        (["engines", "vllm@9"], "no engine profile 'vllm@9'; vllm has: "),
        (["engines", "vllm", "--device", "nope"], "unknown device 'nope'"),
        (["engines", "--device", "nope"], "unknown device 'nope'"),  # listing: was accepted (exit 0)
    ],
)
def test_refusals_are_one_line(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(argv, capsys)
    assert code == 2 and not out and message in err and err.count("\n") == 1


def test_versions_list_in_numeric_order():
    """Versions sort by their dotted numbers (0.6 < 0.11 < 1), not as text ('0.11' < '0.6')."""
    from graphs.serving.engines import engine_names

    vllm = [n for n in engine_names() if n.startswith("vllm@")]
    assert vllm.index("vllm@0.6") < vllm.index("vllm@0.11") < vllm.index("vllm@1")


def test_a_profile_names_its_release_series_and_its_cuda_graph_memory(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # vllm@0.20 describes 0.14-0.20 (async scheduling by default from v0.14.0, the CUDA-graph
    # estimate from v0.21.0): its series printed with their source, no CUDA-graph row
    assert main(["engines", "vllm@0.20"]) == 0
    out = capsys.readouterr().out
    assert "describes releases 0.14.x, 0.15.x, 0.16.x, 0.17.x, 0.18.x, 0.19.x, 0.20.x (vllm v0.14.0" in out
    assert "cudagraph_memory" not in out
    # vllm@1 (>= 0.21.0) takes the estimate out of the pool: a row with its source
    assert main(["engines", "vllm"]) == 0
    out = capsys.readouterr().out
    assert "describes releases" not in out
    assert any(line.split()[:1] == ["cudagraph_memory"] and "MiB/layer" in line for line in out.splitlines())
    assert main(["engines", "vllm@0.20", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["releases"] == [
        "0.14",
        "0.15",
        "0.16",
        "0.17",
        "0.18",
        "0.19",
        "0.20",
    ]
