"""`costmodel op` and the expressions it reads: every input a review found priced wrong, hanging or
failing with an internal error is refused in one line naming the parameter, or answered."""

import json
import re

import pytest

from costmodel.errors import ExpressionSyntaxError
from costmodel.expr import MAX_DEGREE, MAX_TERMS, parse_expr
from graphs.cli import main


def run(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def one_line_error(capsys, *argv) -> str:
    code, _out, err = run(capsys, *argv)
    assert code == 2, (code, err)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("(x+1)**1000", "degree 1000 is too high"),  # op gemm spun >10 min in simplify
        ("(x+1)**100", "degree 100 is too high"),  # derive crossover --N: >60 s
        ("x**9", "degree 9 is too high"),
        ("1/(x+1)**20", "degree 20 is too high"),
        ("((x+1)**8)**8", "degree 64 is too high"),
        # names no engine symbol uses (a, k, w ... are quantities elsewhere: one process, one kind)
        ("(x1+x2+x3+x4+x5+x6+x7+x8+x9+x10+x11+x12)**2", "expands to 78 terms"),
    ],
)
def test_an_expression_too_large_for_symbolic_work_is_refused(text, fragment):
    with pytest.raises(ExpressionSyntaxError, match=r"^M ") as info:
        parse_expr(text, field="M")
    assert fragment in str(info.value)


def test_expressions_within_the_bounds_still_parse():
    assert parse_expr("B*S*ctx + 1") == parse_expr("ctx*S*B + 1")
    assert parse_expr("(x+1)**8").free_symbols == parse_expr("x").free_symbols
    assert parse_expr("2**900 / 2**899") == 2  # numbers have no degree
    assert MAX_DEGREE == 8 and MAX_TERMS == 64


def test_caret_is_said_not_to_be_a_power(capsys):
    line = one_line_error(capsys, "op", "gemm", "M=2^3", "N=4", "K=4")
    assert 'M "2^3": ^ is not a power here; write **' in line and "BinOp" not in line


def test_a_huge_symbolic_gemm_is_refused_at_once(capsys):
    line = one_line_error(capsys, "op", "gemm", "M=(x+1)**1000", "N=4", "K=4")
    assert 'M "(x+1)**1000": degree 1000 is too high (at most 8 in its names)' in line
    line = one_line_error(capsys, "derive", "crossover", "--N", "(x+1)**100")
    assert 'N "(x+1)**100": degree 100' in line


def test_a_result_beyond_a_float_is_refused(capsys):
    """``gemm M=N=K=10**300`` printed ``t[tensor] = inf us`` (and null FLOPs with --json); the
    check is the library's (:func:`costmodel.report.op_roofline`), so Python is refused alike."""
    from costmodel.errors import CostModelError
    from costmodel.report import op_roofline

    words = "op gemm M=1.00e+300 N=1.00e+300 K=1.00e+300: FLOPs on tensor/bf16 = 2.00E+900 is beyond"
    argv = ["op", "gemm", "M=10**300", "N=10**300", "K=10**300"]
    for extra in ([], ["--json"]):
        line = one_line_error(capsys, *argv, *extra)
        assert words in line
    with pytest.raises(CostModelError, match=re.escape(words)):
        op_roofline("gemm", M=10**300, N=10**300, K=10**300)


@pytest.mark.parametrize(
    "argv",
    [
        ["attention", "heads=32", "q_len=4096", "kv_len=4096", "head_dim=128", "causal=no"],
        ["attention", "heads=32", "q_len=1", "kv_len=4096", "head_dim=128", "kv_shared=3"],
        ["causal_conv1d", "tokens=10", "channels=10", "width=4", "bias=no"],
        ["causal_conv1d", "tokens=10", "channels=10", "width=4", "activation=none"],
        ["batched_gemm", "batch=2", "M=4", "N=4", "K=4", "shared_rhs=maybe"],
    ],
)
def test_a_boolean_parameter_takes_only_true_or_false(capsys, argv):
    """Any word but true/false became a symbol that counted as true (``causal=no`` priced causal)."""
    key, value = argv[-1].split("=")
    line = one_line_error(capsys, "op", *argv)
    assert f"op {argv[0]}: {key}={value!r} is not a boolean; {key} takes true or false" in line


def test_a_boolean_parameter_reads_true_false_one_and_zero(capsys):
    base = ["op", "attention", "heads=32", "q_len=4096", "kv_len=4096", "head_dim=128"]
    flops = {}
    for word in ("true", "1", "False", "0"):
        assert main([*base, f"causal={word}", "--json"]) == 0
        flops[word] = json.loads(capsys.readouterr().out)["cost"]["flops"]
    assert flops["true"] == flops["1"] != flops["False"] == flops["0"]


