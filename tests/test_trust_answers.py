"""Issue 26, "wrong answers served": each reproducer now gives the correct answer or a one-line
error naming the field (points that do not fit, exit codes, closed forms, device aliases, plots,
missing roofs, hardware files, swallowed errors, the torch extra)."""

import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import sympy

from costmodel.errors import CostModelError
from graphs.cli import main

ROOT = Path(__file__).resolve().parent.parent


def run(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


# ------------------------------------------------------------ 1. points that do not fit


def test_decode_that_does_not_fit_is_refused_with_the_devices_it_needs(capsys):
    # Llama-3.1-405B bf16: 405.85e9 params x 2 B = 811.7 GB of weights, + KV 126 layers x 8 kv heads
    # x 128 x 2 (K, V) x 2 B = 516,096 B/token x 4096 = 2.1 GB: 813.8 GB / 85.52 GB (the H100's
    # 81,559 MiB, nvidia-smi) = 9.5 -> >= 10 devices; tp must divide 128 heads (and the
    # 128,256-row vocab): 16 is the first degree >= 10
    code, out, _ = run(capsys, "decode", "llama-3.1-405b", "--device", "h100")
    lines = out.splitlines()
    assert code == 1
    assert lines[0] == "does not fit on 1×h100-sxm: needs ≥ 10 devices (try --tp 16)"
    assert "TPOT" not in out and "compute-bound" not in out and "--ignore-capacity" in out
    code, out, _ = run(capsys, "decode", "llama-3.1-405b", "--device", "h100", "--tp", "16")
    assert code == 0 and out.startswith("llama-3.1-405b decode on h100-sxm") and "TPOT bound" in out


def test_ignore_capacity_prints_the_point_after_the_verdict(capsys):
    code, out, _ = run(capsys, "decode", "llama-3.1-405b", "--device", "h100", "--ignore-capacity")
    first, *rest = out.splitlines()
    assert code == 0 and first.startswith("does not fit on 1×h100-sxm: needs ≥ 10 devices")
    assert any("TPOT bound" in line for line in rest)
    assert "capped by memory: at most batch 0 fits at ctx 4096, so no batch runs" in out


def test_the_refusal_holds_on_the_cached_card_path(capsys, monkeypatch, tmp_path):
    from graphs.serving.present import cards

    monkeypatch.setenv("COSTMODEL_CACHE_DIR", str(tmp_path))
    argv = ("decode", "qwen2.5-7b", "--ctx", "1024", "--batch", "1810")
    assert run(capsys, "decode", "qwen2.5-7b", "--ctx", "1024")[0] == 0  # stores the card
    assert len(list((tmp_path / "forms").glob("decode-*.json"))) == 1

    def no_build(*a, **k):
        raise AssertionError("the cached card should have been used")

    monkeypatch.setattr(cards, "build_decode_card", no_build)
    code, out, _ = run(capsys, *argv)
    # 7.615e9 x 2 B weights; 28 layers x 4 kv heads x 128 x 2 x 2 B = 57,344 B per token: at ctx
    # 1024, 1810 sequences hold 106 GB of KV alone, over the 85.52 GB (81,559 MiB); (85.52e9 - 15.23e9
    # of weights - activations) / 58.72e6 B a sequence: `ledger` says 1190 fit
    assert code == 1 and out.splitlines()[0].startswith("does not fit on 1×h100-sxm: needs ≥ 2 devices")
    assert "at most batch 1190" in out
    code, out, _ = run(capsys, *argv, "--json")
    doc = json.loads(out)
    assert code == 1 and doc["capacity"]["fits"] is False and doc["capacity"]["max_batch"] == 1190
    assert "tpot_s" not in doc


def test_card_ledger_agrees_with_the_library():
    from graphs.serving.present.cards import build_decode_card, build_prefill_card
    from graphs.serving.step.fit_check import capacity_from_card
    from graphs.serving.step.ledger_fit import capacity_check

    card = build_decode_card("qwen2.5-7b", "h100", tp=1)
    for batch, ctx in ((1, 1024), (1190, 1024), (1191, 1024), (64, 32768)):
        a = capacity_from_card(card, batch=batch, tokens=ctx)
        b = capacity_check("qwen2.5-7b", "h100", phase="decode", batch=batch, tokens=ctx, suggest=False)
        assert (a.fits, a.max_batch, a.max_context) == (b.fits, b.max_batch, b.max_context)
        assert a.needed_bytes == pytest.approx(b.needed_bytes, rel=1e-12)
    card = build_prefill_card("llama-3.1-8b", "h100", tp=1)
    a = capacity_from_card(card, batch=4, tokens=8192)
    b = capacity_check("llama-3.1-8b", "h100", phase="prefill", batch=4, tokens=8192, suggest=False)
    assert (a.fits, a.max_batch) == (b.fits, b.max_batch)
    assert a.needed_bytes == pytest.approx(b.needed_bytes, rel=1e-12)


def test_knee_is_capped_at_the_largest_batch_that_fits(capsys):
    code, out, _ = run(capsys, "decode", "qwen2.5-7b", "--ctx", "1024")
    assert code == 0 and out.startswith("qwen2.5-7b decode on h100-sxm")  # fits: no verdict line
    assert "90% at batch 1810" in out and "capped by memory: at most batch 1190 fits at ctx 1024" in out
    code, out, _ = run(capsys, "decode", "qwen2.5-7b", "--ctx", "1024", "--json")
    lim = json.loads(out)["limits"]
    assert lim["max_batch_fits"] == 1190
    # 1190 sequences reach less than the asymptote 1/b the 90 % batch is quoted against
    assert 0 < lim["throughput_at_max_batch_tokens_per_s"] < lim["throughput_ceiling_tokens_per_s"]


def test_prefill_and_model_analyze_refuse_what_does_not_fit(capsys):
    # Llama-3.1-70B: 70.55e9 x 2 B = 141 GB of weights > 80 GB: >= 2 devices, and 64 heads split over 2
    code, out, _ = run(capsys, "prefill", "llama-3.1-70b", "--device", "h100", "--seq", "4096")
    assert code == 1 and out.splitlines()[0] == "does not fit on 1×h100-sxm: needs ≥ 2 devices (try --tp 2)"
    assert "TTFT" not in out
    code, out, _ = run(capsys, "model", "analyze", "deepseek-v3", "--phase", "prefill")
    assert code == 1 and out.splitlines()[0].startswith("does not fit on 1×h100-sxm: needs ≥ ")
    assert "bound (sum over nodes)" not in out


def test_serve_disagg_refuses_a_decode_pool_that_does_not_fit(capsys):
    # Llama-2-7B KV: 32 layers x 32 heads x 128 x 2 x 2 B = 524,288 B/token; 32 sequences x
    # (8192 + 512) tokens = 146 GB of KV alone, over an H200's 141 GB
    code, out, _ = run(capsys, "serve", "disagg", "llama-2-7b", "--allow-long-context")
    assert code == 1 and out.splitlines()[0].startswith("decode: does not fit on 1×h200-sxm: needs ≥ 2")
    assert "TPOT" not in out and "J/token" not in out
    code, out, _ = run(capsys, "serve", "disagg", "llama-2-7b", "--ignore-capacity", "--allow-long-context")
    assert code == 0 and out.startswith("decode: does not fit") and "TPOT" in out


# ------------------------------------------------------------ 2. ledger exit codes


def test_ledger_exit_code_is_one_when_the_point_does_not_fit(capsys):
    code, out, _ = run(capsys, "ledger", "qwen2.5-7b", "--ctx", "1024", "--batch", "1810")
    assert code == 1 and "does NOT fit" in out and "max batch at ctx 1024: 1190" in out
    assert run(capsys, "ledger", "qwen2.5-7b", "--ctx", "1024", "--batch", "1810", "--json")[0] == 1
    assert run(capsys, "ledger", "qwen2.5-7b", "--ctx", "1024", "--batch", "1190")[0] == 0
    raw = ("ledger", "--weights-bytes", "14e9", "--kv-bytes-per-token", "524288", "--capacity-bytes", "1e9")
    assert run(capsys, *raw)[0] == 1  # 14 GB of weights on a 1 GB device: nothing fits
    roomy = (
        "ledger",
        "--weights-bytes",
        "14e9",
        "--kv-bytes-per-token",
        "524288",
        "--capacity-bytes",
        "17e9",
    )
    # 14e9 + B x 4096 x 524288 = 16.15e9 <= 17e9 at B = 1, 18.29e9 at B = 2: the table runs into OOM
    assert run(capsys, *roomy, "--batches", "1,2")[0] == 0


# ------------------------------------------------------------ 3. the crossover's closed form


@pytest.mark.parametrize(
    "flags",
    [[], ["--w-dtype", "int8"], ["--dtype", "fp8"], ["--w-dtype", "nvfp4"], ["--N", "18944", "--K", "3584"]],
)
def test_printed_closed_form_evaluates_to_the_printed_crossover(capsys, flags):
    code, out, _ = run(capsys, "derive", "crossover", *flags)
    import re

    from costmodel.expr import parse_expr

    exact = float(re.search(r"exact M\*\s+= ([0-9.]+)", out).group(1))
    form = re.search(r"closed form\s+: M\* = (.+)", out).group(1)
    at = dict(p.split(" = ") for p in re.search(r"evaluated at\s+: (.+)", out).group(1).split(", "))
    # the printed form read back through the engine's safe parser, its names bound to the printed values
    value = parse_expr(form, {k: sympy.Float(v) for k, v in at.items()}, field="closed form")
    assert code == 0 and round(float(value), 2) == exact


def test_int8_weights_crossover_by_hand(capsys):
    # M* = K N P w / (2 K N beta - K P a - N P o), N = K = 4096, a = o = 2, w = 1:
    # = 4096 I* / (8192 - 4 I*) with I* = 989.4e12 / 3.35e12 = 295.34 -> 172.56
    code, out, _ = run(capsys, "derive", "crossover", "--w-dtype", "int8")
    ridge = 989.4e12 / 3.35e12
    assert code == 0 and f"exact M*       = {4096 * ridge / (8192 - 4 * ridge):.2f}" in out
    assert "closed form    : M* = K*N*P*w/(2*K*N*beta - K*P*a - N*P*o)" in out  # as the comment writes it


def test_a_shape_that_never_turns_compute_bound_says_so_once(capsys):
    # [M,1] x [1,4096] in bf16: I(M) = 2 M N K / (2 (M K + K N + M N)) -> N K / (N + K) = 4096 / 4097
    # FLOP/B as M -> oo, below H100's ridge 295.34: no M*. The large-N,K limit is printed as
    # that, not as this shape's crossover (it was printed bare after "never compute-bound").
    code, out, _ = run(capsys, "derive", "crossover", "--N", "4096", "--K", "1")
    assert code == 0 and f"ceiling (M -> oo) {4096 / 4097:.2f} FLOP/B is below the ridge point" in out
    assert "exact M*" not in out
    assert "M* = 295.34  (the limit N, K -> oo, not this shape's)" in out


# ------------------------------------------------------------ 4. calibrate report devices


def test_calibrate_devices_resolve_aliases_through_the_catalog():
    from graphs.cli.calibrate import measured_devices

    assert measured_devices("h100,h100-sxm,B200") == ["h100-sxm", "b200"]
    with pytest.raises(CostModelError, match="unknown device 'nosuch'"):
        measured_devices("nosuch")
    with pytest.raises(CostModelError, match=r"--devices: device 'mi300x' \(mi300x\) has no measured data"):
        measured_devices("mi300x")


def test_calibrate_report_refuses_an_unmeasured_device_before_reading_the_corpus(capsys):
    code, out, err = run(capsys, "calibrate", "report", "--devices", "mi300x")
    assert code == 2 and out == "" and err.count("\n") == 1 and "has no measured data" in err


# ------------------------------------------------------------ 5. plots


@pytest.fixture
def figures(monkeypatch):
    pytest.importorskip("matplotlib", reason="plot extra not installed")
    from costmodel import plots

    saved = []
    real = plots._save

    def keep(fig, path, title=""):
        saved.append(fig)
        return real(fig, path, title)

    monkeypatch.setattr(plots, "_save", keep)
    return saved


def _title(fig):
    sup = fig._suptitle.get_text() if fig._suptitle is not None else ""
    return " ".join(" ".join([sup, *(ax.get_title() for ax in fig.axes)]).split())  # unwrapped


@pytest.mark.parametrize("kind", ["roofline", "ledger", "frontier", "headroom", "batch-sweep"])
def test_every_plot_honours_model_and_device_and_names_them(capsys, tmp_path, figures, kind):
    for model, device in (("tiny", "h100"), ("llama-3.1-8b", "a100-sxm-80gb")):
        out = tmp_path / f"{kind}-{model}.png"
        assert run(capsys, "plot", kind, "--model", model, "--device", device, "--out", str(out))[0] == 0
    a, b = figures
    for fig, model, device in ((a, "tiny", "h100-sxm"), (b, "llama-3.1-8b", "a100-sxm-80gb")):
        t = _title(fig)
        assert model in t and device in t and "tp 1" in t and ("ctx 4096" in t or "ctx 1024" in t)

    def data(fig):
        out = []
        for ax in fig.axes:
            out += [tuple(map(tuple, c.get_offsets())) for c in ax.collections]
            out += [tuple(ln.get_ydata()) for ln in ax.lines]
            out += [p.get_height() for p in ax.patches]
        return out

    assert data(a) != data(b)


def test_batch_sweep_plots_the_device_not_this_machine(capsys, tmp_path, figures, monkeypatch):
    import importlib

    probe = importlib.import_module("costmodel.measure.probe")

    def no_probe(*a, **k):
        raise AssertionError("batch-sweep without --measure must not time this machine")

    monkeypatch.setattr(probe, "probe", no_probe)
    assert run(capsys, "plot", "batch-sweep", "--out", str(tmp_path / "b.png"))[0] == 0
    assert "llama-3.1-8b" in _title(figures[0]) and "h100-sxm" in _title(figures[0])
    code, _, err = run(
        capsys, "plot", "batch-sweep", "--measure", "--device", "h100", "--out", str(tmp_path / "m.png")
    )
    assert code == 2 and "--measure" in err


def test_simulation_plots_take_a_title(tmp_path, figures):
    import numpy as np

    from costmodel import plots

    name = plots.plot_title("serving", model="llama-3.1-8b", device="h100-sxm", ctx=4096, tp=1)
    assert name == "serving: llama-3.1-8b on h100-sxm, ctx 4096, tp 1"
    t = np.linspace(0, 1, 5)
    plots.latency_cdf_plot({"TTFT": [0.1, 0.2]}, tmp_path / "c.png", title=name)
    plots.serving_timeline_plot(
        {"t": t, "running": t, "waiting": t, "batch": t, "kv_used": t}, tmp_path / "t.png", title=name
    )
    plots.rate_sweep_plot([{"rate": 1, "ttft_p99": 0.1, "tpot_p99": 0.01}], tmp_path / "r.png", title=name)
    assert all(_title(f).strip() == name for f in figures)


# ------------------------------------------------------------ 6. a device without an SFU roof

_BOX = """
[devices.{name}]
roofs = [
  {{ unit = "tensor", precision = "bf16", peak_flops_per_s = 400e12, source = "a sheet" }},
  {{ unit = "vector", precision = "fp32", peak_flops_per_s = 50e12, source = "a sheet" }},{sfu}
]
memory = [{{ name = "dram", bandwidth_bytes_per_s = 2e12, capacity_bytes = 64e9, source = "a sheet" }}]
"""


def test_sfu_flops_fall_back_to_the_vector_roof_and_say_so(capsys, tmp_path):
    no_sfu = tmp_path / "nosfu.toml"
    no_sfu.write_text(_BOX.format(name="nosfu", sfu=""))
    same = tmp_path / "vsfu.toml"  # an SFU roof equal to the vector one: the fallback's answer
    same.write_text(
        _BOX.format(
            name="vsfu",
            sfu='\n  { unit = "sfu", precision = "fp32", peak_flops_per_s = 50e12, source = "a sheet" },',
        )
    )
    for phase in ("decode", "prefill"):
        argv = (phase, "llama-3.1-8b", "--json")
        _, out_a, _ = run(capsys, "--hw-file", str(no_sfu), *argv, "--device", "nosfu")
        _, out_b, _ = run(capsys, "--hw-file", str(same), *argv, "--device", "vsfu")
        a, b = json.loads(out_a), json.loads(out_b)
        assert a["terms_s"]["sfu"] > 0 and a["terms_s"]["sfu"] == pytest.approx(
            b["terms_s"]["sfu"], rel=1e-12
        )
        assert a["step_s"] == pytest.approx(b["step_s"], rel=1e-12)
        assert any("no sfu roof" in n and "vector roof" in n for n in a["notes"]) and not b["notes"]
    code, out, _ = run(capsys, "--hw-file", str(no_sfu), "decode", "llama-3.1-8b", "--device", "nosfu")
    assert code == 0 and out.splitlines()[1].startswith("  note: nosfu publishes no sfu roof")


def test_bound_charges_sfu_to_the_vector_roof():
    from costmodel import Cost, bound
    from costmodel.hardware import get_device
    from costmodel.hardware.fallback import roof_notes

    gb200 = get_device("gb200")  # the catalog publishes no SFU rate for it
    b = bound(Cost.compute("sfu", "fp32", 10**12), gb200)
    assert b.terms["sfu"] == sympy.Integer(10**12) / gb200.require_peak("vector", "fp32") and not b.unbounded
    assert any("sfu" in n for n in roof_notes(gb200))


# ------------------------------------------------------------ 7. hardware files


def test_hw_file_named_like_a_catalog_device_is_refused(capsys, tmp_path):
    f = tmp_path / "h100.toml"
    f.write_text(
        '[devices.h100-sxm]\nroofs = [{ unit = "tensor", precision = "bf16", peak_flops_per_s = 1e15, source = "a sheet" }]\n'
        'memory = [{ name = "dram", bandwidth_bytes_per_s = 3e12, source = "a sheet" }]\n'
    )
    code, _, err = run(capsys, "--hw-file", str(f), "hw", "show", "h100")
    assert code == 2 and err.count("\n") == 1 and "'h100-sxm' is already the catalog device" in err
    # after the subcommand too, and replacing on purpose says so
    code, out, err = run(capsys, "hw", "show", "h100", "--hw-file", str(f), "--hw-override")
    assert code == 0 and "1.00 PFLOP/s" in out and "replaces catalog device 'h100-sxm'" in err


def test_duplicate_keys_in_a_json_hardware_file_are_refused(tmp_path):
    from costmodel.errors import HardwareSpecError
    from costmodel.hardware import load_hardware_file

    f = tmp_path / "dup.json"
    f.write_text(
        '{"devices": {"box": {"roofs": [{"unit": "tensor", "precision": "bf16", "peak_flops_per_s": 1e15}],'
        ' "memory": [{"name": "dram", "bandwidth_bytes_per_s": 3e12}],'
        ' "memory": [{"name": "dram", "bandwidth_bytes_per_s": 1e12}]}}}'
    )
    with pytest.raises(HardwareSpecError, match="key 'memory' appears twice"):
        load_hardware_file(f, register=False)


# ------------------------------------------------------------ 8. swallowed SystemExit


def test_predict_with_chunk_is_a_one_line_error(capsys):
    code, out, err = run(capsys, "prefill", "llama-3.1-8b", "--chunk", "512", "--predict", "vllm")
    assert code == 2 and out == "" and err.count("\n") == 1 and "--chunk 512 with --predict" in err


def test_a_systemexit_message_is_printed(capsys, monkeypatch):
    import importlib

    def boom(args):
        raise SystemExit("costmodel: error: the message")

    monkeypatch.setattr(importlib.import_module("graphs.cli.hw"), "cmd_hw_list", boom)
    code, _, err = run(capsys, "hw", "list")
    assert code == 2 and err == "costmodel: error: the message\n"


# ------------------------------------------------------------ 9. the torch extra


def test_export_report_without_torch_names_the_extra():
    code = (
        "import runpy, sys; sys.modules['torch'] = None; sys.argv = ['export_report.py'];"
        f"runpy.run_path({str(ROOT / 'examples' / 'export_report.py')!r}, run_name='__main__')"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "pip install -e '.[torch]'" in p.stderr


def test_torch_extra_installs_the_version_the_audit_accepts():
    from graphs.importers.inductor_audit import TESTED_TORCH

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    (pin,) = [r for r in extras["torch"] if r.startswith("torch")]
    assert pin == f"torch=={TESTED_TORCH[-1]}.*"


def test_serve_plans_refuse_plans_the_memory_cannot_hold():
    """Llama-3.1-405B in bf16 holds 2 x 405.9e9 = 811.7 GB of weights alone: one H100 (80 GB) or
    eight (101.5 GB each) cannot hold them, so neither plan is priced; two pipeline stages hold
    half the layers each: their bytes per device are half of one stage's."""
    from graphs.serving.analysis.parallel import plan_frontier, plan_memory_bytes
    from models import get_model, param_counts

    cfg = get_model("llama-3.1-405b")
    points = plan_frontier(cfg, ["h100"], batches=[16], ctx=4096, plans=[(1, 1, 1, 1), (8, 1, 1, 1)])
    assert all(p.report is None and "does not fit" in (p.error or "") for p in points)
    one = plan_memory_bytes(cfg, "h100", batch=16, ctx=4096, tp=8, pp=1, ep=1)
    two = plan_memory_bytes(cfg, "h100", batch=16, ctx=4096, tp=8, pp=2, ep=1)
    assert two == pytest.approx(one / 2)
    assert one >= 2 * float(param_counts(cfg).total) / 8  # at least its share of the weights


@pytest.mark.parametrize(
    ("argv", "field", "anyway"),
    [
        (
            ["serve", "disagg", "llama-2-7b"],
            "--prompt + --output 8,704",
            ["--ignore-capacity"],
        ),  # 8,192 + 512
        (
            ["serve", "specdec", "llama-2-70b", "llama-2-7b", "--ctx", "8192"],
            "llama-2-70b: --ctx 8,192",
            ["--ignore-capacity"],
        ),
        (["serve", "split", "llama-2-7b"], "--ctx 8,192", []),  # its default
        (["serve", "plans", "llama-2-7b", "--ctx", "100000"], "--ctx 100,000", []),
    ],
)
def test_serve_refuses_a_context_beyond_the_model_limit_as_decode_does(capsys, argv, field, anyway):
    """Llama-2's limit is 4,096 tokens (max_position_embeddings; the Llama 2 paper's context
    length). ``decode --ctx 8192`` refused it; the serve subcommands costed it silently (a
    review found it, their defaults among them). Now each refuses before any work, naming the
    model and the field, and ``--allow-long-context`` costs it with a warning."""
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"{field} exceeds the model's context limit of 4,096 tokens" in err
    assert "--allow-long-context" in err and err.count("\n") == 1
    assert main([*argv, *anyway, "--allow-long-context"]) in (0, 1)  # 1: a point that does not fit
    assert "costed anyway (--allow-long-context)" in capsys.readouterr().err


def test_a_config_of_no_torch_dtype_is_said_to_be_read_as_bf16(tmp_path, capsys):
    """The loader reads a config.json that states no ``torch_dtype`` as BF16; every command
    says so once before its answer (a review found only ``model check`` said it), and
    ``--weight-dtype`` silences it by giving the format."""
    import json

    from models.resolver import config_data

    data = config_data("llama-3.1-8b")
    data.pop("torch_dtype")
    path = tmp_path / "config.json"
    path.write_text(json.dumps(data))
    code, _, err = run(capsys, "decode", str(path), "--batch", "2")
    assert code == 0 and err.count("states no torch_dtype") == 1 and "taken as bf16" in err
    code, _, err = run(capsys, "decode", str(path), "--batch", "2", "--weight-dtype", "bf16")
    assert code == 0 and "torch_dtype" not in err
    code, _, err = run(capsys, "decode", "llama-3.1-8b", "--batch", "2")  # the catalog's states it
    assert code == 0 and "torch_dtype" not in err


@pytest.mark.parametrize("command", ["decode", "prefill"])
def test_a_routed_plan_s_caveat_is_in_the_json_notes_as_in_the_text(capsys, command):
    """``--ep 8``: the step is the busiest EP rank's and the all-to-all is not in it; the text
    said so and ``--json``'s notes were empty (a review found it)."""
    import json

    code, out, _ = run(capsys, command, "mixtral-8x7b", "--ep", "8", "--ignore-capacity", "--json")
    assert code == 0
    (note,) = json.loads(out)["notes"]
    assert (
        note.startswith("ep 8, routing uniform")
        and "the all-to-all between ranks is not in this step" in note
    )
    code, text, _ = run(capsys, command, "mixtral-8x7b", "--ep", "8", "--ignore-capacity")
    assert note in text


@pytest.mark.parametrize(
    ("argv", "field"),
    [
        (["sweep", "llama-2-7b"], "--ctxs 65,536"),  # its default contexts reach 65,536
        (["search", "llama-2-7b", "--ctxs", "65536"], "--ctxs/--prompt 65,536"),
        # a prompt longer than a context is refused on its own (test_planning_pages): both at 8,000
        (["search", "llama-2-7b", "--ctxs", "8000", "--prompt", "8000"], "--ctxs/--prompt 8,000"),
    ],
)
def test_sweep_and_search_refuse_a_context_beyond_the_model_limit(capsys, argv, field):
    """``sweep`` and ``search`` costed Llama-2 (4,096 tokens) at 65,536 with no word (an
    independent review found it after the serve commands' fix); each refuses the longest
    context before any work and ``--allow-long-context`` costs it with a warning."""
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"llama-2-7b: {field} exceeds the model's context limit of 4,096 tokens" in err
    assert main([*argv, "--allow-long-context", "--batches", "1,8"]) == 0
    assert "costed anyway (--allow-long-context)" in capsys.readouterr().err


def test_hw_show_prints_on_chip_capacities_as_their_whitepapers_mean_them(capsys):
    # H100 whitepaper: "50 MB L2", "up to 228 KB shared memory per SM" -- binary sizes (the
    # catalog stores 50 x 2**20 and 228 x 2**10 bytes; decimally they printed 52.43 MB, 233.47 KB);
    # the datasheet's 80 GB of HBM3 stays decimal
    code, out, _ = run(capsys, "hw", "show", "h100")
    lines = {ln.split()[0]: ln for ln in out.splitlines() if ln.startswith("  ") and ln.split()}
    assert code == 0
    assert "capacity  50.00 MiB per device" in lines["l2"]
    assert "capacity 228.00 KiB per sm" in lines["smem"]
    assert "capacity   80.00 GB per device" in lines["dram"]


def test_model_analyze_labels_what_each_part_counts_at_tp(capsys):
    # Llama-3.1-70B: K and V of 8 heads x 128 x 80 layers in bf16 = 327,680 B a token for the
    # whole model; at tp 4 the table and the step hold one device's quarter (81,920), while the
    # closed forms stay the whole model's: both were printed unlabelled side by side
    code, out, _ = run(capsys, "model", "analyze", "llama-3.1-70b", "--device", "h100", "--tp", "4")
    assert code == 0
    assert "step (one device's share at tp 4, as the table): " in out and "KV 81920 B/token" in out
    assert "closed forms (the whole model, not divided by tp;" in out
    assert "kv_bytes_per_token           = 327680" in out
    code, out, _ = run(capsys, "model", "analyze", "llama-3.1-70b", "--device", "h100", "--tp", "4", "--json")
    doc = json.loads(out)
    assert doc["scope"] == {
        "nodes_and_totals": "one device's share at tp 4",
        "closed_forms": "the whole model, not divided by tp",
    }


def test_device_hours_need_no_tdp_and_a_missing_energy_says_no_tdp(capsys):
    """TPU v5p has no TDP in the catalog: ``decode --json`` gave device_hours_per_million_tokens
    null (the text left it out) where serve plans printed 1.563 dev-h/M for the same step, and
    sweep and serve plans printed ``nan`` for the energy where search says ``no TDP``. By hand,
    the step is 5.627 ms (batch 1, ctx 4096, one device, no all-to-all): 1e6 tokens x 5.627 ms /
    3600 s = 1.563 device-hours per million tokens, with no power in it."""
    code, out, _ = run(capsys, "decode", "llama-3.1-8b", "--device", "tpu-v5p", "--json")
    doc = json.loads(out)
    assert code == 0 and doc["energy_per_token_j"] is None
    assert doc["step_s"] == pytest.approx(5.627e-3, abs=5e-7)
    assert doc["device_hours_per_million_tokens"] == pytest.approx(1e6 * doc["step_s"] / 3600, rel=1e-12)
    code, out, _ = run(capsys, "decode", "llama-3.1-8b", "--device", "tpu-v5p")
    assert "energy: no TDP for this device; 1.563 device-hours per million tokens" in out
    plans = ["serve", "plans", "llama-3.1-8b", "--device", "tpu-v5p", "--plans", "1x1x1x1", "--batches", "1"]
    code, out, _ = run(capsys, *plans, "--json")
    (row,) = json.loads(out)
    assert row["energy_per_token_j"] is None
    assert row["device_hours_per_million_tokens"] == pytest.approx(
        doc["device_hours_per_million_tokens"], rel=1e-9
    )
    code, out, _ = run(capsys, *plans)
    (line,) = [x for x in out.splitlines() if x.startswith("tpu-v5p")]
    assert "nan" not in out and " no TDP " in line and " 1.563 " in line and " no price " in line
    sweep = ["sweep", "llama-3.1-8b", "--device", "tpu-v5p", "--batches", "1,8", "--ctxs", "1024", "--quiet"]
    code, out, _ = run(capsys, *sweep)
    rows = [x for x in out.splitlines() if x.startswith("tpu-v5p")]
    assert code == 0 and len(rows) == 2 and all(x.endswith(" no TDP") for x in rows) and "nan" not in out
    code, out, _ = run(capsys, *sweep, "--json")
    assert all(p["energy_per_token_j"] is None for p in json.loads(out)["points"])


def test_a_prefill_cache_shorter_than_its_prompt_is_no_context(capsys):
    """``ledger --phase prefill --seq 131072 --ctx 131072 --batch 4`` printed "max cached context
    at batch 4, a 131,072-token prompt: 38276": the cache holds at least the prompt. By hand
    (H100, 85,520,809,984 B): weights 16,060,522,496 B, activations of 4 x 131,072 prompt tokens
    49,392,123,904 B, so the cache gets (85,520,809,984 - 16,060,522,496 - 49,392,123,904) /
    (4 x 131,072 B per token) = 38,276 positions, below the prompt: none. At ctx 131,072 the KV is
    131,072 B x 4 x 131,072 = 68,719,476,736 B, the total 134,172,123,136 B, 48,651,313,152 B
    (45.31 GiB) over: the verdict's shortfall. Batch 2 holds the prompt."""
    argv = [
        "ledger",
        "llama-3.1-8b",
        "--phase",
        "prefill",
        "--seq",
        "131072",
        "--ctx",
        "131072",
        "--batch",
        "4",
    ]
    code, out, _ = run(capsys, *argv, "--json")
    doc = json.loads(out)
    assert code == 1 and not doc["fits"] and doc["max_context"]["value"] == 0
    assert doc["max_context"]["shortfall_bytes"] == pytest.approx(134_172_123_136 - 85_520_809_984, rel=1e-12)
    assert doc["max_context"]["at_value"]["kv_cache"] == 131_072 * 4 * 131_072
    assert doc["max_batch"]["value"] == 2
    code, out, _ = run(capsys, *argv)
    assert "short by 45.31 GiB" in out and "38276" not in out
    assert (
        "max cached context at batch 4, a 131,072-token prompt: none: the cache holds at least the prompt, "
        "and at ctx 131,072 the ledger is 45.31 GiB over the device (kv_cache is what does not fit); "
        "at most batch 2 fits at ctx 131072"
    ) in out
    # a batch that holds the prompt still gets its longest cached context, at least the prompt
    code, out, _ = run(capsys, *argv[:-1], "1", "--json")
    assert code == 0 and json.loads(out)["max_context"]["value"] >= 131_072


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ("h100:vllm:x", "--params must be DEVICE or DEVICE:FRAMEWORK, got 'h100:vllm:x'"),
        ("h100:bogus", "--params framework 'bogus' not allowed; allowed: vllm, sglang, trtllm"),
        ("nosuch", "unknown device 'nosuch'"),
    ],
)
def test_calibrate_report_checks_params_before_the_report(capsys, params, message):
    """A review's `calibrate report ... --params h100:vllm:x` printed the whole report, then an
    internal ValueError; a bad device or framework was found only after the report's work."""
    from graphs.cli import main

    argv = [
        "calibrate",
        "report",
        "--quiet",
        "--families",
        "all_reduce",
        "--devices",
        "h100",
        "--splits",
        "shapes",
    ]
    assert main([*argv, "--params", params]) == 2
    out, err = capsys.readouterr()
    assert out == "" and message in err and "internal error" not in err
