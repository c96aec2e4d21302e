"""The command line is a thin layer: check it prints the library's numbers."""

import json
import math
import re

import pytest
import sympy

from costmodel import parse_expr
from costmodel.symbols import ctx, quantity
from graphs.cli import main


def run(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_default_report(capsys):
    code, out, _ = run(capsys)
    assert code == 0
    assert "ridge point I* = P_tensor,bf16 / beta_dram = 295.3 FLOP/B" in out
    assert "attention ideal-min" in out


def test_report_json_on_a100(capsys):
    _code, out, _ = run(capsys, "report", "--device", "a100", "--json")
    data = json.loads(out)
    assert round(data["ridge_flop_per_byte"], 1) == 200.6
    assert data["gemm_crossover_4096"]["integer"] == 223
    by_op = {r["op"]: r for r in data["ops"]}
    assert by_op["gemm 512x4096x4096"]["kind"] == "tensor"


def test_report_in_fp8_prices_one_gemm_everywhere(capsys):
    """``report --dtype fp8`` priced its table's GEMMs with fp8 outputs, its root with bf16 ones
    (M* 376.9) and printed the bf16 closed form (M* = 830 at its own P and beta). One
    GEMM now: fp8 operands, a bf16 output (cuBLASLt's FP8 GEMMs write 16-bit D), so by hand
    I(M) = 2 M 4096^2 / (M 4096 + 4096^2 + 2 M 4096) = 8192 M / (3 M + 4096): 744.73 FLOP/B at M =
    512; the ridge I* = 1978.9e12 / 3.35e12 (H100 SXM datasheet) = 590.72, so M* = 4096 I* /
    (8192 - 3 I*) = 376.89; the closed form (its widths substituted) gives the same."""
    code, out, _ = run(capsys, "report", "--dtype", "fp8", "--json")
    assert code == 0
    data = json.loads(out)
    gemm = next(r for r in data["ops"] if r["op"] == "gemm 512x4096x4096")
    assert gemm["intensity"] == pytest.approx(8192 * 512 / (3 * 512 + 4096))
    ridge = 1978.9e12 / 3.35e12
    assert float(data["gemm_crossover_4096"]["exact"]) == pytest.approx(
        4096 * ridge / (8192 - 3 * ridge), rel=1e-4
    )
    form = data["gemm_crossover_symbolic"]["exact"]  # the widths substituted: a = w = 1, o = 2
    at = {"P": 1978.9e12, "beta": 3.35e12, "N": 4096, "K": 4096}
    from costmodel.expr import parse_expr

    expr = parse_expr(form, field="form")
    value = float(expr.subs({sym: at[str(sym)] for sym in expr.free_symbols}))
    assert value == pytest.approx(4096 * ridge / (8192 - 3 * ridge), rel=1e-4)


def test_crossover_json(capsys):
    _code, out, _ = run(
        capsys, "derive", "crossover", "--N", "18944", "--K", "3584", "--device", "h100", "--json"
    )
    data = json.loads(out)
    # I* = 989.4e12/3.35e12 = 295.34: M* = I* NK / (NK - I*(N+K)) = 327.4 -> 328
    assert data["numeric"]["integer"] == 328
    P, b, beta = quantity("P"), quantity("b"), quantity("beta")
    assert parse_expr(data["symbolic"]["asymptotic"]) - P * b / (2 * beta) == 0  # M* = balance * b / 2


def test_op_symbolic_and_numeric(capsys):
    code, out, _ = run(capsys, "op", "gemm", "M=B*S", "N=4096", "K=4096")
    assert code == 0 and "33554432*B*S" in out
    code, out, _ = run(
        capsys,
        "op",
        "attention",
        "heads=32",
        "kv_heads=8",
        "q_len=1",
        "kv_len=8192",
        "head_dim=128",
        "--json",
    )
    data = json.loads(out)
    assert data["bound"]["kind"] == "dram"


def test_errors_are_one_line(capsys):
    code, _, err = run(capsys, "op", "gemm", "M=1", "N=1")
    assert code == 2 and "missing required parameter(s) K" in err
    code, _, err = run(capsys, "report", "--device", "h900")
    assert code == 2 and "unknown device 'h900'" in err
    code, _, err = run(capsys, "op", "gemm", "M=__import__('os')", "N=1", "K=1")
    assert code == 2 and "function calls are not allowed" in err


def test_hw_list_shows_the_capacity_the_checks_use(capsys):
    """``hw list`` printed the H100 SXM's "80 GB" while every capacity check divides the 81,559
    MiB nvidia-smi reports (= 85.52e9 B): both now, each named."""
    out = run(capsys, "hw", "list")[1]
    row = next(ln for ln in out.splitlines() if ln.startswith("h100-sxm "))
    assert "80.00 G" in row and "85.52 G" in row and "checks use (B)" in out
    data = {r["device"]: r for r in json.loads(run(capsys, "hw", "list", "--json")[1])}
    assert data["h100-sxm"]["memory_bytes"] == 81_559 * 2**20 and data["h100-sxm"]["capacity"] == 80e9


def test_hw_list_columns_line_up_on_every_row(capsys, tmp_path):
    """``hw list`` right-aligned the description, so a row's text began wherever its length put it
    (the GB300's 111 characters padded every other row to the same width, 200-odd columns), and a
    --hw-file description of wide characters shifted the columns after it. Now each number ends
    under its heading's end and each description starts under "description", for every catalog
    device and a file's device described in Chinese (two terminal cells per character)."""
    from costmodel.hardware import device_names, get_device
    from costmodel.text import display_width

    f = tmp_path / "box.toml"
    f.write_text(
        "[sources]\ns = 'a sheet'\n[devices.box]\ndescription = '\u6d4b\u8bd5\u52a0\u901f\u5361'\n"
        "vendor = 'x'\npower_w = 300\npower_source = 's'\n"
        "roofs = [{ unit = 'tensor', precision = 'bf16', peak_flops_per_s = 1e15, source = 's' }]\n"
        "memory = [{ name = 'dram', bandwidth_bytes_per_s = 3e12, capacity_bytes = 8e10, source = 's' }]\n"
    )
    code, out, _ = run(capsys, "--hw-file", str(f), "hw", "list")
    lines = out.splitlines()
    head, rule = lines[0], lines[1]
    rows = {ln.split()[0]: ln for ln in lines[2:] if ln and not ln.startswith("capacity:")}
    assert code == 0 and set(rows) == {*device_names(), "box"}
    # each column's span from the rule's dashes; numbers end at the span's end, text starts at it
    spans = [(m.start(), m.end()) for m in re.finditer(r"-+", rule)]
    *numeric, desc = spans[1:]
    assert head[desc[0] :] == "description"
    for name, line in rows.items():
        cells = [c for c in line.split("  ") if c]
        expected = get_device(name).description
        assert line.endswith(expected), name  # the description last, as the catalog states it
        prefix = line[: len(line) - len(expected)]
        assert display_width(prefix) == desc[0], name  # starts under its heading, wide text or not
        for (_, end), cell in zip(numeric, cells[1:-1], strict=True):
            assert line[:end].endswith(cell.strip()), (name, cell)
    assert "\u6d4b\u8bd5" in rows["box"] and " 300 W  " in rows["box"]
    assert rows["groq-lpu"].split()[-len(get_device("groq-lpu").description.split()) - 1] == "-"  # no TDP


def test_hw_list_show_balance_rules(capsys):
    assert run(capsys, "hw", "list")[1].count("\n") >= 11
    assert "3.90 TFLOP/s" in run(capsys, "hw", "show", "h100")[1]
    data = json.loads(run(capsys, "derive", "balance", "a100", "--json")[1])
    assert {r["precision"] for r in data["rows"]} >= {"bf16", "int8"}
    assert "gemm" in run(capsys, "rules")[1]
    assert json.loads(run(capsys, "derive", "decode-attention", "--json")[1])["intensity"] == "7"
    assert (
        json.loads(run(capsys, "derive", "tile", "--device", "h100", "--json")[1])["compute_bound"] is False
    )


def test_user_hw_file(capsys, tmp_path):
    f = tmp_path / "d.toml"
    f.write_text(
        '[devices.mybox]\nroofs = [{ unit = "tensor", precision = "bf16", peak_flops_per_s = 1e12, source = "a sheet" }]\n'
        'memory = [{ name = "dram", bandwidth_bytes_per_s = 1e10, source = "a sheet" }]\n'
    )
    code, out, _ = run(capsys, "--hw-file", str(f), "derive", "crossover", "--device", "mybox", "--json")
    assert code == 0 and json.loads(out)["numeric"]["balance"] == 100.0


def test_model_commands(capsys):
    code, out, _ = run(capsys, "model", "list", "--json")
    rows = {r["model"]: r for r in json.loads(out)}
    assert rows["qwen2.5-7b"]["non_embedding"] == 6_525_621_760
    code, out, _ = run(
        capsys,
        "model",
        "analyze",
        "llama-3.1-8b",
        "--device",
        "h100",
        "--phase",
        "decode",
        "--batch",
        "8",
        "--ctx",
        "8192",
        "--json",
    )
    data = json.loads(out)
    assert data["totals"]["kv_bytes_per_token"] == 131072
    # 2 * N_matmul + 4*L*H*d_head*ctx with N_matmul = 7,504,658,432 and 4*32*32*128 = 524288
    assert (
        parse_expr(data["closed_forms"]["tensor_flops_per_token_bound"]) - (524288 * ctx + 15009316864) == 0
    )
    assert {r["node"] for r in data["rows"]} >= {"layers.attention", "head.lm_head"}
    code, out, _ = run(capsys, "model", "analyze", "tiny", "--phase", "prefill", "--seq", "64")
    assert code == 0 and "closed forms" in out and "layers.attention" in out
    code, out, _ = run(capsys, "model", "forms", "deepseek-v3", "--json")
    assert json.loads(out)["kv_bytes_per_token_bound"]["expr"] == "70272"
    code, _, err = run(capsys, "model", "analyze", "gpt-9")
    assert code == 2 and "unknown model 'gpt-9'" in err


@pytest.mark.parametrize(
    ("phase", "given", "msg"),
    [
        ("decode", ("--seq", "77777"), "--seq 77777 is a prefill's prompt length (--phase prefill)"),
        ("prefill", ("--ctx", "77777"), "--ctx 77777 is a decode's KV length (--phase decode)"),
    ],
)
def test_model_analyze_refuses_the_other_phases_point(capsys, phase, given, msg):
    """A review found ``model analyze --phase decode --seq 77777`` (and prefill's --ctx) answered
    at the default point, the option ignored; given, it is refused; not given, the phase's own
    default still applies (ctx 4096, seq 4096: every command's prompt, graphs.serving.step.defaults)."""
    code, out, err = run(capsys, "model", "analyze", "tiny", "--phase", phase, *given)
    assert code == 2 and out == "" and err.startswith(f"costmodel: error: {msg}") and "\n" not in err.strip()
    code, out, _ = run(capsys, "model", "analyze", "tiny", "--phase", phase, "--json")
    doc = json.loads(out)
    assert code == 0 and (doc["ctx"] if phase == "decode" else doc["seq"]) == 4096  # seq: every command's


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["prefill", "tiny"], "tiny prefill on h100-sxm: batch 1 x 4096 tokens, tp=1"),
        (["ledger", "tiny", "--phase", "prefill"], "batch 1, ctx 4096, a 4,096-token prompt, prefill"),
        (
            ["model", "analyze", "tiny", "--phase", "prefill"],
            "tiny prefill on h100-sxm: batch 1, seq 4096, tp=1",
        ),
        (
            ["fusion", "audit", "tiny", "--phase", "prefill", "--top", "1"],
            "prefill layer on h100-sxm, batch 1, seq 4096",
        ),
        (["fusion", "plan", "tiny", "--phase", "prefill", "--method", "heuristic"], "batch 1, seq 4096"),
    ],
)
def test_every_command_prefills_the_same_default_prompt(capsys, argv, says):
    """One prompt length when ``--seq`` is not given: 4096, ``prefill``'s, the one the README's
    prefill and fusion examples give (``--seq 4096``); ``model analyze`` once took 1024 and
    ``fusion`` and ``plot`` 2048. Each command's ``--seq`` help states it."""
    code, out, _ = run(capsys, *argv)
    assert code == 0 and says in out.splitlines()[0], out.splitlines()[0]
    words = argv[:2] if argv[0] in ("model", "fusion") else argv[:1]
    code, out, _ = run(capsys, *words, "--help")
    found = re.search(r"\n  --seq SEQ\s+(.*?)\n  -", out, re.DOTALL)
    seq_help = " ".join(found.group(1).split()) if found else out
    assert code == 0 and "4096)" in seq_help, seq_help


