"""The library's exported functions, called from Python with the inputs a user passes by
mistake or from numpy, answer as for the plain value or refuse in one line of the project's
error types naming the parameter (the library API review, second pass).

Expected values come from the input itself (a catalog name resolves to the device
``get_device`` gives; ``np.int64(2048)`` is 2048), a docstring's hand computation
(``gemm_crossover`` on an H100: 346) or another entry point's answer.
"""

from fractions import Fraction

import numpy as np
import pytest

import costmodel as cm
from costmodel.errors import CostModelError, HardwareSpecError, UnknownDeviceError

H100 = "h100-sxm"


def _one_line(e: pytest.ExceptionInfo) -> str:
    text = str(e.value)
    assert "\n" not in text
    return text


# ---------------------------------------------------------------- derivations take a device name


def test_derivations_take_a_device_name_as_bound_does():
    hw = cm.get_device(H100)
    # the docstring's hand computation: I* = 19788/67 = 295.3 FLOP/B; M* = 295.3 / (1 - 295.3 * 2/4096)
    assert cm.gemm_crossover(N=4096, K=4096, hw=H100).integer == 346
    assert cm.gemm_crossover(N=4096, K=4096, hw="h100").integer == 346  # an alias
    assert cm.balance_point(H100) == cm.balance_point(hw) == pytest.approx(19788 / 67)
    assert cm.tile_compute_bound(1024, 1024, H100) == cm.tile_compute_bound(1024, 1024, hw)
    assert cm.split_matmul_network(K=4096, p=8, hw=H100) == cm.split_matmul_network(K=4096, p=8, hw=hw)
    m = cm.dim("M")
    gemm = cm.op_cost("gemm", M=m, N=4096, K=4096)
    assert cm.crossover(gemm, m, H100).integer == 346


@pytest.mark.parametrize(
    "call",
    [
        lambda: cm.balance_point("h1000"),
        lambda: cm.gemm_crossover(N=4096, K=4096, hw="h1000"),
        lambda: cm.tile_compute_bound(128, 128, "h1000"),
        lambda: cm.split_matmul_network(K=4096, p=8, hw="h1000"),
    ],
)
def test_derivations_refuse_an_unknown_device_by_name(call):
    with pytest.raises(UnknownDeviceError) as e:
        call()
    assert "unknown device 'h1000'" in _one_line(e)


def test_tile_compute_bound_refuses_no_device():
    # it has no symbolic default: None was an AttributeError ('NoneType' object has no attribute 'balance')
    with pytest.raises(UnknownDeviceError) as e:
        cm.tile_compute_bound(128, 128, None)
    assert "device must be a name or a Hardware, got NoneType None" in _one_line(e)


def test_crossover_refuses_a_variable_it_cannot_solve_for():
    m = cm.dim("M")
    with pytest.raises(CostModelError) as e:  # was AttributeError: 'str' object has no attribute 'name'
        cm.crossover(cm.op_cost("gemm", M=m, N=4096, K=4096), "M", H100)
    assert "variable must be a sympy Symbol of the cost" in _one_line(e) and "got str 'M'" in str(e.value)
    # a cost without the variable has no root for want of it, not of a crossover: was exact=None, unsaid
    with pytest.raises(CostModelError) as e:
        cm.crossover(cm.op_cost("gemm", M=1, N=4096, K=4096), m, H100)
    assert "variable M is not a symbol of the cost (its symbols: none: the cost is numeric)" in _one_line(e)


@pytest.mark.parametrize("call", [lambda: cm.op_intensity("gemm"), lambda: cm.crossover("gemm", cm.dim("M"))])
def test_derivations_refuse_a_cost_that_is_not_one(call):
    with pytest.raises(CostModelError) as e:  # was AttributeError: 'str' object has no attribute ...
        call()
    assert "cost must be a Cost (op_cost(...), a graph's total), got str 'gemm'" in _one_line(e)


