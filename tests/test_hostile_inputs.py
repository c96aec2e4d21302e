"""Every reproducer of a hang, a traceback or silently wrong output: now a one-line error naming
the flag or field (exit 2), or a correct result, with no hang and no work done first."""

import importlib
import json

import pytest

from graphs.cli import main

from .test_fuzz import LIMIT_S, time_limit


@pytest.fixture
def files(tmp_path):
    (tmp_path / "zero_bw.toml").write_text(
        '[devices.zbw]\nroofs = [{ unit = "tensor", precision = "bf16", peak_flops_per_s = 1e15 }]\n'
        'memory = [{ name = "dram", bandwidth_bytes_per_s = 0, capacity_bytes = 80e9 }]\n'
    )
    (tmp_path / "inf_cap.toml").write_text(
        '[devices.infcap]\nroofs = [{ unit = "tensor", precision = "bf16", peak_flops_per_s = 1e15 }]\n'
        'memory = [{ name = "dram", bandwidth_bytes_per_s = 3e12, capacity_bytes = "1e999" }]\n'
    )
    (tmp_path / "huge.toml").write_text(
        '[devices.huge]\nroofs = [{ unit = "tensor", precision = "bf16", peak_flops_per_s = "9**9**9" }]\n'
        'memory = [{ name = "dram", bandwidth_bytes_per_s = 3e12, capacity_bytes = 80e9 }]\n'
    )
    (tmp_path / "symbolic.toml").write_text(
        '[devices.symbox]\nroofs = [{ unit = "tensor", precision = "bf16", peak_flops_per_s = 1e15, source = "a sheet" }]\n'
        'memory = [{ name = "dram", bandwidth_bytes_per_s = "abc", capacity_bytes = 80e9, source = "a sheet" }]\n'
    )
    (tmp_path / "deep.json").write_text("[" * 2000 + "]" * 2000)
    roof = '[{ unit = "tensor", precision = "bf16", peak_flops_per_s = 1e15, source = "a sheet" }]'
    dram = '[{ name = "dram", bandwidth_bytes_per_s = 3e12, capacity_bytes = 80e9, source = "a sheet" }]'
    # a number or one table where a list of tables goes (once a TypeError: iterated), an enum's
    # repr in the allowed units, a control character in an alias (once accepted and resolved)
    (tmp_path / "mem_int.toml").write_text(f"[devices.box]\nroofs = {roof}\nmemory = 5\n")
    (tmp_path / "mem_table.toml").write_text(f'[devices.box]\nroofs = {roof}\nmemory = {{ name = "dram" }}\n')
    (tmp_path / "links_int.toml").write_text(f"[devices.box]\nroofs = {roof}\nmemory = {dram}\nlinks = 5\n")
    (tmp_path / "cap1.toml").write_text(
        f'[devices.box]\nroofs = {roof}\nmemory = [{{ name = "dram", bandwidth_bytes_per_s = 3e12, '
        'capacity_bytes = 1, source = "a sheet" }]\n'
    )
    (tmp_path / "unit.toml").write_text(
        '[devices.box]\nroofs = [{ unit = "tensr", precision = "bf16", peak_flops_per_s = 1e15, '
        f'source = "a sheet" }}]\nmemory = {dram}\n'
    )
    (tmp_path / "alias.toml").write_text(
        f'[devices.box]\nroofs = {roof}\nmemory = {dram}\naliases = ["\\u001b[31mred"]\n'
    )
    digits = "9" * 5000
    (tmp_path / "config.json").write_text(
        '{"model_type": "llama", "hidden_size": ' + digits + ', "num_hidden_layers": 2, '
        '"num_attention_heads": 4, "intermediate_size": 176, "vocab_size": 256}'
    )
    return tmp_path


RAW = ["ledger", "--weights-bytes", "14e9", "--kv-bytes-per-token", "1000", "--ctx", "4096"]

