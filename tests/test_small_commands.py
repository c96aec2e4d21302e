"""The small commands (report, op, rules, derive, hw, model, ledger, plot, engines, probe) held to
hand numbers and to their inputs: a review's findings, one test each."""

import json

import numpy as np
import pytest

from costmodel import op_cost
from graphs.cli import main


def run(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_op_elementwise_takes_its_input_count(capsys):
    """``costmodel op elementwise n=1000 inputs=2`` was refused ("inputs must be an integer >= 0,
    got 2"): the command hands the rule sympy's 2, which the rule's ``isinstance(inputs, int)``
    refused, so no ``inputs`` value worked from the command line. By hand (DESIGN.md: r inputs and
    one output over n bf16 elements): D = (r + 1) * 2 * n = 3 * 2 * 1000 = 6000 B, F = n = 1000."""
    code, out, err = run(capsys, "op", "elementwise", "n=1000", "inputs=2", "--json")
    assert code == 0, err
    cost = json.loads(out)["cost"]
    assert cost["bytes_read"]["dram"] + cost["bytes_written"]["dram"] == 6000
    assert cost["flops"]["vector:fp32"] == 1000
    # the library takes the same count as numpy's or a float's whole number
    assert op_cost("elementwise", n=1000, inputs=np.int64(2)).bytes == 6000
    assert op_cost("elementwise", n=1000, inputs=2.0).bytes == 6000
    assert op_cost("elementwise", n=1000, inputs=0).bytes == 2000  # a generator writes only
    code, _, err = run(capsys, "op", "elementwise", "n=1000", "inputs=-1")
    assert code == 2 and "inputs must be a whole number >= 0" in err and "got -1" in err


# Groq's datasheet figures (catalog.toml, groq-lpu): FP16 188 TFLOP/s, no BF16 rate, 80 TB/s SRAM
GROQ_RIDGE = 188e12 / 80e12  # 2.35 FLOP/B


def test_report_and_derive_take_the_bf16_roof_op_takes(capsys):
    """``report``, ``derive crossover`` and ``derive tile`` refused a device that publishes no
    bf16 rate ("device 'groq-lpu' has no dense tensor roof for precision 'bf16'") while ``op`` and
    the model commands bound its bf16 matmuls by its fp16 roof and say so (docs/contributing.md).
    Now the ridge is that roof's, said once: Groq's I* = 188e12 / 80e12 = 2.35 FLOP/B, and the
    4096-square crossover M* = 4096 I* / (4096 - 2 I*) (DESIGN.md's GEMM D with b = 2)."""
    code, out, err = run(capsys, "report", "--device", "groq-lpu", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data["ridge_flop_per_byte"] == pytest.approx(GROQ_RIDGE)
    assert data["dtype"] == "bf16"
    assert sum("no tensor bf16 rate" in n and "fp16 roof" in n for n in data["notes"]) == 1
    exact = 4096 * GROQ_RIDGE / (4096 - 2 * GROQ_RIDGE)
    assert float(data["gemm_crossover_4096"]["exact"]) == pytest.approx(exact)
    code, out, _ = run(capsys, "report", "--device", "groq-lpu")
    assert code == 0 and out.count("publishes no tensor bf16 rate") == 1
    assert "P_tensor,fp16 / beta_dram = 2.4 FLOP/B" in out  # the roof the ridge is, named
    code, out, _ = run(capsys, "derive", "crossover", "--device", "groq-lpu", "--json")
    assert code == 0
    data = json.loads(out)
    assert float(data["numeric"]["exact"]) == pytest.approx(exact)
    assert any("fp16 roof" in n for n in data["notes"])
    code, out, _ = run(capsys, "derive", "tile", "--device", "groq-lpu", "--json")
    assert code == 0
    data = json.loads(out)
    assert data["ridge"] == pytest.approx(GROQ_RIDGE)
    assert data["compute_bound"] is True  # a 128x128 bf16 tile: 64 FLOP/B > 2.35
    # the library's counterparts answer the same
    from costmodel import as_float, balance_point, get_device

    assert as_float(balance_point(get_device("groq-lpu"))) == pytest.approx(GROQ_RIDGE)


def test_report_says_what_the_device_assumes(capsys):
    """``report`` on a device with preliminary figures or no vector roof printed its table with
    nothing said, where ``op`` on the same device notes it: TPU v5p publishes no vector or SFU
    roof (catalog.toml: "that work is reported as unbounded"), so the layernorm row's vector
    FLOPs take no time; Rubin's figures are announced, not a datasheet's."""
    code, out, _ = run(capsys, "report", "--device", "tpu-v5p")
    assert code == 0
    assert out.count("tpu-v5p publishes no vector roof") == 1
    code, out, _ = run(capsys, "report", "--device", "vr200", "--dtype", "fp8")
    assert code == 0 and out.count("vr200 figures are preliminary") == 1
    code, out, _ = run(capsys, "report")  # H100 publishes every roof it uses: nothing to say
    assert "note:" not in out


def test_report_takes_an_fp8_format_name(capsys):
    """``report --dtype fp8_e4m3`` was refused ("no dense tensor roof for precision 'fp8_e4m3'")
    where ``derive crossover --dtype fp8_e4m3`` computes on the fp8 roof. Its ridge is H100's
    FP8 roof over its bandwidth (datasheet: 1978.9e12 / 3.35e12 = 590.7 FLOP/B)."""
    code, out, err = run(capsys, "report", "--dtype", "fp8_e4m3", "--json")
    assert code == 0, err
    assert json.loads(out)["ridge_flop_per_byte"] == pytest.approx(1978.9e12 / 3.35e12)


def test_derive_balance_lists_each_device_once(capsys):
    """``derive balance h100 h100-sxm`` printed H100's six rows twice; ``hw compare`` refuses the
    same list. A preliminary device is said to be so."""
    code, _, err = run(capsys, "derive", "balance", "h100", "h100-sxm")
    assert code == 2 and "devices gives h100-sxm twice (as h100 and h100-sxm): list each device once" in err
    code, out, _ = run(capsys, "derive", "balance", "vr200")
    assert code == 0 and out.count("vr200 figures are preliminary") == 1
    # its fp8 row: 16.67 PFLOP/s (1.2 EFLOPS / 72, rubin-gtc2025) over 22 TB/s (rubin-ces2026)
    code, out, _ = run(capsys, "derive", "balance", "vr200", "--json")
    row = next(r for r in json.loads(out)["rows"] if r["precision"] == "fp8")
    assert row["ridge"] == pytest.approx(1.2e18 / 72 / 22e12)


def test_probe_calibrated_spec_says_its_figures_are_calibrated():
    """``probe --calibrated-out`` wrote the tensor roofs times e_max and the bandwidth times eta
    with the raw measurement's source unchanged: a roof of 101.7 GFLOP/s "measured ... 2.15e+09
    FLOP in 41.73 ms" (that is 51.5). By hand, the synthetic run below: mm 2 GFLOP in 10 ms =
    200 GFLOP/s, x 0.5 = 100 GFLOP/s; bw:add 24e6 B in 2 ms = 12 GB/s, x 0.8 = 9.6 GB/s; each
    source names its factor. The table prints "-" for a rate a measurement does not time (a
    matmul's GB/s was "0.0")."""
    from costmodel.measure.calibrate import Calibration
    from costmodel.measure.probe import Measurement, ProbeResult
    from costmodel.measure.probe_report import ProbeReport, ProbeRequest

    res = ProbeResult(
        [Measurement("bw:add", 2e-3, 0.0, bytes=24e6), Measurement("mm:numpy:fp32", 10e-3, 0.0, flops=2e9)],
        {"cpu": "synthetic"},
    )
    report = ProbeReport(ProbeRequest(name="box"), res, (), Calibration(0.8, 0.5, 10.0))
    dev = report.calibrated_spec()["devices"]["box"]
    tensor = next(r for r in dev["roofs"] if r["unit"] == "tensor")
    assert tensor["peak_flops_per_s"] == pytest.approx(100e9)
    assert "2e+09 FLOP in 10.00 ms" in tensor["source"] and "calibrated: x 0.5" in tensor["source"]
    dram = dev["memory"][0]
    assert dram["bandwidth_bytes_per_s"] == pytest.approx(9.6e9)
    assert "calibrated: x 0.8" in dram["source"]
    raw = res.spec_dict("box")["devices"]["box"]  # the uncalibrated file is the measurement as is
    assert "calibrated" not in json.dumps(raw["roofs"]) + raw["memory"][0]["source"]
    lines = report.to_text().splitlines()
    mm = next(line for line in lines if line.startswith("mm:numpy:fp32"))
    assert mm.split()[3:] == ["-", "200.0"]
    bw = next(line for line in lines if line.startswith("bw:add"))
    assert bw.split()[3:] == ["12.0", "-"]


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (
            ["frontier", "--ctx", "8192"],
            "--ctx does not apply to frontier: it draws decode batches 1 to 512 at ctx 1024",
        ),
        (["ledger", "--batch", "3"], "--batch does not apply to ledger"),
        (["ledger", "--phase", "prefill"], "--phase does not apply to ledger"),
        (["batch-sweep", "--batch", "4"], "--batch does not apply to batch-sweep"),
        (["roofline", "--seq", "100"], "--seq 100 is a prefill's prompt length"),
        (["headroom", "--phase", "prefill", "--ctx", "100"], "--ctx 100 is a decode's KV length"),
        (["batch-sweep", "--measure", "--tp", "2"], "--tp does not apply to batch-sweep --measure"),
    ],
)
def test_plot_refuses_a_setting_its_figure_does_not_draw(capsys, tmp_path, argv, says):
    """``plot frontier --ctx 8192`` drew its own ctx 1024/4096/16384 (the title said so, the
    command did not), ``plot ledger --batch 3`` its batches 1 to 128, ``plot roofline --seq 100``
    a decode at ctx 4096: each setting given was dropped with rc 0. Refused now, before any work,
    naming what the figure draws; the library's request refuses the same."""
    code, out, err = run(capsys, "plot", *argv, "--out", str(tmp_path / "x.png"))
    assert code == 2 and says in err and not out
    assert not (tmp_path / "x.png").exists()
    from costmodel.errors import CostModelError
    from graphs.serving.analysis.plot_request import PlotRequest

    with pytest.raises(CostModelError, match="--ctx does not apply to frontier"):
        PlotRequest("frontier", ctx=8192)
    req = PlotRequest("ledger", ctx=1024)  # what it takes; the rest as drawn when not given
    assert (req.ctx, req.tp, req.batch, req.phase) == (1024, None, None, None)  # as given
    assert req.step() == ("decode", 8, 4096, 1024, 1)
    # a copy checks what was given, never the defaults (it refused its own defaults as given)
    import dataclasses

    for kind in ("roofline", "frontier", "ledger", "headroom", "batch-sweep"):
        assert dataclasses.replace(PlotRequest(kind), device="h200").device == "h200"
    assert dataclasses.replace(PlotRequest("batch-sweep", measure=True)).measure
    assert PlotRequest("frontier", phase="decode").step()[0] == "decode"  # the figure is a decode