def test_an_unknown_unit_is_named_in_words():
    with pytest.raises(CostModelError) as e:  # listed the enum's reprs: (<Unit.TENSOR: 'tensor'>, ...)
        cm.op_intensity(cm.op_cost("gemm", M=1, N=1, K=1), unit="gpu")
    assert _one_line(e) == "unit 'gpu' is not one of tensor, vector, sfu"


# ---------------------------------------------------------------- numpy scalars are numbers


@pytest.mark.parametrize("factor", [np.float64(2.0), np.int64(2), np.float32(2.0), 2.0, Fraction(2)])
def test_headroom_takes_numpy_and_exact_factors(factor):
    # a square bf16 GEMM of 4096 is compute-bound on an H100: doubling the tensor roof halves its
    # time (DESIGN: headroom 2 when compute-bound); np.float64(2.0) was TypeError: invalid input
    gemm = cm.op_cost("gemm", M=4096, N=4096, K=4096)
    assert cm.headroom(gemm, H100, "tensor", factor=factor) == 2


def test_bind_takes_numpy_values_and_refuses_a_list():
    assert cm.bind({"B": np.int64(8)}) == cm.bind({"B": 8})
    with pytest.raises(CostModelError) as e:  # was AttributeError: 'list' object has no attribute 'items'
        cm.bind([("B", 8)])
    assert "bindings must be a mapping of symbol or dimension name to value" in _one_line(e)
    assert "got list [('B', 8)]" in str(e.value)


def test_load_hardware_file_refuses_no_path():
    with pytest.raises(HardwareSpecError) as e:  # was TypeError from pathlib
        cm.load_hardware_file(None, register=False)
    assert "path must be a hardware file's path (str or Path), got NoneType None" in _one_line(e)


# ---------------------------------------------------------------- serving entry points


def test_prefill_chunk_takes_any_whole_number_as_seq_does():
    from graphs.serving import prefill_report

    plain = prefill_report("llama-3.2-1b", H100, seq=8192, chunk=2048)
    assert plain.chunks == 4  # 8192 / 2048
    for chunk in (np.int64(2048), 2048.0):  # were refused: "chunk must be a positive number of tokens"
        assert prefill_report("llama-3.2-1b", H100, seq=8192, chunk=chunk) == plain
    with pytest.raises(CostModelError) as e:
        prefill_report("llama-3.2-1b", H100, seq=8192, chunk=2048.5)
    assert "chunk must be a positive integer" in _one_line(e) and "2048.5" in str(e.value)


@pytest.mark.parametrize("config", [None, 5])
def test_a_workload_refuses_what_names_no_model(config):
    from graphs.serving import as_workload, decode_report

    with pytest.raises(CostModelError) as e:  # was TypeError: a workload needs a model name ...
        decode_report(config, H100, ctx=1024)
    assert "expected a catalog name, a config.json path or folder" in _one_line(e)
    with pytest.raises(CostModelError):
        as_workload(config)


def test_a_workload_takes_a_config_path_as_its_docstring_says():
    from pathlib import Path

    from graphs.serving import as_workload, decode_report

    path = Path(__file__).resolve().parents[1] / "models" / "configs" / "llama-3.2-1b.json"
    assert as_workload(path).config.name == "llama-3.2-1b"  # was TypeError for a Path
    by_path = decode_report(path, H100, batch=8, ctx=2048)
    assert by_path.step_s == decode_report("llama-3.2-1b", H100, batch=8, ctx=2048).step_s


# ---------------------------------------------------------------- the serving analyses' numbers

SMALL, DRAFT = "llama-3.2-1b", "llama-3.2-1b"  # a draft sharing the target's tokenizer