# argv -> a fragment the single error line must contain (the flag or field it names)
REFUSED = [
    (["op", "gemm", "M=9**9**9", "N=1", "K=1"], "exponent 387420489 is out of range"),
    (["derive", "crossover", "--N", "10**(10**7)"], 'N "10**(10**7)": exponent'),
    # an index or mask type is no tensor format (it priced as 1 byte a value: 14 FLOP/B, as fp8)
    (["derive", "decode-attention", "--dtype", "bool"], "--dtype 'bool': bool is not a format"),
    (["derive", "tile", "--dtype", "bool"], "--dtype 'bool': bool is not a format"),
    (["derive", "crossover", "--w-dtype", "int32"], "--w-dtype 'int32': int32 is not a format"),
    ([*RAW, "--capacity-bytes", "9**9**9"], "--capacity-bytes"),
    (["--hw-file", "{d}/huge.toml", "hw", "show", "huge"], "peak_flops_per_s"),
    # a bare name keeps a device symbolic: a numeric command names its file, device and field
    (
        ["--hw-file", "{d}/symbolic.toml", "decode", "llama-3.1-8b", "--device", "symbox"],
        "symbolic.toml: device 'symbox' memory dram.bandwidth_bytes_per_s = abc",
    ),
    (  # once a NameError from a compiled form (an internal error)
        ["--hw-file", "{d}/symbolic.toml", "prefill", "llama-3.1-8b", "--device", "symbox"],
        "--device symbox: ",
    ),
    (
        ["--hw-file", "{d}/symbolic.toml", "search", "llama-3.1-8b", "--device", "symbox"],
        "search needs numbers",
    ),
    (["fusion", "tiling", "--sram-bytes", "1e18"], "--sram-bytes must be in"),
    (["serve", "specdec", "llama-3.1-8b", "tiny", "--k-max", "2147483648"], "--k-max must be in [1, 256]"),
    (["op", "gemm", "M=1e999", "N=1", "K=1"], 'M "1e999": inf is not a finite number'),
    ([*RAW, "--capacity-bytes", "nan"], '--capacity-bytes "nan": nan is not a finite number'),
    ([*RAW, "--capacity-bytes", "(-1)**0.5"], "not a real number"),
    (
        ["ledger", "--weights-bytes", "B", "--kv-bytes-per-token", "1", "--capacity-bytes", "8e10"],
        "--weights-bytes",
    ),
    (["hw", "claim", "--old", "h100:fp8:0", "--new", "b300:fp4:72"], "COUNT must be a positive"),
    (["hw", "claim", "--old", "h100:fp8:x", "--new", "b300:fp4:72"], "DEVICE:PRECISION[:COUNT]"),
    (["hw", "claim", "--old", "h100:fp8:-1", "--new", "b300:fp4:72"], "DEVICE:PRECISION[:COUNT]"),
    (["fusion", "tiling", "--d", "0"], "--d must be in [1, 65536], got 0"),
    (["serve", "disagg", "llama-2-7b", "--rate", "inf"], "--rate must be a finite number"),
    (["serve", "disagg", "llama-2-7b", "--link-latency", "nan", "--json"], "--link-latency must be a finite"),
    (["serve", "plans", "mixtral-8x7b", "--plans", "axbxcxd"], "--plans: 'axbxcxd'"),
    (["sweep", "tiny", "--batches", "1:2"], "--batches: range '1:2' must be START:STOP:FACTOR"),
    (["--hw-file", "{d}/zero_bw.toml", "hw", "show", "zbw"], "bandwidth_bytes_per_s must be a positive"),
    (["--hw-file", "{d}/inf_cap.toml", "hw", "show", "infcap"], "capacity_bytes"),
    (["--hw-file", "{d}/deep.json", "hw", "list"], "nested too deeply"),
    (["--hw-file", "{d}/mem_int.toml", "hw", "list"], "device 'box'.memory must be a list of tables, got int"),
    (["--hw-file", "{d}/mem_table.toml", "hw", "list"], "device 'box'.memory must be a list of tables, got dict"),
    (["--hw-file", "{d}/links_int.toml", "hw", "list"], "device 'box'.links must be a list of tables, got int"),
    (["--hw-file", "{d}/unit.toml", "hw", "list"], "roof unit 'tensr' not allowed; allowed: tensor, vector, sfu"),
    (["--hw-file", "{d}/alias.toml", "hw", "list"], "device 'box'.aliases: '\\x1b[31mred' must be a name of printable"),
    (  # the pool's total is negative: it says why (it said only "90% of -0.5 GB")
        ["--hw-file", "{d}/cap1.toml", "simulate", "llama-3.2-1b", "--device", "box", "--rate", "1", "--requests", "2"],
        "90% of -0.5 GB (the device's 1.00 B less the driver's 458.98 MB)",
    ),
    (["model", "analyze", "{d}/config.json"], "out of range"),
    (["sweep", "tiny", "--csv", "{d}/missing/x.csv"], "--csv"),
    (["plot", "headroom", "--out", "{d}/missing/x.png"], "--out"),
    (["probe", "--small", "--out", "{d}/missing/p.json"], "--out"),
    (["op", "gemm", "M=10**400", "N=1", "K=1", "--json"], "out of range"),
]