def test_ledger_overhead_help_says_what_the_fraction_is(capsys):
    """``ledger --help`` said --overhead is "a fraction of the other terms' sum, of the total, or
    of what is free", but under fraction_of_total it is the share the engine may use (0.9 reserves
    0.1 of the device, not 0.9 of it) and under fraction_of_free the KV cache's share of what is
    left. By hand, llama-3.1-8b on an H100 (driver: 81,559 MiB = 85,520,809,984 B): 0.9 of the
    total leaves an overhead of 0.1 x 85,520,809,984 = 8,552,080,998.4 B."""
    code, out, _ = run(capsys, "ledger", "--help")
    flat = " ".join(out.split())
    assert code == 0
    assert "fraction_of_total (0, 1]: the share of the device the engine may use" in flat
    assert "fraction_of_free (0, 1]: the share of the memory left after weights and activations" in flat
    argv = ["ledger", "llama-3.1-8b", "--overhead-policy", "fraction_of_total", "--overhead", "0.9", "--json"]
    code, out, _ = run(capsys, *argv)
    assert code == 0
    assert json.loads(out)["terms"]["overhead"] == pytest.approx(0.1 * 81559 * 2**20)


def test_a_hardware_file_of_no_device_is_refused(capsys, tmp_path):
    """An empty ``[devices]`` table loaded nothing and said nothing (``report`` then ran on the
    catalog's H100, as if the file had been read); ``{}`` was already refused."""
    for name, text in (("empty.toml", "[devices]\n"), ("empty.json", '{"devices": {}}')):
        path = tmp_path / name
        path.write_text(text)
        code, out, err = run(capsys, "--hw-file", str(path), "report")
        assert code == 2 and not out
        assert f"hardware file '{path}' defines no device" in err