def test_a_string_parameter_of_a_rule_is_passed_as_text(capsys):
    """``state`` and ``mode`` were parsed as expressions ("state write not allowed; allowed: ('write',
    'read_write')")."""
    assert main(["op", "causal_conv1d", "tokens=10", "channels=10", "width=4", "state=read_write"]) == 0
    assert "state=read_write" in capsys.readouterr().out
    for rule in (
        ["selective_scan", "tokens=64", "heads=8", "head_dim=64", "state_size=16"],
        ["gated_delta_rule", "tokens=64", "key_heads=4", "value_heads=8", "key_dim=64", "value_dim=64"],
    ):
        assert main(["op", *rule, "mode=recurrent"]) == 0
        assert "mode=recurrent" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        ("M=E", "M=E: the name E is the engine's alias of num_experts (it would print as num_experts)"),
        ("M=k", "M=k: the name k is the engine's alias of num_experts_per_tok"),
        ("M=2*tokens", "M=2*tokens: the name tokens is the engine's alias of T"),
        ("M=N", "M=N: N is also a parameter of gemm"),
        ("M=K+1", "M=K+1: K is also a parameter of gemm"),
    ],
)
def test_a_name_that_would_change_meaning_is_refused(capsys, value, fragment):
    """``M=E`` printed num_experts, ``M=N N=4096`` mixed the user's symbol N with the parameter N."""
    line = one_line_error(capsys, "op", "gemm", value, "N=4096", "K=4096")
    assert f"op gemm: {fragment}" in line


def test_a_name_of_ones_own_stays(capsys):
    assert main(["op", "gemm", "M=M", "N=4096", "K=4096"]) == 0
    assert "gemm(M=M, N=4096, K=4096)" in capsys.readouterr().out
    assert main(["op", "gemm", "M=x*B", "N=4096", "K=4096"]) == 0
    assert "33554432*B*x" in capsys.readouterr().out


def test_a_parameter_given_twice_is_refused(capsys):
    line = one_line_error(capsys, "op", "gemm", "M=1", "M=4096", "N=4096", "K=4096")
    assert "op gemm: parameter M given twice (M=1 and M=4096); give it once" in line