def test_plot_prefills_the_same_default_prompt(tmp_path):
    """``plot --phase prefill``'s default prompt is every command's (4096, as above); its title names it."""
    pytest.importorskip("matplotlib", reason="the plot extra is not installed")
    from graphs.serving.analysis.plot_request import PlotRequest
    from graphs.serving.present.plot_report import run_plot
    from models import get_model

    report = run_plot(
        PlotRequest("roofline", model="tiny", phase="prefill"), get_model("tiny"), str(tmp_path / "r.svg")
    )
    assert "seq 4096" in report.title


def test_model_from_config_file(capsys, tmp_path):
    f = tmp_path / "config.json"
    f.write_text(
        json.dumps(
            {
                "model_type": "llama",
                "hidden_size": 256,
                "num_attention_heads": 4,
                "num_hidden_layers": 2,
                "intermediate_size": 512,
                "vocab_size": 1000,
            }
        )
    )
    code, out, _ = run(capsys, "model", "analyze", str(f), "--json")
    # a file called config.json names nothing: the folder holding it names the model (issue 46)
    assert code == 0 and json.loads(out)["model"] == tmp_path.name


def test_ledger_raw_reproduces_the_article(capsys):
    code, out, _ = run(
        capsys,
        "ledger",
        "--weights-bytes",
        "14e9",
        "--kv-bytes-per-token",
        "2*32*4096*2",
        "--act-bytes-per-token",
        "128*1024",
        "--overhead",
        "0.3",
        "--capacity-bytes",
        "78*1024**3",
        "--ctx",
        "4096",
        "--phase",
        "prefill",
        "--batches",
        "16,24",
    )
    assert code == 0
    assert "68.95" in out and "94.95" in out and "OOM" in out