@pytest.mark.parametrize(("argv", "fragment"), REFUSED, ids=[" ".join(a)[:60] for a, _ in REFUSED])
def test_refused_with_one_line(capsys, monkeypatch, files, argv, fragment):
    def no_probe(**kwargs):
        raise AssertionError("the machine was probed before the refusal")

    # `probe --out` checks its path first (the package's `probe` attribute is the function)
    monkeypatch.setattr(importlib.import_module("costmodel.measure.probe"), "probe", no_probe)
    argv = [a.replace("{d}", str(files)) for a in argv]
    with time_limit(LIMIT_S):  # a hang guard, not a speed claim: the old hangs never returned
        code = main(argv)
    out = capsys.readouterr()
    lines = [ln for ln in out.err.splitlines() if ln.strip() and not ln.startswith("  ..")]
    assert code == 2, (code, out.err)
    assert len(lines) == 1 and "Traceback" not in out.err, out.err
    assert fragment in lines[0], lines[0]
    assert not (files / "missing").exists()  # nothing written outside the requested path


@pytest.mark.parametrize("model", ["mixtral-8x7b", "deepseek-v3"])
def test_moe_models_decode(capsys, model):
    code = main(["decode", model, "--json", "--ignore-capacity"])  # neither fits one H100
    data = json.loads(capsys.readouterr().out)
    assert code == 0 and data["limits"]["throughput_ceiling_tokens_per_s"] > 0


class _ClosedPipe:
    def write(self, text):
        raise BrokenPipeError(32, "Broken pipe")

    def flush(self):
        raise BrokenPipeError(32, "Broken pipe")


def test_a_closed_pipe_is_not_a_traceback(monkeypatch, capsys):
    monkeypatch.setattr("sys.stdout", _ClosedPipe())
    assert main(["report", "--json"]) == 141  # like a process killed by SIGPIPE: 128 + 13


def _refuse_constant(name):
    raise AssertionError(f"{name} is not JSON")