@pytest.mark.parametrize(
    "call, words",
    [
        (
            lambda s: s.disaggregated(
                SMALL, H100, "h200", prompt=1024, output=128, decode_batch=8, link_bandwidth=float("nan")
            ),
            "link_bandwidth must be a finite number > 0 (B/s), got nan",
        ),
        (
            lambda s: s.disaggregated(
                SMALL, H100, "h200", prompt=1024, output=128, decode_batch=8, link_bandwidth="50e9"
            ),
            "link_bandwidth must be a finite number > 0 (B/s), got str '50e9'",
        ),
        (
            lambda s: s.disaggregated(
                SMALL,
                H100,
                "h200",
                prompt=1024,
                output=128,
                decode_batch=8,
                link_bandwidth=5e10,
                link_latency=None,
            ),
            "link_latency must be a finite number >= 0 (s), got NoneType None",
        ),
        (
            lambda s: s.disaggregated(
                SMALL,
                H100,
                "h200",
                prompt=1024,
                output=128,
                decode_batch=8,
                link_bandwidth=5e10,
                rate=float("nan"),
            ),
            "rate must be a finite number > 0 (requests/s), got nan",
        ),
        (
            lambda s: s.kv_transfer_crossover(SMALL, H100, "h200", link_bandwidth=0),
            "link_bandwidth must be a finite number > 0 (B/s), got 0",
        ),
        (
            lambda s: s.attention_ffn_split(
                SMALL, H100, "b200", batch=8, ctx=1024, link_bandwidth=5e10, hop_latency=float("nan")
            ),
            "hop_latency must be a finite number >= 0 (s), got nan",
        ),
        (
            lambda s: s.sram_residency(SMALL, "groq-lpu", hop_latency=float("inf")),
            "hop_latency must be a finite number >= 0 (s), got inf",
        ),
        (
            lambda s: s.speculative_decoding(SMALL, DRAFT, H100, alpha="0.8"),
            "alpha must be a finite number in [0, 1], got str '0.8'",
        ),
        (
            lambda s: s.speculative_decoding(SMALL, DRAFT, H100, alpha=0.8, k_max=None),
            "k_max must be a whole number in [1, 256], got NoneType None",
        ),
        (
            lambda s: s.parallel_plan(SMALL, H100, batch=8, ctx=1024, tp="2"),
            "tp must be a positive integer or a positive symbolic expression, got str '2'",
        ),
        (
            lambda s: s.parallel_plan(SMALL, H100, batch=8, ctx=1024, link="nvlink"),
            "link 'nvlink' not allowed; allowed: scale_up, scale_out",
        ),
        (
            lambda s: s.plan_frontier(SMALL, H100, batches=[1], ctx=1024, plans=[(1, 1, 1, 1)]),
            "devices must be a list, got str 'h100-sxm'",
        ),
        (
            lambda s: s.plan_frontier(SMALL, [H100], batches=[1], ctx=1024, plans=[(1, 1)]),
            "each plan must be (tp, pp, ep, microbatches), four whole numbers, got (1, 1)",
        ),
        (lambda s: s.vllm_capture_sizes("256"), "max_num_seqs must be a whole number >= 1, got str '256'"),
        (lambda s: s.usd_per_m(-1, 10), "usd_per_hour must be a finite number >= 0 (USD/h), got -1"),
        (
            lambda s: s.decode_cost(s.device_rates(H100, 2.0), devices=1, batch=8, tpot_s=0),
            "tpot_s must be a finite number > 0 (s), got 0",
        ),
        (
            lambda s: s.decode_cost(s.device_rates(H100, 2.0), devices=0, batch=8, tpot_s=0.01),
            "devices must be a whole number in [1, 2147483647], got 0",
        ),
        (lambda s: s.load_trace(None), "trace path must be a str or Path, got NoneType None"),
        (
            lambda s: s.speedup_by_batch(SMALL, H100, None, [1]),
            "spec must be a SpecConfig (the draft, its device, k and acceptance), got NoneType None",
        ),
    ],
)
def test_serving_analyses_refuse_bad_numbers_in_one_line(call, words):
    # each was a bare TypeError, ZeroDivisionError, ValueError or AssertionError, a NaN answer
    # (link_bandwidth=nan: a NaN TTFT), or a silent one (devices=0: a free deployment)
    import graphs.serving as s

    with pytest.raises(CostModelError) as e:
        call(s)
    assert words in _one_line(e)