def test_ledger_model_and_errors(capsys):
    code, out, _ = run(
        capsys, "ledger", "llama-3.1-8b", "--device", "h100", "--batch", "16", "--ctx", "8192", "--json"
    )
    assert json.loads(out)["max_batch"]["value"] == 64  # (85.52e9 - 16.06e9) / 1.07e9 a sequence
    code, out, _ = run(capsys, "ledger", "llama-3.1-405b", "--device", "h100")
    assert code == 1 and "does NOT fit" in out and "GiB over the device" in out
    for args, msg in (
        (("--ctx", "0"), "--ctx must be in [1, 100000000], got 0"),
        (("--batch", "-3"), "--batch must be in [1, 10000000], got -3"),
        (("--overhead", "1"), "--overhead-policy fraction_of_sum needs --overhead F in [0, 1)"),
    ):
        code, _, err = run(capsys, "ledger", "tiny", *args)
        assert code == 2 and msg in err


def test_prefill_decode_sweep_commands(capsys, tmp_path):
    code, out, _ = run(capsys, "prefill", "llama-3.1-8b", "--seq", "8192", "--chunk", "2048", "--json")
    assert json.loads(out)["chunks"] == 4
    code, out, _ = run(capsys, "decode", "qwen2.5-7b", "--batch", "1", "--ctx", "1024")
    assert code == 0 and "input-embedding table" in out and "TPOT bound" in out
    code, out, _ = run(capsys, "decode", "llama-3.1-70b", "--tp", "8", "--json")
    assert json.loads(out)["terms_s"]["link:scale_up"] > 0
    f = tmp_path / "s.csv"
    code, out, err = run(capsys, "sweep", "tiny", "--batches", "1:64:2", "--ctxs", "128,256", "--csv", str(f))
    assert (
        code == 0 and "Pareto frontier" in out and "sweep [" not in err and f.exists()
    )  # progress: TTY only
    code, out, _ = run(capsys, "sweep", "tiny", "--batches", "1,2", "--ctxs", "64", "--json", "--quiet")
    assert len(json.loads(out)["points"]) == 2