def test_a_scale_factor_that_is_not_positive_names_itself():
    """``headroom(cost, hw, "compute", 0)`` said "roof tensor/fp8 peak_flops_per_s must be a
    positive number, got 0", naming a roof the caller never gave; the factor is named now."""
    from costmodel import get_device, headroom
    from costmodel.errors import HardwareSpecError

    gemm = op_cost("gemm", M=4096, N=4096, K=4096)
    for factor in (0, -1):
        with pytest.raises(HardwareSpecError, match=f"scale factor compute must be positive.*got {factor}$"):
            headroom(gemm, "h100", "compute", factor)
    with pytest.raises(HardwareSpecError, match="scale factor dram must be positive"):
        get_device("h100").scaled({"dram": 0})
    assert headroom(gemm, "h100", "compute", 2) == 2  # I = 1365 > 2 x 295: compute-bound, 2x


def test_op_parameter_with_no_name(capsys):
    """``op gemm =3 M=1 N=1 K=1`` said "unknown parameter(s) ;" (an empty name in the list)."""
    code, _, err = run(capsys, "op", "gemm", "=3", "M=1", "N=1", "K=1")
    assert code == 2 and "op parameter '=3' has no name before '='; gemm takes M, N, K" in err


def test_a_whole_number_in_exponent_form_is_told_to_use_digits(capsys):
    """``model analyze tiny --batch 1e3`` said "--batch must be a whole number, got '1e3'": it
    is one (1000), only not in digits. The error says so now; 1.5 is still no whole number."""
    code, _, err = run(capsys, "model", "analyze", "tiny", "--batch", "1e3")
    assert (
        code == 2 and "--batch must be a whole number in digits, got '1e3' (write it in digits: 1000)" in err
    )
    code, _, err = run(capsys, "model", "analyze", "tiny", "--batch", "1.5")
    assert code == 2 and "got '1.5'" in err and "write it" not in err
    # list options read a whole number the same way (sweep --batches once said 1e3 is none)
    code, _, err = run(capsys, "sweep", "tiny", "--batches", "1,1e3")
    assert code == 2 and "--batches: '1e3' is a whole number not in digits (write it in digits: 1000)" in err
    code, _, err = run(capsys, "sweep", "tiny", "--batches", "1.5")
    assert code == 2 and "'1.5' is not a whole number or START:STOP:FACTOR" in err