def test_serving_analyses_take_numpy_numbers():
    import graphs.serving as s

    plain = s.speculative_decoding(SMALL, DRAFT, H100, alpha=0.8, k_max=3)
    assert s.speculative_decoding(SMALL, DRAFT, H100, alpha=np.float64(0.8), k_max=np.int64(3)) == plain
    assert s.speculative_decoding(SMALL, DRAFT, H100, alpha=0.8, k_max=3.0) == plain  # was TypeError
    plan = s.parallel_plan(SMALL, H100, batch=8, ctx=1024, tp=2)
    assert s.parallel_plan(SMALL, H100, batch=8, ctx=1024, tp=np.int64(2)) == plan
    reqs = s.synthetic(5, rate=1.0, prompt="fixed:10", output="fixed:10")
    assert s.synthetic(np.int64(5), rate=1.0, prompt="fixed:10", output="fixed:10") == reqs  # was refused


def test_decode_cost_is_the_hand_computation():
    from graphs.serving import decode_cost, device_rates

    # one device at $2/h, 8 sequences at 10 ms a token: 800 tok/s, 2 / (3600 x 800) x 1e6 $/M
    cost = decode_cost(device_rates(H100, 2.0), devices=1, batch=8, tpot_s=0.01)
    assert cost.usd_per_m_output == pytest.approx(2 / (3600 * 800) * 1e6)


@pytest.mark.parametrize(
    "call",
    [
        lambda s: s.speculative_decoding(SMALL, DRAFT, H100, alpha=0.8, ctx=200_000),
        lambda s: s.attention_ffn_split(
            SMALL, H100, "b200", batch=1, ctx=200_000, link_bandwidth=5e10, hop_latency=1e-5
        ),
        lambda s: s.disaggregated(
            SMALL, H100, "h200", prompt=200_000, output=128, decode_batch=1, link_bandwidth=5e10
        ),
    ],
)
def test_serving_analyses_refuse_a_context_beyond_the_model_as_decode_report_does(call):
    # llama-3.2-1b's config.json: max_position_embeddings 131,072; these answered silently
    import graphs.serving as s

    with pytest.raises(CostModelError) as e:
        s.decode_report(SMALL, H100, ctx=200_000)
    assert "exceeds the model's context limit of 131,072 tokens" in str(e.value)
    with pytest.raises(CostModelError) as e:
        call(s)
    assert "exceeds the model's context limit of 131,072 tokens" in _one_line(e)
    assert "allow_long_context=True" in str(e.value)


def test_allow_long_context_costs_it_in_python_and_on_the_command_line(capsys):
    import json

    from graphs.cli.main import main
    from graphs.serving import disaggregated, speculative_decoding

    spec = speculative_decoding(SMALL, DRAFT, H100, alpha=0.8, ctx=200_000, k_max=2, allow_long_context=True)
    assert (
        main(
            [
                "serve",
                "specdec",
                SMALL,
                DRAFT,
                "--alpha",
                "0.8",
                "--ctx",
                "200000",
                "--k-max",
                "2",
                "--allow-long-context",
                "--ignore-capacity",
                "--json",
            ]
        )
        == 0
    )
    out = json.loads(capsys.readouterr().out)
    assert out["best_k"] == spec.best_k and out["target_step_s"] == pytest.approx(spec.target_step_s)
    d = disaggregated(
        SMALL,
        H100,
        "h200",
        prompt=200_000,
        output=128,
        decode_batch=1,
        link_bandwidth=5e10,
        allow_long_context=True,
    )
    assert (
        main(
            [
                "serve",
                "disagg",
                SMALL,
                "--prefill-device",
                H100,
                "--decode-device",
                "h200",
                "--prompt",
                "200000",
                "--output",
                "128",
                "--decode-batch",
                "1",
                "--link-bandwidth",
                "5e10",
                "--allow-long-context",
                "--ignore-capacity",
                "--json",
            ]
        )
        == 0
    )
    out = json.loads(capsys.readouterr().out)
    assert out["tpot_s"] == pytest.approx(d.tpot_s)


# ---------------------------------------------------------------- `costmodel op` is a library call