@pytest.mark.parametrize(
    "argv", [["view", "elements=10"], ["all_reduce", "elements=1e9", "p=1"]], ids=["view", "all_reduce"]
)
def test_an_op_that_moves_nothing_prints_its_result(capsys, argv):
    """Text mode printed the FLOPs, then "error: intensity undefined ... <Level.DRAM: 'dram'>"."""
    code, out, err = run(capsys, "op", *argv)
    assert code == 0 and err == ""
    assert "intensity  : undefined (no DRAM bytes)" in out and "bound      : none" in out
    assert "Level." not in out
    assert main(["op", *argv, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["bound"]["kind"] == "none"


def test_a_substituted_roof_is_said_once(capsys):
    """``op gemm --device groq-lpu`` priced bf16 on the fp16 roof and said nothing (decode says it)."""
    argv = ["op", "gemm", "M=4096", "N=4096", "K=4096", "--device", "groq-lpu"]
    code, out, _ = run(capsys, *argv)
    note = "groq-lpu publishes no tensor bf16 rate: its bf16 matmuls are bounded by the fp16 roof"
    assert code == 0 and out.count(note) == 1
    assert "vector roof" not in out  # a GEMM has no vector FLOPs: that note is not this op's
    assert main([*argv, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert any(note in n for n in data["notes"])
    # its sensitivity is to the roof that bounds it (it was an error: no bf16 roof)
    assert data["sensitivities"]["tensor"]["elasticity"] == -1
    assert main(["op", "gemm", "M=4096", "N=4096", "K=4096"]) == 0
    assert "note:" not in capsys.readouterr().out  # h100 publishes its bf16 rate


def test_a_narrow_gemm_still_writes_bf16(capsys):
    assert main(["op", "gemm", "M=4096", "N=4096", "K=4096", "dtype=fp8"]) == 0
    assert "note: out_dtype=bf16 assumed" in capsys.readouterr().out


def test_intensity_of_nothing_names_the_level_plainly():
    from costmodel.errors import CostModelError
    from costmodel.rules import op_cost

    with pytest.raises(CostModelError, match=r"moves no bytes at level dram$"):
        _ = op_cost("view", elements=parse_expr("10")).intensity


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (  # priced negative FLOPs: an internal error
            ["lightning_indexer", "heads=4", "q_len=100", "kv_len=10", "head_dim=64", "causal=true"],
            "lightning_indexer: causal needs q_len <= kv_len (queries are the last positions), got q_len=100, kv_len=10",
        ),
        (
            ["topk", "rows=1", "elements=10", "k=100"],
            "topk: k=100 is more than a row's elements (elements/rows = 10/1); give k <= 10, or pad=true",
        ),
        (
            ["rope", "tokens=8", "heads=4", "head_dim=128", "rotary_dim=1000"],
            "rope: rotary_dim must be at most head_dim (it rotates a head's first channels), got rotary_dim=1000, head_dim=128",
        ),
        (
            ["grouped_gemm", "tokens=8", "experts=8", "top_k=2", "N=64", "K=64", "experts_read=100"],
            "grouped_gemm: experts_read must be at most experts, got experts_read=100, experts=8",
        ),
        (  # 2 tokens x top-2 read at most 4 distinct experts, not 5 (of 8)
            ["grouped_gemm", "tokens=2", "experts=8", "top_k=2", "N=64", "K=64", "experts_read=5"],
            "grouped_gemm: experts_read must be at most tokens*top_k (the distinct experts the tokens can "
            "read), got experts_read=5, tokens=2, top_k=2",
        ),
        (
            ["selective_scan", "tokens=8", "heads=8", "head_dim=64", "state_size=16", "groups=3"],
            "selective_scan: heads must be a multiple of groups (each group serves heads/groups heads), got heads=8, groups=3",
        ),
        (
            ["selective_scan", "tokens=8", "heads=8", "head_dim=64", "state_size=16", "groups=16"],
            "got heads=8, groups=16",
        ),
        (
            ["causal_conv1d", "tokens=10", "channels=10", "width=4", "state=read"],
            "causal_conv1d: state 'read' not allowed; allowed: write, read_write",
        ),
        (
            ["selective_scan", "tokens=8", "heads=8", "head_dim=64", "state_size=16", "mode=fast"],
            "selective_scan: mode 'fast' not allowed; allowed: recurrent, chunked",
        ),
        (
            ["attention", "heads=8", "q_len=1", "kv_len=8", "head_dim=64", "variant=paged"],
            "attention: variant 'paged' not allowed; allowed: naive, flash",
        ),
    ],
)
def test_an_impossible_shape_is_refused_by_its_rule(capsys, argv, fragment):
    """These were priced (or failed on negative FLOPs); the allowed values print as a plain list."""
    assert fragment in one_line_error(capsys, "op", *argv)


@pytest.mark.parametrize(
    "argv",
    [
        ["topk", "rows=1", "elements=10", "k=100", "pad=true"],  # DeepSeek's indexer: k slots a row
        ["topk", "rows=1", "elements=ctx", "k=2048"],
        ["rope", "tokens=8", "heads=4", "head_dim=128", "rotary_dim=64"],
        ["rope", "tokens=8", "heads=4", "head_dim=128", "rotary_dim=r"],
        ["grouped_gemm", "tokens=8", "experts=8", "top_k=2", "N=64", "K=64", "experts_read=8"],
        ["grouped_gemm", "tokens=2", "experts=8", "top_k=2", "N=64", "K=64", "experts_read=4"],
        ["selective_scan", "tokens=8", "heads=8", "head_dim=64", "state_size=16", "groups=g"],
        ["lightning_indexer", "heads=4", "q_len=q", "kv_len=10", "head_dim=64", "causal=true"],
    ],
)
def test_possible_and_symbolic_shapes_still_price(capsys, argv):
    assert main(["op", *argv]) == 0, capsys.readouterr().err


def test_op_json_carries_the_texts_notes_under_notes(capsys):
    """``op --json`` carried an assumed out_dtype under ``"note"`` (a string) and the device's
    roof substitutions under ``"roof_notes"``, each only when said, where ``decode --json`` and
    ``simulate --json`` carry every note as one ``"notes"`` list. It is now ``"notes"``: the
    text's ``note:`` lines, in the text's order, and ``[]`` when the text says none."""
    argv = ["op", "gemm", "M=4096", "N=4096", "K=4096", "dtype=fp8", "--device", "rubin"]
    code, out, _ = run(capsys, *argv)
    said = [line.strip()[len("note: ") :] for line in out.splitlines() if line.strip().startswith("note: ")]
    assert code == 0 and len(said) >= 2 and said[0].startswith("out_dtype=bf16 assumed")
    assert main([*argv, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["notes"] == said and "note" not in doc and "roof_notes" not in doc
    assert main(["op", "gemm", "M=4096", "N=4096", "K=4096", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["notes"] == []  # as decode --json on an h100


def test_op_json_keys_name_their_units(capsys):
    """``op --json``'s ``cost.footprint`` (bytes) and each sensitivity's ``dT_dresource`` (seconds
    per FLOP/s of a unit's roof, per byte/s of a memory level's) said no unit. Hand values for
    gemm 4096^3 bf16 on an H100: F = 2 * 4096^3 FLOP, dT/dP = -F / P^2 at the catalog's bf16 peak."""
    from costmodel.hardware import get_device

    assert main(["op", "gemm", "M=4096", "N=4096", "K=4096", "--device", "h100", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert "footprint_bytes" in doc["cost"] and "footprint" not in doc["cost"]
    peak = get_device("h100").require_peak("tensor", "bf16")
    tensor, dram = doc["sensitivities"]["tensor"], doc["sensitivities"]["dram"]
    assert tensor["resource_unit"] == "FLOP/s" and dram["resource_unit"] == "bytes/s"
    assert tensor["dT_dresource_s_per_resource_unit"] == pytest.approx(
        -2 * 4096**3 / float(peak) ** 2, rel=1e-12
    )
    assert tensor["elasticity"] == -1 and "dT_dresource" not in tensor