def test_json_output_is_strict_json(capsys):
    """Infinite or undefined values become null: every --json output parses with a strict parser."""
    for argv in (
        ["fusion", "tiling", "--json"],
        [
            "serve",
            "disagg",
            "llama-2-7b",
            "--rate",
            "1000",
            "--json",
            "--ignore-capacity",
            "--allow-long-context",
        ],
    ):
        assert main(argv) == 0
        json.loads(capsys.readouterr().out, parse_constant=_refuse_constant)
    # a prefill's last-token view moves no bytes: its intensity is infinite, and prints as null
    assert main(["model", "analyze", "tiny", "--phase", "prefill", "--seq", "64", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out, parse_constant=_refuse_constant)["rows"]
    assert any(r["node"] == "head.last_token" and r["intensity"] is None for r in rows)


def test_loops_a_user_controls_are_bounded(capsys):
    import networkx as nx

    from costmodel.errors import CostModelError
    from costmodel.graph import expand

    code = main(["prefill", "tiny", "--seq", "100000000", "--chunk", "1", "--allow-long-context"])
    assert code == 2 and "at most 1000000" in capsys.readouterr().err
    g = nx.DiGraph(groups={"layers": {"repeat": 10**9, "entry": [], "exit": "x"}})
    with pytest.raises(CostModelError, match="unrolls 0 to 100000 copies"):
        expand(g)


def test_a_sweep_too_large_for_memory_is_refused_before_work(capsys, monkeypatch):
    def no_work(*args, **kwargs):
        raise AssertionError("the sweep compiled a configuration before refusing the grid")

    monkeypatch.setattr("graphs.serving.analysis.sweeps.compile_decode", no_work)
    batches = ",".join(str(i) for i in range(1, 10001))
    ctxs = ",".join(str(i) for i in range(1, 5001))
    code = main(["sweep", "tiny", "--batches", batches, "--ctxs", ctxs, "--quiet"])
    assert code == 2 and "50,000,000 points" in capsys.readouterr().err


@pytest.mark.parametrize("name", ["nan", "NaN", "inf", "Infinity", "oo", "zoo"])
def test_a_name_that_reads_as_a_non_finite_number_is_no_dimension(capsys, name):
    """``op gemm M=nan`` printed "FLOPs : 32*nan" and ``M=oo`` "T >= 4.776 ps*oo" (a review found
    them): such names were taken as symbols; now refused, naming the field. ``M=B`` stays a
    dimension."""
    assert main(["op", "gemm", f"M={name}", "N=4", "K=4"]) == 2
    err = capsys.readouterr().err
    assert f'M "{name}": {name} is not a finite number' in err and err.count("\n") == 1
    assert main(["op", "gemm", "M=B", "N=4", "K=4"]) == 0 and "32*B" in capsys.readouterr().out


def test_a_symbolic_device_is_shown_as_written(files, capsys):
    """``hw show`` of a --hw-file device kept symbolic printed an internal error (a review found
    it: the symbol reached the SI formatter); it shows the value as written, and ``op`` still
    prints the bound with the symbol."""
    d = str(files)
    assert main(["--hw-file", f"{d}/symbolic.toml", "hw", "show", "symbox"]) == 0
    assert "bw          abc" in capsys.readouterr().out
    assert (
        main(["--hw-file", f"{d}/symbolic.toml", "op", "gemm", "M=B", "N=4", "K=4", "--device", "symbox"])
        == 0
    )
    assert "abc" in capsys.readouterr().out


def test_a_name_with_controls_is_refused_and_no_page_holds_one(tmp_path, capsys):
    """A review wrote a layer file named 'evil<ESC>[31mRED<BEL><script>' and 'line1\\nline2':
    the terminal escaped ESC but printed the newline (a forged line), and --html wrote ESC and BEL
    raw into the page's title (an SVG of them did not parse). Names are printable text, refused
    otherwise naming the field (layer files, --hw-file devices, probe --name); a page never holds
    a control character whatever reaches it."""
    from costmodel.errors import CostModelError
    from costmodel.html import write_html
    from costmodel.measure.probe_report import ProbeRequest

    layer = json.loads(open("examples/hybrid-layers.json").read())
    for bad in ("evil\x1b[31mRED\x07<script>", "line1\nline2", "tab\there", "rtl\u202eoverride"):
        f = tmp_path / "lf.json"
        f.write_text(json.dumps({**layer, "name": bad}))
        assert main(["decode", str(f)]) == 2
        assert "field 'name' must be a non-empty string of printable characters" in capsys.readouterr().err
    hw = tmp_path / "hw.toml"
    hw.write_text(
        '[devices.box]\ndescription = "my\\nbox"\nroofs = [{unit = "tensor", precision = "bf16", '
        'peak_flops_per_s = 1e15, source = "a sheet"}]\nmemory = [{name = "dram", bandwidth_bytes_per_s = 1e12, '
        'capacity_bytes = 8e10, source = "a sheet"}]\n'
    )
    assert main(["--hw-file", str(hw), "hw", "show", "box"]) == 2
    assert "description must be text of printable characters" in capsys.readouterr().err
    with pytest.raises(CostModelError, match="--name must name the device in printable characters"):
        ProbeRequest(name="a\nb")
    page = write_html(tmp_path / "p.html", "<title>a\x1bb\x07</title>\n")
    assert page.read_text() == "<title>a\\x1bb\\x07</title>\n"


def test_every_hardware_text_printed_on_a_line_is_printable(tmp_path, capsys):
    """An independent review forged `hw show` lines through a --hw-file source text, notes and
    architecture holding a newline ('... [forged' / 'price 0.001 USD per device-hour'): every
    text the file gives that prints on a line is refused with a newline or control in it."""
    base = (
        '[sources]\ns = "a sheet"\n[devices.box]\nroofs = [{unit = "tensor", precision = "bf16", '
        'peak_flops_per_s = 1e15, source = "s"}]\nmemory = [{name = "dram", bandwidth_bytes_per_s = 1e12, '
        'capacity_bytes = 8e10, source = "s"}]\n'
    )
    for extra, what in (
        ('notes = "x\\n  price 0.001 USD per device-hour"\n', "notes must be text"),
        ('architecture = "Hop\\nper"\n', "architecture must be text"),
    ):
        f = tmp_path / "hw.toml"
        f.write_text(base + extra)
        assert main(["--hw-file", str(f), "hw", "show", "box"]) == 2
        assert what in capsys.readouterr().err
    f.write_text(base.replace('s = "a sheet"', 's = "sheet]\\n  price 0.001 USD per device-hour  [forged"'))
    assert main(["--hw-file", str(f), "hw", "show", "box"]) == 2
    assert "must be text of printable characters" in capsys.readouterr().err


def test_the_library_prefill_ledger_holds_its_prompt():
    """The review's library call: capacity(..., ctx=4096, phase='prefill', seq=32768) held 4,096
    tokens of KV beside 32,768 of activations (max batch 19, where the prompt's own KV gives 9)."""
    from costmodel.errors import CostModelError
    from graphs import capacity

    with pytest.raises(CostModelError, match="ctx 4096 is below seq 32768"):
        capacity("llama-3.1-8b", "h100", batch=1, ctx=4096, phase="prefill", seq=32768)
    assert capacity("llama-3.1-8b", "h100", batch=1, ctx=32768, phase="prefill", seq=32768).max_batch.value == 9


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        ({"torch_dtype": "float32", "dtype": "bfloat16"}, "torch_dtype 'float32' and dtype 'bfloat16' disagree"),
        ({"model_type": "gemma3", "text_config": "not a dict"}, "config field 'text_config' must be an object"),
    ],
)
def test_a_config_that_contradicts_itself_is_refused(tmp_path, capsys, change, fragment):
    """A review: torch_dtype float32 beside dtype bfloat16 was read as float32 without a word
    (8.961 ms of weight read, 4.481 swapped); a text_config that is a string said a required
    field was missing."""
    cfg = json.loads(open("models/configs/llama-3.1-8b.json").read())
    f = tmp_path / "c.json"
    f.write_text(json.dumps({**cfg, **change}))
    assert main(["decode", str(f)]) == 2
    assert fragment in capsys.readouterr().err
    f.write_text(json.dumps({**cfg, "torch_dtype": "bfloat16", "dtype": "torch.bfloat16"}))
    assert main(["decode", str(f)]) == 0