def test_fusion_commands(capsys):
    code, out, _ = run(capsys, "fusion", "audit", "llama-3.1-8b", "--phase", "prefill", "--seq", "1024")
    assert code == 0 and "kernel boundaries" in out and "suggested fusions" in out and "-> plan" in out
    code, out, _ = run(capsys, "fusion", "audit", "qwen2.5-7b", "--phase", "decode", "--json")
    data = json.loads(out)
    assert data["plan"]["dram_bytes"] < data["unfused"]["dram_bytes"]
    assert data["boundaries"] and data["suggestions"]
    code, out, _ = run(capsys, "fusion", "tiling", "--device", "h100", "--json")
    assert json.loads(out)["gemm"]["tile"] == 176
    code, _, err = run(capsys, "fusion", "tiling", "--device", "b200")
    assert code == 2 and "no smem capacity" in err


def test_hetero_commands(capsys):
    code, out, _ = run(capsys, "hw", "compare", "h100", "b200", "--json")
    assert len(json.loads(out)) == 2
    code, out, _ = run(capsys, "hw", "claim", "--old", "h100:fp8:8", "--new", "b300:fp4:72", "--json")
    assert json.loads(out)["system_size_factor"] == 9
    code, out, _ = run(
        capsys,
        "serve",
        "disagg",
        "llama-2-7b",
        "--prefill-device",
        "b200",
        "--decode-device",
        "h100",
        "--link-bandwidth",
        "12.5e9",
        "--rate",
        "2",
        "--prompt",
        "2048",
        "--json",
    )
    data = json.loads(out)
    assert data["kv_transfer_dominates_from_prompt"] > 0 and "colocated" in data
    code, out, _ = run(
        capsys, "serve", "specdec", "llama-3.1-70b", "llama-3.1-8b", "--device", "b200", "--json"
    )
    assert json.loads(out)["best_k"] >= 1
    code, out, _ = run(capsys, "serve", "split", "llama-3.1-8b", "--json")
    assert json.loads(out)["transfers"] == 64
    code, out, _ = run(capsys, "serve", "sram", "llama-3.1-70b")
    assert "614 devices" in out
    code, out, _ = run(
        capsys, "serve", "plans", "llama-3.1-70b", "--batches", "16", "--plans", "8x1x1x1,4x2x1x2"
    )
    assert code == 0 and "frontier" in out
    code, _, err = run(capsys, "hw", "claim", "--old", "h100", "--new", "b300:fp4")
    assert code == 2 and "DEVICE:PRECISION" in err


def test_serve_split_refuses_an_attention_side_that_cannot_hold_its_kv(capsys):
    """``serve split`` sized only the FFN side: 256 sequences of 8,192 tokens of Llama-3.1-70B hold
    256 x 8192 x 327,680 B (2 x 80 layers x 8 KV heads x 128 x 2 B a token) = 687.2 GB = 640 GiB
    of KV on the attention device, beyond one H200 (141 GB); it printed a step time. Refused
    now, as every other command refuses a point that cannot run, and printed with
    --ignore-capacity."""
    argv = ["serve", "split", "llama-3.1-70b", "--batch", "256", "--ctx", "8192", "--json"]
    code, out, _ = run(capsys, *argv)
    data = json.loads(out)
    assert code == 1 and "h200-sxm needed" in data["refused"] and "step_s" not in data
    assert data["attention_bytes"] > 256 * 8192 * 327_680
    # the device's memory as CUDA and the ledgers see it: nvidia-smi's 143,771 MiB = 150,754,820,096 B
    assert data["attention_devices_to_hold"] == math.ceil(data["attention_bytes"] / 150_754_820_096) == 5
    code, out, _ = run(capsys, *argv, "--ignore-capacity")
    assert code == 0 and json.loads(out)["step_s"] > 0


def test_probe_and_plot_commands(capsys, tmp_path):
    out_file = tmp_path / "p.json"
    code, out, err = run(
        capsys, "probe", "--small", "--no-torch", "--repeats", "3", "--out", str(out_file), "--json"
    )
    data = json.loads(out)
    assert code == 0 and out_file.exists() and data["calibration"]["residuals"]
    assert ".. bandwidth" in err  # progress is shown


def test_headroom_plot_command(capsys, tmp_path):
    pytest.importorskip("matplotlib", reason="plot extra not installed")
    png = tmp_path / "h.png"
    code, _, _ = run(capsys, "plot", "headroom", "--out", str(png))
    assert code == 0 and png.read_bytes()[:4] == b"\x89PNG"