@pytest.mark.parametrize(
    "argv, params",
    [
        (
            ["gemm", "M=16", "N=4096", "K=4096", "dtype=fp8_e4m3"],
            dict(M=16, N=4096, K=4096, dtype="fp8_e4m3"),
        ),
        (["gemm", "M=512", "N=4096", "K=4096", "--device", "b200"], dict(M=512, N=4096, K=4096)),
        (["softmax", "rows=4096", "cols=4096", "--device", "mi300x"], dict(rows=4096, cols=4096)),
    ],
)
def test_op_roofline_is_the_commands_answer(argv, params, capsys):
    import json

    from graphs.cli.main import main

    device = argv[argv.index("--device") + 1] if "--device" in argv else "h100-sxm"
    assert main(["op", *argv, "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == json.loads(
        json.dumps(cm.op_roofline(argv[0], device, **params).to_dict())
    )


def test_op_roofline_prices_an_fp8_gemm_as_the_command_and_derive_do():
    # op_cost writes the operands' format; a kernel (and `costmodel op`, derive, the model graphs)
    # writes bf16: 16 x 4096 outputs x 2 B, against 16 x 4096 + 4096 x 4096 one-byte reads
    r = cm.op_roofline("gemm", M=16, N=4096, K=4096, dtype="fp8_e4m3")
    assert r.params["out_dtype"] == "bf16" and r.notes[0].startswith("out_dtype=bf16 assumed")
    assert (
        r.cost.write_terms["dram"] == 16 * 4096 * 2 and r.cost.read_terms["dram"] == 16 * 4096 + 4096 * 4096
    )
    assert cm.op_cost("gemm", M=16, N=4096, K=4096, dtype="fp8_e4m3").write_terms["dram"] == 16 * 4096
    given = cm.op_roofline("gemm", M=16, N=4096, K=4096, dtype="fp8_e4m3", out_dtype="fp8_e4m3")
    assert given.cost.write_terms["dram"] == 16 * 4096 and not any("assumed" in n for n in given.notes)


def test_choice_errors_list_names_not_reprs():
    from graphs.serving import closed_forms

    with pytest.raises(CostModelError) as e:  # listed (<Phase.PREFILL: 'prefill'>, <Phase.DECODE: 'decode'>)
        closed_forms("llama-3.2-1b", "train")
    assert _one_line(e) == "phase 'train' not allowed; allowed: prefill, decode"
    with pytest.raises(CostModelError) as e:
        cm.Overhead("most")
    assert (
        "overhead policy 'most' not allowed; allowed: fraction_of_sum, fraction_of_total, fraction_of_free"
        in _one_line(e)
    )


# ---------------------------------------------------------------- models and graphs helpers


def test_parameter_counts_take_a_model_name():
    import models

    # a name was an AttributeError ('str' object has no attribute 'vocab_size'); the catalog's
    # Llama-3.2-1B has 1,235,814,400 parameters (its config.json, tied embeddings)
    assert models.param_counts("llama-3.2-1b").total == 1_235_814_400
    assert models.param_counts("llama-3.2-1b") == models.param_counts(models.get_model("llama-3.2-1b"))
    assert models.param_bytes("llama-3.2-1b") == models.param_bytes(models.get_model("llama-3.2-1b"))
    cfg = models.get_model("llama-3.2-1b")
    assert models.attention_params("llama-3.2-1b") == models.attention_params(cfg)
    with pytest.raises(CostModelError) as e:
        models.param_counts(None)
    assert "expected a catalog name, a config.json path or folder" in _one_line(e)


@pytest.mark.parametrize(
    "call, words",
    [
        (
            lambda m: m.load_hf_config(None),
            "path must be a config.json's path or its folder (str or Path), got NoneType",
        ),
        (lambda m: m.inspect_config(None), "model: config must be a JSON object, got NoneType None"),
        (lambda m: m.context_limit([1]), "config.json: config must be a JSON object, got list [1]"),
        (lambda m: m.check_context("x", 10, "20"), "ctx must be a whole number of tokens, got str '20'"),
    ],
)
def test_model_helpers_refuse_what_is_no_config(call, words):
    import models

    with pytest.raises(CostModelError) as e:  # each was a bare TypeError or AttributeError
        call(models)
    assert words in _one_line(e)


def test_a_misspelt_config_field_is_the_projects_error_and_names_the_field():
    import models
    from models.config import ModelConfigError

    with pytest.raises(ModelConfigError) as e:  # still a TypeError too, as Python's is
        models.get_model("llama-3.2-1b").replace(num_expert=4)
    assert isinstance(e.value, TypeError)
    assert "unexpected keyword argument 'num_expert' (did you mean num_experts?)" in _one_line(e)


@pytest.mark.parametrize(
    "name",
    [
        "summarize",
        "weight_params",
        "weight_bytes_read",
        "op_total",
        "attention_flops",
        "peak_activation_bytes",
    ],
)
def test_graph_totals_refuse_a_model_name(name):
    import graphs.serving as s

    with pytest.raises(CostModelError) as e:  # was AttributeError: 'str' object has no attribute 'nodes'
        getattr(s, name)("llama-3.2-1b")
    assert "g must be a cost graph (a networkx.DiGraph from graphs.build_model" in _one_line(e)


def test_graph_totals_answer_a_graph():
    from graphs import build_model
    from graphs.serving import step_time, weight_params

    g = build_model(__import__("models").get_model("llama-3.2-1b"), "decode", batch=1, ctx=128)
    assert weight_params(g) == 1_235_814_400  # the parameter count, a tied table once
    with pytest.raises(CostModelError):
        step_time("llama-3.2-1b", H100)


def test_ledger_and_pass_objects_are_checked_when_made():
    with pytest.raises(CostModelError) as e:  # was AttributeError: no attribute 'numeric_terms'
        cm.max_batch(None, 80e9, ctx=1024)
    assert "ledger must be a MemoryLedger, got NoneType None" in _one_line(e)
    with pytest.raises(CostModelError) as e:  # was taken, and failed when run
        cm.Pass("x", None)
    assert "pass 'x': fn must be a callable graph -> graph, got NoneType" in _one_line(e)
    with pytest.raises(CostModelError) as e:
        cm.Pipeline([1])
    assert "passes[0] must be a Pass" in _one_line(e)
    # the docstring's hand computation: (80e9 - 16e9) // (131072 * 4096) = 119
    led = cm.MemoryLedger(weights_bytes=np.float64(16e9), kv_bytes_per_token=np.int64(131072))
    assert cm.max_batch(led, np.float64(80e9), ctx=np.int64(4096)).value == 119


@pytest.mark.parametrize("name", ["check_model", "closed_forms"])
def test_model_entry_points_refuse_no_model(name):
    import graphs.serving as s

    with pytest.raises(CostModelError) as e:  # check_model: TypeError; closed_forms: AttributeError
        getattr(s, name)(None)
    assert "got NoneType None" in _one_line(e) or "NoneType 'None'" in str(e.value)


@pytest.mark.parametrize("kw", [{"prices": {"h100": 2.0}}, {"electricity_per_kwh": 0.1}])
def test_search_refuses_prices_without_the_cost_objective(kw):
    # they were ignored, unsaid; SearchRequest (the command) refuses the same in its own words
    from graphs.serving import search

    with pytest.raises(CostModelError) as e:
        search("llama-3.2-1b", devices=["h100"], batches=[1], ctxs=[1024], **kw)
    assert "price the cost objective: pass cost=True" in _one_line(e)


def test_routing_text_is_taken_as_the_command_takes_it():
    from graphs.serving import decode_report
    from graphs.serving.step.expert_routing import parse_routing

    # a str was AttributeError: 'str' object has no attribute 'is_default'
    by_text = decode_report("mixtral-8x7b", "h200", ctx=1024, ep=2, routing="zipf:1.2")
    assert by_text == decode_report("mixtral-8x7b", "h200", ctx=1024, ep=2, routing=parse_routing("zipf:1.2"))
    with pytest.raises(CostModelError) as e:
        decode_report("mixtral-8x7b", "h200", ctx=1024, routing=5)
    assert "routing must be a Routing (parse_routing('zipf:1.2')) or its text, got int 5" in _one_line(e)


def test_capacity_refuses_expert_parallelism_on_a_dense_model_as_decode_report_does():
    from graphs.serving import capacity, decode_report

    words = "llama-3.2-1b has no experts: expert parallelism needs a MoE model"
    with pytest.raises(CostModelError, match=words):
        decode_report("llama-3.2-1b", H100, ctx=1024, ep=2)
    with pytest.raises(CostModelError) as e:  # answered fits=True, the weights as on one rank
        capacity("llama-3.2-1b", H100, batch=1, ctx=1024, ep=2)
    assert words in _one_line(e)


@pytest.mark.parametrize(
    "argv", [[], ["report", "--device", "mi300x", "--dtype", "fp8_e4m3"], ["report", "--device", "groq-lpu"]]
)
def test_operator_report_is_the_default_commands_answer(argv, capsys):
    import json

    from graphs.cli.main import main

    device = argv[argv.index("--device") + 1] if "--device" in argv else "h100-sxm"
    dtype = argv[argv.index("--dtype") + 1] if "--dtype" in argv else "bf16"
    rep = cm.operator_report(device, dtype)
    assert main([*(argv or ["report"]), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == json.loads(json.dumps(rep.to_dict()))
    assert main(argv) == 0
    assert capsys.readouterr().out == rep.to_text() + "\n"


def test_operator_report_ridge_is_the_datasheets():
    # H100 SXM: 989.4 TFLOP/s dense bf16 over 3.35 TB/s = 295.3 FLOP/B; M* = 346 (gemm_crossover's)
    rep = cm.operator_report("h100")
    assert rep.ridge_flop_per_byte == pytest.approx(989.4e12 / 3.35e12, rel=1e-3)
    assert rep.crossover.integer == cm.gemm_crossover(N=4096, K=4096, hw="h100").integer == 346


def _close(a, b):
    """Equal documents, floats to 1e-9 (the command may read a cached card's closed forms)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_close(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and isinstance(b, float):
        return a == pytest.approx(b, rel=1e-9)
    return a == b


@pytest.mark.parametrize(
    "argv, request_kw",
    [
        (
            ["decode", "llama-3.1-8b", "--device", "h100", "--batch", "16", "--ctx", "4096"],
            dict(phase="decode", device="h100", batch=16, ctx=4096),
        ),
        (
            ["decode", "qwen2.5-72b", "--device", "h200", "--batch", "8", "--ctx", "8192", "--tp", "4"],
            dict(phase="decode", device="h200", batch=8, ctx=8192, tp=4),
        ),
        (
            [
                "decode",
                "mixtral-8x7b",
                "--device",
                "h200",
                "--ctx",
                "2048",
                "--ep",
                "2",
                "--routing",
                "zipf:1.2",
            ],
            dict(phase="decode", device="h200", ctx=2048, ep=2, routing="zipf:1.2"),
        ),
        (
            ["prefill", "llama-3.1-8b", "--device", "h100", "--seq", "8192", "--chunk", "2048"],
            dict(phase="prefill", device="h100", seq=8192, chunk=2048),
        ),
    ],
)
def test_run_phase_is_the_commands_json(argv, request_kw, capsys):
    import json

    from graphs.cli.main import main
    from graphs.serving import PhaseRequest, run_phase

    assert main([*argv, "--json"]) == 0
    cli = json.loads(capsys.readouterr().out)
    lib = json.loads(json.dumps(run_phase(PhaseRequest(**request_kw), argv[1]).to_dict()))
    assert _close(cli, lib), (cli, lib)


def test_build_model_takes_a_model_name():
    import models
    from costmodel.graph import graph_total
    from graphs import build_layer, build_model

    # a name was AttributeError: 'str' object has no attribute 'vocab_size'
    by_name = graph_total(build_model("tiny", "decode", batch=1)).flops_on("tensor")
    assert by_name == graph_total(build_model(models.get_model("tiny"), "decode", batch=1)).flops_on("tensor")
    # build_model's docstring by hand: 2 x (2 x (4096 + 2 x 2048 + 4096 + 3 x 64 x 176) + 64 x 256) = 217088
    assert by_name.subs(cm.dim("ctx"), 0) == 217088
    assert (
        build_layer("tiny", "decode").number_of_nodes()
        == build_layer(models.get_model("tiny"), "decode").number_of_nodes()
    )
    with pytest.raises(CostModelError) as e:
        build_model(None, "decode")
    assert "expected a catalog name, a config.json path or folder" in _one_line(e)


def test_small_helpers_refuse_what_they_cannot_use():
    from graphs.serving import device_rates, token_cost

    with pytest.raises(CostModelError) as e:  # printed \\text{None}
        cm.latex(None)
    assert "expr must be a sympy expression or a number, got NoneType None" in _one_line(e)
    assert cm.latex(cm.dim("M") / 2) == r"\frac{M}{2}"
    with pytest.raises(CostModelError) as e:  # "expression depends on M, not among the sweep variables"
        cm.compile_expr("M*2", "M")
    assert "symbols must be a sequence of sympy Symbols (dim('M')), got str 'M'" in _one_line(e)
    assert cm.compile_expr("M*2", [cm.dim("M")])(np.array([1, 2])).tolist() == [2, 4]
    with pytest.raises(CostModelError) as e:  # an empty deployment cost 0 USD per million
        token_cost([], input_tokens_per_s=1.0, output_tokens_per_s=1.0, basis="x")
    assert "pools must list (Rates, devices) pairs with at least one device each, got []" in _one_line(e)
    # one device at $3.6/h serving 1,000 tok/s: 3.6 / (3600 x 1000) x 1e6 = $1 per million
    one = token_cost(
        [(device_rates(H100, 3.6), 1)], input_tokens_per_s=0.0, output_tokens_per_s=1000.0, basis="x"
    )
    assert one.usd_per_m_output == pytest.approx(1.0)


def test_typed_requests_take_numpy_integers():
    from graphs.serving import (
        EngineConfig,
        PhaseRequest,
        SimulationRequest,
        Topology,
        run_phase,
        run_simulation,
    )

    # each refused np.int64 as "must be a whole number, got np.int64(40)"
    kw = dict(device="h100", rate=5.0, prompt="fixed:200", output="fixed:50")
    plain = run_simulation(SimulationRequest(requests=40, **kw), "llama-3.2-1b").to_dict()
    assert run_simulation(SimulationRequest(requests=np.int64(40), **kw), "llama-3.2-1b").to_dict() == plain
    a = run_phase(
        PhaseRequest("decode", device="h100", batch=np.int64(16), ctx=np.int64(4096)), "llama-3.1-8b"
    )
    b = run_phase(PhaseRequest("decode", device="h100", batch=16, ctx=4096), "llama-3.1-8b")
    assert a.to_dict() == b.to_dict()
    assert Topology(tp=np.int64(2)).tp == 2 and type(Topology(tp=np.int64(2)).tp) is int
    assert EngineConfig(max_num_seqs=np.int64(8)).max_num_seqs == 8
    with pytest.raises(CostModelError) as e:
        SimulationRequest(requests=40.5, **kw)
    assert "requests (--requests) must be a whole number, got 40.5" in _one_line(e)


@pytest.mark.parametrize(
    "kw, words",
    [
        ({"devices": "h100"}, "devices must be a list, got str 'h100'"),  # was "unknown device 'h'"
        (
            {"devices": ["h100"], "chunk": 0},
            "chunk must be a whole number of points >= 1, got 0",
        ),  # ValueError
    ],
)
def test_sweep_refuses_a_bare_device_name_and_an_empty_chunk(kw, words):
    from graphs.serving import sweep

    with pytest.raises(CostModelError) as e:
        sweep("llama-3.2-1b", batches=[1, 8], ctxs=[1024], **kw)
    assert words in _one_line(e)
    one = sweep("llama-3.2-1b", devices=["h100"], batches=[1, 8], ctxs=[1024], chunk=1)
    whole = sweep("llama-3.2-1b", devices=["h100"], batches=[1, 8], ctxs=[1024])
    assert one.columns["tpot_s"].tolist() == whole.columns["tpot_s"].tolist()  # chunking changes nothing