def test_a_config_of_no_context_limit_says_it_is_not_checked(tmp_path, capsys):
    """A review: a config with no max_position_embeddings took --ctx 10,000,000 without a word
    (HF's LlamaConfig would default it to 2,048). The check cannot run; the output says so once."""
    cfg = json.loads(open("models/configs/llama-3.1-8b.json").read())
    cfg.pop("max_position_embeddings")
    cfg.pop("rope_scaling", None)
    f = tmp_path / "nomax.json"
    f.write_text(json.dumps(cfg))
    assert main(["decode", str(f), "--ctx", "1000"]) == 0
    err = capsys.readouterr().err
    assert err.count("states no max_position_embeddings: --ctx is not checked") == 1


def test_an_engine_with_an_empty_version_is_refused(capsys):
    """A review: --engine vllm@ (an empty version) ran as vllm@1 without a word."""
    assert main(["simulate", "llama-3.1-8b", "--engine", "vllm@", "--requests", "5"]) == 2
    assert "names no version after '@'" in capsys.readouterr().err


def test_an_empty_html_path_is_refused(capsys):
    """A review: decode --html '' wrote no page and said nothing (plot --out '' is refused)."""
    assert main(["decode", "llama-3.1-8b", "--html", ""]) == 2
    assert "--html: give a file path, got an empty one" in capsys.readouterr().err