def test_a_prefill_headroom_plot_draws_finite_curves(capsys, tmp_path):
    """A review found ``plot headroom --phase prefill`` printing numpy's RuntimeWarning and drawing
    NaN curves: the prefill's ``head.last_token`` moves no bytes (intensity inf) and spread the
    axis to infinity. It is left off, said once; the curves and the points are finite."""
    pytest.importorskip("matplotlib", reason="plot extra not installed")
    import warnings

    import numpy as np

    from costmodel import plots
    from costmodel.notes import clear

    rows = [{"node": "mlp", "intensity": 1000.0}, {"node": "head.last_token", "intensity": float("inf")}]
    clear()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no RuntimeWarning leaks
        fig = plots.headroom_plot(tmp_path / "h.png", rows=rows, hw="h100-sxm")
    ax = fig.axes[0]
    assert len(ax.lines) >= 2
    for line in ax.lines[:2]:
        assert np.isfinite(line.get_xdata()).all() and np.isfinite(line.get_ydata()).all()
    assert all(np.isfinite(c.get_offsets()).all() and len(c.get_offsets()) == 1 for c in ax.collections)
    note = "headroom: 1 node(s) moving no bytes (infinite intensity) left off the figure: head.last_token"
    assert capsys.readouterr().err.count(note) == 1
    png = tmp_path / "pre.png"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        code, out, err = run(capsys, "plot", "headroom", "--phase", "prefill", "--out", str(png))
    assert code == 0 and out == f"wrote {png}\n" and err.count(note) == 1 and "Warning" not in err


def test_plot_commands(capsys, tmp_path):
    pytest.importorskip("matplotlib", reason="plot extra not installed")
    for kind, extra in (
        ("roofline", ["--model", "tiny", "--device", "h100", "--precision", "bf16"]),
        ("ledger", ["--model", "tiny"]),
        ("frontier", ["--model", "tiny"]),
    ):
        out = tmp_path / f"{kind}.svg"
        code, _, _ = run(capsys, "plot", kind, *extra, "--out", str(out))
        assert code == 0 and out.read_text().lstrip().startswith("<?xml")


def test_a_prefill_ledger_holds_its_prompts_kv(capsys):
    """A review found `ledger --phase prefill --seq 32768` holding the KV of 4,096 tokens beside
    the activations of 32,768 (its --ctx default), so its max batch was not prefill's. The cache
    holds the prompt: 8.03e9 x 2 B of weights, 131,072 B a token x 32,768 = 4.00 GiB of KV, and
    the largest batch is the one `prefill` reports; --seq with a decode, a cache shorter than the
    prompt and the raw-mode flags beside a model are refused."""
    code, out, _ = run(capsys, "ledger", "llama-3.1-8b", "--phase", "prefill", "--seq", "32768", "--json")
    led = json.loads(out)
    assert code == 0 and led["terms"]["kv_cache"] == 32768 * 131072
    code, out, _ = run(capsys, "prefill", "llama-3.1-8b", "--seq", "32768", "--json")
    assert led["max_batch"]["value"] == json.loads(out)["capacity"]["max_batch"]
    for argv, msg in (
        (("--seq", "100"), "--seq is a prefill's prompt"),
        (("--phase", "prefill", "--seq", "32768", "--ctx", "1000"), "--ctx 1000 is below --seq 32768"),
        (("--weights-bytes", "5"), "--weights-bytes is for a ledger without a model"),
    ):
        code, _, err = run(capsys, "ledger", "llama-3.1-8b", *argv)
        assert code == 2 and msg in err


@pytest.mark.parametrize(
    "extra",
    [
        ("--weight-dtype", "int4"),
        ("--kv-dtype", "fp8"),
        ("--matmul-dtype", "fp8"),
        ("--device", "a100"),
        ("--tp", "8"),
        ("--allow-long-context",),
    ],
)
def test_raw_ledger_refuses_what_only_a_model_reads(capsys, extra):
    """A review found ``ledger --weights-bytes ... --weight-dtype int4`` (no model) printing the
    ledger of the raw terms, the option ignored; raw mode refuses it by name, as a model refuses a
    raw flag."""
    raw = ("ledger", "--weights-bytes", "14e9", "--kv-bytes-per-token", "131072", "--capacity-bytes", "78e9")
    code, out, err = run(capsys, *raw, *extra)
    assert code == 2 and out == ""
    assert err.strip() == (
        f"costmodel: error: {extra[0]} is for a ledger of a model; without one (raw mode) the terms are "
        "--weights-bytes, --kv-bytes-per-token and --capacity-bytes as given (per device)"
    )


def test_a_models_ledger_keeps_its_device_and_tp_defaults(capsys):
    code, out, _ = run(capsys, "ledger", "llama-3.1-8b")
    assert code == 0 and out.startswith("llama-3.1-8b on h100-sxm (tp=1): batch 1, ctx 4096, decode")
    code, out, _ = run(capsys, "ledger", "--help")
    assert "(default: h100-sxm; a model's ledger only)" in " ".join(out.split())


@pytest.mark.parametrize("policy", ["fraction_of_free", "fraction_of_total"])
def test_a_fraction_policy_without_overhead_names_the_option(capsys, policy):
    """``--overhead-policy fraction_of_free`` alone said "fraction must be in (0, 1], got 0", the
    0 being --overhead's default: the error names the option and what it takes."""
    code, out, err = run(capsys, "ledger", "llama-3.1-8b", "--overhead-policy", policy)
    assert code == 2 and out == "" and "\n" not in err.strip()
    assert f"--overhead-policy {policy} needs --overhead F in (0, 1]" in err
    assert "got --overhead 0 (--overhead defaults to 0, which only fraction_of_sum takes)" in err
    code, _, err = run(capsys, "ledger", "llama-3.1-8b", "--overhead-policy", policy, "--overhead", "0.9")
    assert code == 0 and err == ""


