"""A report names the weight format it priced, once (issue 45: DeepSeek-V3 as its FP8 checkpoint
ships; issue 46: a detected quantisation applied but never echoed)."""

from graphs.cli import main


def _out(capsys, *argv):
    assert main(list(argv)) == 0
    return capsys.readouterr().out


def test_a_quantised_checkpoint_names_its_format(capsys):
    # deepseek-ai/DeepSeek-V3's quantization_config: fp8 e4m3 weights and matmuls (128 x 128
    # blocks), embedding and lm_head kept in bf16 (models/configs/deepseek-v3.json)
    out = _out(capsys, "decode", "deepseek-v3", "--device", "h200", "--tp", "8", "--batch", "4")
    line = "note: deepseek-v3: weights priced as stored: linears fp8_e4m3 in 128x128 blocks (one FP32 scale each) (matmuls fp8_e4m3); embedding bf16; lm_head bf16"
    assert out.count(line) == 1
    assert "does not fit" not in out


def test_a_float_model_says_nothing_and_a_flag_is_echoed(capsys):
    assert "weights priced as stored" not in _out(capsys, "decode", "llama-3.1-8b", "--device", "h100")
    out = _out(capsys, "prefill", "llama-3.1-8b", "--device", "h100", "--weight-dtype", "int4")
    assert out.count("weights priced as stored: linears int4") == 1


def test_an_fp8_checkpoint_runs_weight_only_where_no_fp8_roof(capsys):
    """An A100 has no FP8 tensor roof: vLLM runs FP8 checkpoints there as W8A16 (Marlin), so
    the matmuls run in the activations' bf16 (said once) instead of the command refusing."""
    assert main(["decode", "deepseek-v3", "--device", "a100-sxm-80gb", "--tp", "8", "--ignore-capacity"]) == 0
    cap = capsys.readouterr()
    assert cap.err.count("fp8_e4m3 weights are weight-only on a100-sxm-80gb") == 1
    assert (
        "linears fp8_e4m3 in 128x128 blocks (one FP32 scale each) (matmuls in the activations' dtype)"
        in cap.out
    )


def test_float_weights_say_the_activations_and_kv_follow_once(capsys):
    """A review found ``--weight-dtype fp32`` doubling the KV read (the activations and the cache
    follow a float weight dtype: ModelConfig.activation_dtype) with nothing said, where int8 and
    fp64 say their format. Said once on stderr; with --kv-dtype the cache keeps its own."""
    note = (
        "costmodel: note: --weight-dtype: weights in fp32: activations in fp32 too (they follow a float "
        "weight dtype; were bf16), and so the KV cache (was bf16; --kv-dtype bf16 keeps it)"
    )
    assert main(["decode", "llama-3.1-8b", "--weight-dtype", "fp32"]) == 0
    cap = capsys.readouterr()
    assert cap.err.count(note) == 1 and "KV read 320.52 us" in cap.out  # 160.26 us in bf16, doubled
    assert main(["decode", "llama-3.1-8b", "--weight-dtype", "fp32", "--kv-dtype", "bf16"]) == 0
    cap = capsys.readouterr()
    assert "activations in fp32 too (they follow a float weight dtype; were bf16)\n" in cap.err
    assert "KV read 160.26 us" in cap.out
    assert main(["decode", "llama-3.1-8b", "--weight-dtype", "bf16"]) == 0
    assert "--weight-dtype" not in capsys.readouterr().err  # the model's own: nothing changes
    assert main(["decode", "llama-3.1-8b", "--help"]) == 0
    assert "follow a float one (fp32, bf16, fp16)" in " ".join(capsys.readouterr().out.split())
