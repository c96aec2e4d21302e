"""The fused-MoE kernel an engine runs where it is not the corpus's fastest
(graphs/serving/engines/moe_kernels.py): vLLM 0.10-0.11 ran gpt-oss's MXFP4 experts on Hopper
with Marlin (no ``triton_kernels`` in the wheel), every vLLM release does on Ampere and Ada.
The rules, the padded weights they hold (pinned to the tensor shapes of vLLM's
``Mxfp4MoEMethod.create_weights``), the curve of the named kernel (pinned to the parquet rows),
and what a run prices and says."""

import json

import pytest

from costmodel.errors import CostModelError
from costmodel.measured.moe import MoEShape
from graphs.serving.engines import get_engine
from graphs.serving.engines.moe_kernels import (
    VLLM_MXFP4_MARLIN_HOPPER,
    VLLM_MXFP4_MARLIN_PRE_HOPPER,
    MoEKernelRule,
    padded_expert_bytes,
)
from graphs.serving.pricing.predictor import Predictor

MARLIN = dict(dtype="w4a16_mxfp4", kernel="marlin", pad=(256, 128))


def _round_up(x: int, m: int) -> int:
    return -(-x // m) * m


def _create_weights_bytes(hidden: int, inter: int, experts: int, marlin: bool) -> int:
    """The bytes of one MoE layer's expert tensors as vLLM's ``Mxfp4MoEMethod.create_weights``
    (``vllm/model_executor/layers/quantization/mxfp4.py``) allocates them: uint8 weights packing
    two FP4 values, one uint8 E8M0 scale per 32 values, bf16 biases; Marlin pads the hidden size
    to 256 and the rank's expert width to 128 first."""
    if marlin:
        hidden, inter = _round_up(hidden, 256), _round_up(inter, 128)
    w13 = experts * 2 * inter * hidden // 2
    w13_scale = experts * 2 * inter * hidden // 32
    w13_bias = experts * 2 * inter * 2
    w2 = experts * hidden * inter // 2
    w2_scale = experts * hidden * inter // 32
    w2_bias = experts * hidden * 2
    return w13 + w13_scale + w13_bias + w2 + w2_scale + w2_bias


@pytest.mark.parametrize("tp", [1, 2, 4])
def test_padded_bytes_are_vllm_create_weights_tensors(tp):
    """gpt-oss-120b (config.json: hidden 2,880, intermediate 2,880, 128 experts, 36 layers)."""
    want = 36 * (
        _create_weights_bytes(2880, 2880 // tp, 128, True)
        - _create_weights_bytes(2880, 2880 // tp, 128, False)
    )
    got = padded_expert_bytes(
        VLLM_MXFP4_MARLIN_HOPPER,
        hidden=2880,
        inter_rank=2880 // tp,
        experts_rank=128,
        moe_layers=36,
        weight_bits=4.25,
        bias_bytes=2,
    )
    assert got == pytest.approx(want, rel=1e-12)


def test_rules_follow_the_releases():
    """Marlin on Hopper for vLLM 0.10 and 0.11 only; on Ampere and Ada for every V1 release that
    runs MXFP4; no rule for vLLM 0.6 (no MXFP4), SGLang or TensorRT-LLM."""
    hopper = {p: get_engine(p).moe_kernel("w4a16_mxfp4", "Hopper") for p in ("vllm@0.10", "vllm@0.11")}
    assert all(r is not None and r.kernel == "marlin" for r in hopper.values())
    for ref in ("vllm@0.12", "vllm@0.20", "vllm@1"):
        assert get_engine(ref).moe_kernel("w4a16_mxfp4", "Hopper") is None
        assert get_engine(ref).moe_kernel("w4a16_mxfp4", "Ampere") is VLLM_MXFP4_MARLIN_PRE_HOPPER
        assert get_engine(ref).moe_kernel("w4a16_mxfp4", "Blackwell", "b200") is None  # SM 10.0: FlashInfer
        # SM 12.x cards share the catalog's "Blackwell" but run Marlin (vllm PR 37751): named by device
        assert get_engine(ref).moe_kernel("w4a16_mxfp4", "Blackwell", "rtx-5090").kernel == "marlin"
    for ref in ("vllm@0.6", "sglang", "trtllm"):
        assert get_engine(ref).moe_kernels == ()
    assert get_engine("vllm@0.11").moe_kernel("bfloat16", "Hopper") is None  # MXFP4 experts only
    doc = get_engine("vllm@0.11").to_dict()["moe_kernels"]
    assert [d["architectures"] for d in doc] == [["Hopper"], ["Ampere", "Ada Lovelace"], []]
    assert doc[2]["devices"] == ["rtx-5090", "rtx-pro-6000"]
    assert "has_triton_kernels" in doc[0]["source"]


def test_rule_and_shape_refuse_bad_values():
    with pytest.raises(CostModelError, match="source"):
        MoEKernelRule("w4a16_mxfp4", ("Hopper",), "marlin", (256, 128), " ")
    with pytest.raises(CostModelError, match="pad"):
        MoEKernelRule("w4a16_mxfp4", ("Hopper",), "marlin", (0, 128), "a source")
    with pytest.raises(CostModelError, match="corpus words"):
        MoEKernelRule("w4a16_mxfp4", ("Hopper",), "Marlin Kernel", (256, 128), "a source")
    with pytest.raises(CostModelError, match="tuple of names"):
        MoEKernelRule("w4a16_mxfp4", "Hopper", "marlin", (256, 128), "a source")  # type: ignore[arg-type]
    with pytest.raises(CostModelError, match="tuple of two"):
        MoEKernelRule("w4a16_mxfp4", ("Hopper",), "marlin", [256, 128], "a source")  # type: ignore[arg-type]
    with pytest.raises(CostModelError, match="architectures or devices"):
        MoEKernelRule("w4a16_mxfp4", (), "marlin", (256, 128), "a source")
    assert not VLLM_MXFP4_MARLIN_HOPPER.applies("w4a16_mxfp4", "", "")  # nothing given: no rule
    with pytest.raises(CostModelError, match="without a kernel"):
        MoEShape(2880, 2880, 4, 128, dtype="w4a16_mxfp4", pad=(256, 128))
    s = MoEShape(2880, 1440, 4, 128, **MARLIN)
    assert MoEShape.from_key(s.key) == s
    assert MoEShape.from_key(MoEShape(2880, 1440, 4, 128).key).kernel == ""  # the plain key unchanged
    with pytest.raises(CostModelError, match="malformed kernel"):
        MoEShape.from_key(s.key.replace("pad=256x128", "pad=256"))
    assert (s.padded().hidden, s.padded().inter, s.padded().kernel) == (3072, 1536, "")


def test_predictor_carries_the_engines_kernels():
    default = Predictor.of("vllm")
    assert default.moe_kernels == get_engine("vllm").moe_kernels  # the framework's default engine's
    assert default == Predictor.of("vllm").for_engine(get_engine("vllm@1"))
    old = default.for_engine(get_engine("vllm@0.11"))
    assert old != default and old.moe_kernels[0] is VLLM_MXFP4_MARLIN_HOPPER
    assert Predictor().for_engine(get_engine("vllm@0.11")).moe_kernels == ()  # the bound prices none
    with pytest.raises(CostModelError, match="moe_kernels"):
        Predictor("grey-box", "vllm", moe_kernels=("marlin",))
    with pytest.raises(CostModelError, match="moe_kernels"):
        Predictor(moe_kernels=(VLLM_MXFP4_MARLIN_HOPPER,))


# ------------------------------------------------------------------ on the measured corpus


@pytest.fixture(scope="module")
def corpus():
    pytest.importorskip("pandas", reason="the [measured] extra is not installed")
    pytest.importorskip("aiconfigurator_core", reason="the [measured] extra is not installed")
    import pandas as pd

    from costmodel.measured.corpus import _table_paths

    def rows(system: str) -> "pd.DataFrame":
        (path,) = [p for fw, _, p in _table_paths(system, "moe") if fw == "vllm"]
        return pd.read_parquet(path)

    return rows


def _gpt_oss_marlin(df):
    """The parquet rows of vLLM's Marlin MXFP4 kernel at gpt-oss-120b's expert shape (h 2,880,
    I/tp 2,880, top-4 of 128, ep 1, balanced routing)."""
    return (
        df["kernel_source"].str.contains("marlin")
        & (df["moe_dtype"] == "w4a16_mxfp4")
        & (df["hidden_size"] == 2880)
        & (df["inter_size"] / df["moe_tp_size"] == 2880)
        & (df["topk"] == 4)
        & (df["num_experts"] == 128)
        & (df["moe_ep_size"] == 1)
        & (df["distribution"] == "balanced")
    )


def test_named_kernel_on_its_own_device_is_its_parquet_rows(corpus):
    """On an L40S the corpus times vLLM's Marlin MXFP4 kernel at gpt-oss-120b's shape: the curve
    is those rows (the fastest per token count), measured, not a neighbour."""
    from costmodel.measured.moe import moe_curve

    df = corpus("l40s")
    want = (df[_gpt_oss_marlin(df)].groupby("num_tokens")["latency"].min() * 1e-3).to_dict()
    assert len(want) > 10
    c = moe_curve("l40s", "vllm", MoEShape(2880, 2880, 4, 128, **MARLIN))
    assert c.source == "measured" and c.own_device
    for t, s in want.items():
        assert float(c.at(t)) == pytest.approx(s, rel=1e-12)


def test_hopper_marlin_is_the_devices_own_kernel_at_the_nearest_shape(corpus):
    """On an H100 the corpus times Marlin for MXFP4 only at another shape (h 3,584, I/tp 3,072,
    top-16 of 896): the curve is those rows scaled by the bound ratio of the padded shapes,
    before any other device's rows of the exact shape; not the Triton kernel's (about 3x slower
    at 8,192 tokens, a little faster at 16)."""
    from costmodel.measured.moe import moe_bound_s, moe_curve

    df = corpus("h100_sxm")
    sel = (
        df["kernel_source"].str.contains("marlin")
        & (df["moe_dtype"] == "w4a16_mxfp4")
        & (df["hidden_size"] == 3584)
        & (df["inter_size"] / df["moe_tp_size"] == 3072)
        & (df["num_experts"] == 896)
        & (df["moe_ep_size"] == 1)
        & (df["distribution"] == "balanced")
    )
    meas = df[sel].groupby("num_tokens")["latency"].min() * 1e-3
    shape = MoEShape(2880, 2880, 4, 128, **MARLIN)
    c = moe_curve("h100-sxm", "vllm", shape)
    assert c.own_device and c.source == "neighbour"
    assert "marlin kernels (the engine's)" in c.basis and "h 3584, I/tp 3072, top-16 of 896" in c.basis
    t = 8192.0
    target = MoEShape(3072, 2944, 4, 128, dtype="w4a16_mxfp4")  # 2,880 padded to 256 and 128
    measured = MoEShape(3584, 3072, 16, 896, dtype="w4a16_mxfp4")  # already whole multiples
    want = meas[t] * moe_bound_s("h100-sxm", target, [t])[0] / moe_bound_s("h100-sxm", measured, [t])[0]
    assert float(c.at(t)) == pytest.approx(want, rel=1e-9)
    triton = moe_curve("h100-sxm", "vllm", MoEShape(2880, 2880, 4, 128, dtype="w4a16_mxfp4"))
    assert float(c.at(8192)) > 2.5 * float(triton.at(8192))
    assert float(c.at(16)) < float(triton.at(16))


def _sglang_marlin(system: str, tokens: int) -> float:
    """SGLang's Marlin MoE (int4 weights) at h 7,168, I/tp 2,048, top-8 of 384, ep 1, balanced:
    the fastest row at ``tokens`` on ``system``, s, read straight from its parquet file."""
    import pandas as pd

    from costmodel.measured.corpus import _table_paths

    (path,) = [p for fw, _, p in _table_paths(system, "moe") if fw == "sglang"]
    df = pd.read_parquet(path)
    sel = (
        (df["kernel_source"] == "sglang_marlin_moe")
        & (df["moe_dtype"] == "int4_wo")
        & (df["hidden_size"] == 7168)
        & (df["inter_size"] / df["moe_tp_size"] == 2048)
        & (df["topk"] == 8)
        & (df["num_experts"] == 384)
        & (df["moe_ep_size"] == 1)
        & (df["distribution"] == "balanced")
        & (df["num_tokens"] == tokens)
    )
    return float(df[sel]["latency"].min()) * 1e-3


def test_the_bridge_is_the_efficiency_both_devices_measure(corpus):
    """The corpus times SGLang's Marlin MoE on the A100 and on the RTX PRO 6000 at the same
    shapes. At 16,384 tokens (341 rows per expert) both are compute-bound, so the bound ratio
    is the datasheets' dense BF16 peaks, 500 / 312 TFLOP/s, and the bridge's factor is the
    measured ratio over it (1.03: the bound ratio holds there); at 1,536 (32 rows per expert,
    near the A100's ridge, below the RTX PRO 6000's) the A100 is slower than the bound ratio
    says (1.71 on these rows)."""
    from costmodel.measured.moe import device_bridge

    b = device_bridge("a100-sxm-80gb", "rtx-pro-6000", MoEShape(2880, 2880, 4, 128, **MARLIN))
    assert not isinstance(b, str) and b.kernel_source == "sglang_marlin_moe" and b.shape.dtype == "int4_wo"
    assert (b.shape.hidden, b.shape.inter, b.shape.topk, b.shape.experts) == (7168, 2048, 8, 384)
    raw = _sglang_marlin("a100_sxm", 16384) / _sglang_marlin("rtx_pro_6000_server", 16384)
    assert float(b.at(16384 * 8 / 384)) == pytest.approx(raw * 312 / 500, rel=1e-6)
    assert float(b.at(16384 * 8 / 384)) == pytest.approx(1.03, abs=0.01)
    assert float(b.at(1536 * 8 / 384)) > 1.6
    # the bridge is built from ep 1 rows: an ep 2 shape takes the same factor at the same load
    ep2 = device_bridge("a100-sxm-80gb", "rtx-pro-6000", MoEShape(2880, 2880, 4, 128, ep=2, **MARLIN))
    assert not isinstance(ep2, str) and list(ep2.factor) == list(b.factor)
    # a device of the same compute without rows of its own takes the measured one's factor; a
    # device of another compute (the H100 PCIe: 756 against the SXM's 989 BF16 TFLOP/s) has none
    pcie = device_bridge("a100-pcie-80gb", "rtx-pro-6000", MoEShape(2880, 2880, 4, 128, **MARLIN))
    assert not isinstance(pcie, str) and pcie.via == "a100-sxm-80gb" and list(pcie.factor) == list(b.factor)
    why = device_bridge("h100-pcie", "rtx-pro-6000", MoEShape(2880, 2880, 4, 128, **MARLIN))
    assert isinstance(why, str) and "architecture and tensor peaks" in why


def test_the_same_chip_with_less_bandwidth_is_never_priced_faster(corpus):
    """The A100 40 GB (1,555 GB/s) and the A100 PCIe 80 GB (1,935 GB/s) have the A100 SXM 80 GB's
    SMs, clock and 312 TFLOP/s (2,039 GB/s): their gpt-oss experts take at least its time at every
    token count, equal where the kernel computes (a review found the 40 GB card 23 % faster at
    1,024 tokens when only the SXM 80 GB took the bridge)."""
    from costmodel.measured.moe import moe_curve

    shape = MoEShape(2880, 2880, 4, 128, **MARLIN)
    sxm = moe_curve("a100-sxm-80gb", "vllm", shape)
    for slower in ("a100-sxm-40gb", "a100-pcie-80gb"):
        c = moe_curve(slower, "vllm", shape)
        assert "a100-sxm-80gb's factor" in c.basis
        for t in (1, 16, 128, 512, 1024, 2048, 4096, 16384):
            assert float(c.at(t)) >= float(sxm.at(t)) * (1 - 1e-9), (slower, t)
        assert float(c.at(16384)) == pytest.approx(float(sxm.at(16384)), rel=1e-6)  # compute-bound


def test_gpt_oss_on_a100_takes_the_bridge(corpus):
    """gpt-oss-120b's MXFP4 experts on an A100 (vLLM 0.11 runs Marlin there) are priced from the
    RTX PRO 6000's Marlin rows: at 2,048 tokens (64 rows per expert: the A100's own 2,048-token
    budget) the bound ratio times the factor SGLang's Marlin rows measure at 64 rows per expert
    (3,072 of their tokens), which is above 1.2: the A100 is slower there than the bound ratio
    alone says."""
    from costmodel.measured.moe import moe_bound_s, moe_curve

    shape = MoEShape(2880, 2880, 4, 128, **MARLIN)
    c = moe_curve("a100-sxm-80gb", "vllm", shape)
    assert not c.own_device and "factor" in c.basis and "sglang_marlin_moe int4_wo" in c.basis
    ref = MoEShape(7168, 2048, 8, 384, dtype="int4_wo")
    q = (_sglang_marlin("a100_sxm", 3072) / _sglang_marlin("rtx_pro_6000_server", 3072)) / (
        moe_bound_s("a100-sxm-80gb", ref, (3072.0,))[0] / moe_bound_s("rtx-pro-6000", ref, (3072.0,))[0]
    )
    assert q > 1.2
    df = corpus("rtx_pro_6000_server")
    rtx = float(df[_gpt_oss_marlin(df) & (df["num_tokens"] == 2048)]["latency"].min()) * 1e-3
    padded = MoEShape(3072, 2944, 4, 128, dtype="w4a16_mxfp4")  # 2,880 padded to 256 and 128
    ratio = moe_bound_s("a100-sxm-80gb", padded, (2048.0,))[0] / moe_bound_s("rtx-pro-6000", padded, (2048.0,))[0]
    assert float(c.at(2048)) == pytest.approx(rtx * ratio * q, rel=1e-9)


def test_a_kernel_the_corpus_lacks_says_so(corpus):
    from costmodel.measured.moe import moe_curve

    c = moe_curve(
        "h100-sxm", "vllm", MoEShape(4096, 7168, 2, 8, dtype="bfloat16", kernel="marlin", pad=(256, 128))
    )
    plain = moe_curve("h100-sxm", "vllm", MoEShape(4096, 7168, 2, 8))
    assert c.source == "neighbour" and c.basis.startswith("moe: no marlin bfloat16 kernels measured")
    assert float(c.at(512)) == float(plain.at(512))


def test_engine_prices_and_says_its_kernel(corpus):
    """A vllm@0.11 run of gpt-oss-120b on an H100 prices the experts with Marlin and holds its
    padded weights out of the KV pool; vllm@0.12 runs the Triton kernel: neither."""
    from graphs.serving.pricing.predict import predict_step
    from graphs.serving.sim.engine import profile_engine

    old, new = get_engine("vllm@0.11"), get_engine("vllm@0.12")
    slow = predict_step("gpt-oss-120b", "h100", "prefill", batch=1, seq=4096, moe_kernels=old.moe_kernels)
    fast = predict_step("gpt-oss-120b", "h100", "prefill", batch=1, seq=4096, moe_kernels=new.moe_kernels)
    assert slow.corrected_s > 1.5 * fast.corrected_s
    bases = {n["basis"] for n in slow.nodes.values() if "marlin" in n["basis"]}
    assert bases and not any("marlin" in n["basis"] for n in fast.nodes.values())
    # 36 MoE layers of 128 experts at 2,880 x 2,880, as vLLM's create_weights allocates them
    want = 36 * (_create_weights_bytes(2880, 2880, 128, True) - _create_weights_bytes(2880, 2880, 128, False))
    assert profile_engine(old, "gpt-oss-120b", "h100").kernel_weight_bytes == pytest.approx(want)
    assert profile_engine(new, "gpt-oss-120b", "h100").kernel_weight_bytes == 0.0
    assert profile_engine(old, "llama-3.1-8b", "h100").kernel_weight_bytes == 0.0  # dense: no experts


def test_kv_pool_gives_up_the_padded_weights():
    """The simulator's pool (vLLM's rule): the padded bytes come out of it as weights do."""
    from costmodel.hardware import get_device
    from graphs.serving.sim.engine import kv_blocks, pool_memory, profile_engine
    from graphs.serving.step.ledger_fit import build_ledger
    from graphs.serving.step.workload import as_workload

    hw = get_device("h100")
    led = build_ledger(as_workload("gpt-oss-120b"), "decode", 1, 1, None, None)
    cfg = profile_engine(get_engine("vllm@0.11"), "gpt-oss-120b", hw)
    plain = profile_engine(get_engine("vllm@0.12"), "gpt-oss-120b", hw)
    k = float(led.kv_bytes_per_token) * cfg.block_size
    fewer = kv_blocks(led, pool_memory(hw), plain) - kv_blocks(led, pool_memory(hw), cfg)
    assert abs(fewer - cfg.kernel_weight_bytes / k) <= 1


def test_simulate_says_the_kernel_once(capsys, corpus):
    from graphs.cli.main import main

    argv = [
        "simulate", "gpt-oss-20b", "--device", "h100", "--engine", "vllm@0.11", "--predict", "vllm",
        "--requests", "8", "--prompt", "fixed:256", "--output", "fixed:8", "--rate", "4",
    ]  # fmt: skip
    assert main([*argv, "--json"]) == 0
    note = json.loads(capsys.readouterr().out)["engine"]["moe_kernel_note"]
    assert "marlin kernels on Hopper" in note and "get_mxfp4_backend" in note and "GB more a device" in note
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert text.count("marlin kernels on Hopper") == 1  # once, as a note
    assert "moe: marlin kernels (the engine's)" in text  # and what the experts' seconds rest on


def test_release_note_names_only_the_profiles_own_rules():
    old = get_engine("vllm@0.11").kernel_release_note("0.24.0")
    assert "marlin for w4a16_mxfp4 experts on Hopper" in old
    assert "marlin" not in get_engine("sglang@0.5.1").kernel_release_note("0.5.14")  # SGLang has none


@pytest.mark.parametrize(
    ("tp", "dp", "ep", "experts", "inter"),
    [
        (1, 1, False, 128, 2880),
        (2, 1, False, 128, 1440),  # every expert split by width over the tp group
        (1, 2, False, 128, 1440),  # ... over the dp x tp group without EP (as ExpertStage prices it)
        (2, 1, True, 64, 2880),  # EP inside TP: whole experts, half of them a device
        (2, 2, True, 32, 2880),
        (1, 3, True, 43, 2880),  # the busiest device holds ceil(128 / 3)
    ],
)
def test_padding_follows_the_expert_split(tp, dp, ep, experts, inter):
    from graphs.serving.sim.engine import moe_kernel_padding

    rule, got = moe_kernel_padding(
        get_engine("vllm@0.11"), "gpt-oss-120b", "h100", tp=tp, dp=dp, expert_parallel=ep
    )
    want = 36 * (
        _create_weights_bytes(2880, inter, experts, True) - _create_weights_bytes(2880, inter, experts, False)
    )
    assert rule is VLLM_MXFP4_MARLIN_HOPPER and got == pytest.approx(want, rel=1e-12)


def test_a_fit_applies_only_to_the_kernel_it_priced():
    """A fit is judged on its own model and device, where its kernel scale was learnt: refused only
    where the run's engine would price that model's experts there with another kernel."""
    from graphs.serving.engines import EngineOverheads
    from graphs.serving.planning.serving_fit import ServingFit, check_fit_kernel

    def fit(kernel, model="gpt-oss-120b", device="h100-sxm"):
        return ServingFit(model, device, 1, "vllm", EngineOverheads(), {}, moe_kernel=kernel)

    check_fit_kernel(fit("marlin"), get_engine("vllm@0.11"), "gpt-oss-120b", "h100")
    check_fit_kernel(fit(None), get_engine("vllm@0.12"), "gpt-oss-120b", "h100")
    with pytest.raises(
        CostModelError, match=r"with the corpus.s fastest MoE kernel, but engine vllm@0\.11 runs the marlin"
    ):
        check_fit_kernel(fit(None), get_engine("vllm@0.11"), "gpt-oss-120b", "h100")
    with pytest.raises(CostModelError, match="refit under this engine"):
        check_fit_kernel(fit("marlin"), get_engine("vllm@0.12"), "gpt-oss-120b", "h100")
    bound = ServingFit("gpt-oss-120b", "h100-sxm", 1, None, EngineOverheads(), {})
    check_fit_kernel(bound, get_engine("vllm@0.11"), "gpt-oss-120b", "h100")  # the bound prices none
    # applied elsewhere, a fit is judged where it was made: a dense model's fit priced no experts,
    # an H100 fit under vllm@0.12 priced Triton there (an A100 run's Marlin is not its concern)
    check_fit_kernel(fit(None, "llama-3.1-8b"), get_engine("vllm@0.11"), "gpt-oss-120b", "h100")
    check_fit_kernel(fit(None), get_engine("vllm@0.12"), "gpt-oss-120b", "a100-sxm-80gb")
    check_fit_kernel(fit("marlin"), get_engine("vllm@0.11"), "llama-3.1-8b", "h100")


def test_size_pads_each_family_as_it_runs_its_experts(monkeypatch):
    """``size --enable-expert-parallel`` of gpt-oss-20b (24 MoE layers, 32 experts of 2,880) at
    TP 2 under vllm@0.11: the aggregated EP family holds 16 whole experts a device, the
    disaggregated family's pools every expert at 1,440 wide (Marlin pads it to 1,536); each KV
    pool gives up its own padding (pinned to vLLM's create_weights tensors). A sliding-window
    model sizes at all (its floors read each decode's context)."""
    import graphs.serving.planning.sizing as sizing

    seen = []
    real = sizing.ceiling_rate

    def ceiling(*a, topology, engine, **k):
        seen.append((topology.expert_parallel, engine.kernel_weight_bytes))
        return real(*a, topology=topology, engine=engine, **k)

    monkeypatch.setattr(sizing, "ceiling_rate", ceiling)
    res = sizing.size_deployment(
        "gpt-oss-20b", rate=5.0, slo_ttft=2.0, slo_tpot=0.1, devices=["h100"], tps=(2,), requests=200,
        runners_up=8, profile=get_engine("vllm@0.11"), expert_parallel=True,
    )  # fmt: skip

    def pad(inter, experts):
        return 24 * (
            _create_weights_bytes(2880, inter, experts, True)
            - _create_weights_bytes(2880, inter, experts, False)
        )

    assert seen == [(True, pytest.approx(pad(2880, 16))), (False, pytest.approx(pad(1440, 32)))]
    assert {bool(d.prefill_replicas) for d in res.candidates} == {False, True}


def test_fit_files_record_the_kernel(tmp_path):
    from graphs.serving.engines import EngineOverheads
    from graphs.serving.planning.serving_fit import ServingFit, read_fit, write_fit

    path = tmp_path / "fit.json"
    write_fit(
        ServingFit("gpt-oss-120b", "h100-sxm", 1, "vllm", EngineOverheads(), {}, moe_kernel="marlin"),
        str(path),
    )
    doc = json.loads(path.read_text())
    assert doc["version"] == 5 and doc["moe_kernel"] == "marlin"
    assert read_fit(str(path)).moe_kernel == "marlin"
    old = {k: v for k, v in doc.items() if k != "moe_kernel"} | {"version": 3}
    path.write_text(json.dumps(old))
    assert read_fit(str(path)).moe_kernel is None  # a 3 file: the corpus's fastest priced it
    path.write_text(json.dumps(doc | {"moe_kernel": "Marlin Kernel"}))
    with pytest.raises(CostModelError, match="moe_kernel must be"):
        read_fit(str(path))


def test_a_device_without_moe_rows_takes_its_own_generations_first(corpus):
    """The H100 PCIe (Hopper, HBM2e; no MoE rows of its own) prices Mixtral's experts from the H100
    SXM's rows (Hopper, HBM3), scaled by the bound ratio, not from the A100's, whose 2.04 TB/s is
    nearer its 2.0 TB/s: a kernel's efficiency goes with the SMs that run it."""
    from costmodel.measured.moe import moe_curve

    c = moe_curve("h100-pcie", "vllm", MoEShape(4096, 7168, 2, 8))
    assert c.basis.startswith("moe: h100-sxm's vllm kernels scaled by the bound ratio")


def test_the_same_compute_is_every_shared_tensor_peak():
    """A GB300 takes the B300's rows as its own compute (the catalog: FP4 15, FP8 5, BF16 2.5
    PFLOP/s on both), never the GB200's (FP4 10 PFLOP/s), though both match its BF16 peak and
    bandwidth; a measured device stands in for itself with no bridge to speak of."""
    from costmodel.measured.moe import _same_compute, device_bridge

    assert _same_compute("gb300") == "b300" and _same_compute("a100-pcie-80gb") == "a100-sxm-80gb"
    assert _same_compute("h100-pcie") is None  # 756 against the SXM's 989 BF16 TFLOP/s
    why = device_bridge("a100-sxm-40gb", "a100-sxm-80gb", MoEShape(7168, 2048, 8, 384, dtype="int4_wo", kernel="marlin"))
    assert isinstance(why, str) and why.endswith("no bridge")