# ------------------------------------------------------------ derive: a symbolic shape, whole or refused

# H100 SXM, bf16: I* = 989.4e12 / 3.35e12 = 19788/67 = 295.34 FLOP/B (the catalog's dense bf16 roof
# over its HBM3 bandwidth)
RIDGE = sympy.Rational(19788, 67)


def test_crossover_with_a_symbolic_N_prints_M_star_in_the_symbol(capsys):
    """``derive crossover --N x`` printed its first three lines and then failed ("value still
    depends on unbound symbols: x"). Now M* is printed in x, with the shapes it exists for."""
    code, out, err = run(capsys, "derive", "crossover", "--N", "x")
    assert code == 0 and err == ""
    # 2 M x 4096 / (2 (4096 M + 4096 x + M x)) = I*  ->  M* = 4096 I* x / (4096 x - I* (x + 4096)),
    # positive only while 4096 x > I* (x + 4096): x > 4096 I* / (4096 - I*) = 318.29
    x = quantity("x")
    by_hand = 4096 * RIDGE * x / (4096 * x - RIDGE * (x + 4096))
    printed = parse_expr(re.search(r"exact M\*\s+= (.+)", out).group(1), {"x": x})
    for value in (319, 4096, 18944, 10**6):
        assert printed.subs(x, value) == by_hand.subs(x, value)
    assert f"where x > {float(4096 * RIDGE / (4096 - RIDGE)):.2f};" in out  # 318.29
    assert "x > 318.29;" in out
    # the M << N, K line is the limit N, K -> oo, as for a numeric shape: I* b / 2 with b = 2
    assert f"M << N,K       : M* = {float(RIDGE):.2f}\n" in out
    assert "evaluated at   : b = 2, P = 9.894e+14, beta = 3.35e+12, N = x, K = 4096" in out


def test_crossover_with_a_symbolic_N_in_json_carries_the_condition(capsys):
    code, out, _ = run(capsys, "derive", "crossover", "--N", "x", "--json")
    data = json.loads(out)["numeric"]
    x = quantity("x")
    assert code == 0 and data["integer"] is None
    by_hand = 4096 * RIDGE * x / (4096 * x - RIDGE * (x + 4096))
    assert sympy.simplify(parse_expr(data["exact"], {"x": x}) - by_hand) == 0
    assert data["condition"] == "x > 20262912/63661"  # 4096 I* / (4096 - I*) = 4096 * 19788 / 254644
    assert sympy.Rational(20262912, 63661) == 4096 * RIDGE / (4096 - RIDGE)
    assert data["asymptotic"] == pytest.approx(float(RIDGE))  # N, K -> oo, not x -> oo (318.29)


def test_crossover_with_two_symbols_states_the_condition_on_both(capsys):
    code, out, _ = run(capsys, "derive", "crossover", "--N", "x", "--K", "y")
    # M* = I* x y / (x y - I* (x + y)); times 67: 19788 x y / (67 x y - 19788 x - 19788 y)
    assert code == 0 and "exact M*       = 19788*x*y/(67*x*y - 19788*x - 19788*y)" in out
    assert "where 67*x*y - 19788*x - 19788*y > 0;" in out


def test_crossover_of_a_symbolic_shape_that_never_turns_compute_bound(capsys):
    # [M,x] x [x,100]: the ceiling (M -> oo) is 100 x / (x + 100) < 100 < 295.34 for every x
    code, out, err = run(capsys, "derive", "crossover", "--N", "100", "--K", "x")
    assert code == 0 and err == "" and "exact M*" not in out
    assert "never compute-bound, whatever x: the intensity's ceiling (M -> oo) 100*x/(x + 100) FLOP/B" in out
    assert f"M* = {float(RIDGE):.2f}  (the limit N, K -> oo, not this shape's)" in out


@pytest.mark.parametrize(
    ("flags", "fragment"),
    [
        (["--N", "b"], "--N 'b': the name b is bytes per element in the closed form printed"),
        (["--K", "2*beta"], "--K '2*beta': the name beta is the DRAM bandwidth (B/s)"),
        (["--N", "P"], "--N 'P': the name P is the tensor roof (FLOP/s)"),
        (["--w-dtype", "int8", "--N", "a"], "--N 'a': the name a is activation bytes per element"),
        (["--N", "K"], "--N 'K': the name K is the GEMM's reduction width"),
        (["--K", "N"], "--K 'N': the name N is the GEMM's output width"),
        (["--N", "M"], "--N 'M': the name M is the GEMM's rows, the crossover's unknown"),
        (["--N", "M_real"], "--N 'M_real': the name M_real is the solver's own name for M"),
        (["--N", "2*N"], "--N '2*N': the name N is the GEMM's output width"),
    ],
)
def test_crossover_refuses_a_closed_form_name_before_any_output(capsys, flags, fragment):
    # the "evaluated at" line binds b, P, beta (a, w, o) to the device's numbers: N = b was ambiguous
    code, out, err = run(capsys, "derive", "crossover", *flags)
    assert code == 2 and out == "" and err.count("\n") == 1 and fragment in err
    assert "give a number, or an expression in other names" in err


def test_crossover_states_the_shapes_where_N_is_positive(capsys):
    """N = x - 100 on an H100 in bf16: a crossover where N > 4096 I* / (4096 - I*) = 318.29,
    x > 418.29 (not the root's other branch, x < 100, where N < 0). N = 100 - x is below 100
    wherever it is a width, under 318.29: never compute-bound."""
    code, out, err = run(capsys, "derive", "crossover", "--N", "x-100")
    assert code == 0 and err == "" and "where x > 418.29;" in out
    code, out, err = run(capsys, "derive", "crossover", "--N", "100-x")
    assert code == 0 and "exact M*" not in out and "never compute-bound, whatever x" in out
    code, out, err = run(capsys, "derive", "crossover", "--N", "N", "--K", "K")
    assert code == 0 and "exact M*       = 19788*K*N/(67*K*N - 19788*K - 19788*N)" in out


def test_tile_verdict_holds_only_where_its_sides_are_widths(capsys):
    """t_m = 100 - x is a width for x < 100 only, where 128 t_m / (t_m + 128) < 56 FLOP/B: memory-
    bound whatever x (a review found "compute-bound where x <= 325.9 & 228 < x", where t_m < 0).
    t_m = x, t_n = x - 300: x (x - 300) / (2 (x - 150)) >= I* = 19788/67 from x = 776.59."""
    code, out, _ = run(capsys, "derive", "tile", "--tile-m", "100-x", "--device", "h100")
    assert code == 0 and out.rstrip().endswith("-> memory-bound whatever x")
    code, out, _ = run(capsys, "derive", "tile", "--tile-m", "x", "--tile-n", "x-300", "--device", "h100")
    assert code == 0 and "compute-bound where x >= 776.59, memory-bound elsewhere" in out


def test_tile_reads_the_ridge_at_the_dtypes_roof(capsys):
    """fp8_e4m3 computes on the fp8 roof: an H100's 1,979 / 3.35 = 590.7 FLOP/B (the command read
    a roof named fp8_e4m3 and failed); a 256 x 256 FP8 tile is 2 * 256^2 / (1 * 512) = 256 FLOP/B."""
    code, out, _ = run(
        capsys,
        "derive",
        "tile",
        "--tile-m",
        "256",
        "--tile-n",
        "256",
        "--device",
        "h100",
        "--dtype",
        "fp8_e4m3",
    )
    assert code == 0 and "= 256 FLOP/B; ridge 590.7 -> memory-bound" in out


@pytest.mark.parametrize("side", ["b", "t_m", "t_n"])
def test_tile_refuses_a_closed_form_name(capsys, side):
    code, out, err = run(capsys, "derive", "tile", "--tile-m", side)
    assert code == 2 and out == "" and f"--tile-m '{side}': the name {side} is" in err


def test_tile_with_a_symbolic_side_against_a_device(capsys):
    """``derive tile --tile-m x --device h100`` failed ("value still depends on unbound symbols").
    A square x-by-x bf16 tile: 2 x^2 / (2 (x + x)) = x/2 FLOP/B >= I* where x >= 2 I* = 590.69."""
    code, out, err = run(capsys, "derive", "tile", "--tile-m", "x", "--tile-n", "x", "--device", "h100")
    assert code == 0 and err == ""
    assert f"= x/2 FLOP/B; ridge 295.3 -> compute-bound where x >= {float(2 * RIDGE):.2f}" in out
    data = json.loads(
        run(capsys, "derive", "tile", "--tile-m", "x", "--tile-n", "x", "--device", "h100", "--json")[1]
    )
    assert data["compute_bound"] is None and data["compute_bound_when"] == f"x >= {2 * RIDGE}"
    # x by 128: 128 x / (x + 128) < 128 < 295.34 for every x: memory-bound, a plain answer
    data = json.loads(run(capsys, "derive", "tile", "--tile-m", "x", "--device", "h100", "--json")[1])
    assert data["compute_bound"] is False and "compute_bound_when" not in data


DERIVE_ARGVS = [
    ["crossover", "--N", "x"],
    ["crossover", "--K", "x", "--w-dtype", "int8"],
    ["crossover", "--N", "x", "--K", "y", "--dtype", "fp8"],
    ["crossover", "--N", "2*x"],
    ["crossover", "--N", "x**3"],
    ["crossover", "--N", "100", "--K", "x"],
    ["crossover", "--N", "M"],
    ["crossover", "--N", "1"],
    ["crossover", "--N", "b"],
    ["crossover", "--N", "0"],
    ["crossover", "--dtype", "int4"],
    ["crossover", "--device", "nosuch"],
    ["tile", "--tile-m", "x", "--device", "h100"],
    ["tile", "--tile-m", "x", "--tile-n", "y", "--device", "h100"],
    ["tile", "--device", "tpu-v5e", "--dtype", "fp8"],
    ["decode-attention", "--heads", "x", "--kv-heads", "y"],
    ["decode-attention", "--heads", "4", "--kv-heads", "8"],
    ["balance", "h100", "nosuch"],
]


@pytest.mark.parametrize("argv", DERIVE_ARGVS, ids=[" ".join(a) for a in DERIVE_ARGVS])
def test_derive_prints_a_whole_report_or_only_an_error(capsys, argv):
    """No option value makes ``derive`` fail after printing part of its report."""
    code, out, err = run(capsys, "derive", *argv)
    assert (code == 0 and err == "" and out) or (code == 2 and out == "" and err.count("\n") == 1), (
        code,
        out,
        err,
    )


def test_op_prices_a_narrow_gemm_as_derive_and_the_graphs_do(capsys):
    """A review priced `op gemm ... dtype=fp8` with an fp8 output (50.33 MB for 4096^3) where the
    model graphs' same GEMM writes bf16 (67.11 MB) and `derive crossover --dtype fp8` puts M* at
    376.89 while op called M = 346 compute-bound. Hand count, 4096^3: A and B 16.78 MB each in
    fp8, C 33.55 MB in bf16 = 67.11 MB; the crossover is derive's, said once."""
    assert main(["--json", "op", "gemm", "M=4096", "N=4096", "K=4096", "dtype=fp8"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["cost"]["bytes_read"]["dram"] == 2 * 4096 * 4096  # A and B, one byte each
    assert doc["cost"]["bytes_written"]["dram"] == 2 * 4096 * 4096  # C, two bytes each
    assert any("out_dtype=bf16 assumed" in n for n in doc["notes"])
    for m, kind in ((376, "dram"), (377, "tensor")):
        assert main(["op", "gemm", f"M={m}", "N=4096", "K=4096", "dtype=fp8", "--device", "h100"]) == 0
        out = capsys.readouterr().out
        assert f"bound      : {kind}" in out and out.count("out_dtype=bf16 assumed") == 1
    assert main(["op", "gemm", "M=4096", "N=4096", "K=4096", "dtype=fp8", "out_dtype=fp8"]) == 0
    assert "assumed" not in capsys.readouterr().out


def test_decode_explains_its_weight_read_and_ceiling_by_the_numbers_it_prints(capsys):
    """A review read "the graph reads 737.81 us of weights because the input-embedding table is
    gathered, not streamed" beside "every weight once takes 737.80 us" (Llama-3.2-1B ties its
    embedding to the lm_head, which streams it: the graph reads more, not less), and a
    compute-bound "throughput ceiling" its own TPOT never reached without the upper-bound caveat
    the memory-bound line carries."""
    assert main(["decode", "llama-3.2-1b", "--batch", "8", "--ctx", "4096"]) == 0
    out = capsys.readouterr().out
    assert "tied to the lm_head, which streams it whole" in out and "gathered, not streamed" not in out
    assert main(["decode", "llama-3.1-8b", "--batch", "8", "--ctx", "4096"]) == 0
    assert "is gathered, not streamed" in capsys.readouterr().out  # untied: the rows alone
    assert main(["decode", "llama-3.1-8b", "--batch", "8", "--ctx", "128"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if "throughput ceiling" in x)
    assert "an upper bound the per-kernel TPOT above does not reach" in line


def test_rules_text_lists_every_parameter_the_json_lists(capsys):
    """``rules`` printed only each rule's required parameters while ``--json`` listed them all:
    the text now adds the optional ones with their defaults, each as the rule's own signature
    has it, and ``op`` takes a default as printed (gemm at dtype=bf16 is gemm)."""
    import inspect

    from costmodel.rules import get_rule

    text = run(capsys, "rules")[1]
    doc = json.loads(run(capsys, "rules", "--json")[1])
    block = text.split("\ngemm ", 1)[1].split("\ngrouped_gemm ", 1)[0]
    sig = inspect.signature(get_rule("gemm").fn).parameters
    assert "required: M, N, K" in block
    optional = " ".join(block.split("optional: ", 1)[1].split())
    shown = {False: "false", None: "(derived)"}  # op takes no 'None': a derived default says so
    wanted = ", ".join(f"{k}={shown.get(p.default, p.default)}" for k, p in sig.items() if k not in "MNK")
    assert (
        optional
        == wanted
        == (
            "dtype=bf16, w_dtype=(derived), out_dtype=(derived), compute_dtype=(derived), bias=false, "
            "tile_m=(derived), tile_n=(derived)"
        )
    )
    assert run(capsys, "op", "gemm", "M=1", "N=1", "K=1", "w_dtype=None")[0] == 2  # why not 'None'
    for name, info in doc.items():  # the JSON: every parameter, required or optional with its default
        assert sorted(info["parameters"]) == sorted([*info["required"], *info["optional"]]), name
    assert doc["gemm"]["optional"]["dtype"] == "bf16" and doc["gemm"]["optional"]["bias"] is False
    a = json.loads(run(capsys, "op", "gemm", "M=8", "N=64", "K=32", "--json")[1])
    b = json.loads(run(capsys, "op", "gemm", "M=8", "N=64", "K=32", "dtype=bf16", "bias=false", "--json")[1])
    assert a["cost"] == b["cost"]


def test_format_table_pads_by_terminal_cells_and_aligns_text_left():
    """Widths count terminal cells: a two-character Chinese name takes four, as "h100" does, so
    the number after each ends in the same column; ``left`` columns start in one."""
    from costmodel.text import format_table

    rows = [{"n": "h100", "v": 1.5, "d": "x"}, {"n": "\u6d4b\u8bd5", "v": 22.25, "d": "longer text"}]
    out = format_table(rows, (("n", "name", "s"), ("v", "value", ".2f"), ("d", "what", "s")), left=("d",))
    assert out.splitlines() == [
        "name  value  what",
        "----  -----  -----------",
        "h100   1.50  x",
        "\u6d4b\u8bd5  22.25  longer text",
    ]
