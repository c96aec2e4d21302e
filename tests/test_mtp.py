"""DeepSeek-V3's multi-token-prediction module (graphs.blocks.mtp, ModelConfig.mtp_active): a
plain run of the catalog's deepseek-v3-mtp neither loads nor runs it (vLLM's
DeepseekV2ForCausalLM.load_weights skips the "spec decode layers"; only its DeepSeekMTP draft
model loads them), so it is DeepSeek-V3; speculative decoding that drafts with it pays it.

One MTP module of DeepSeek-V3 (config.json: d = 7168, V = 129,280, 256 routed + 1 shared expert
of width 2,048, MLA ranks q 1,536 / kv 512, 128 heads of 128 + 64 rope, v 128) holds
  experts 257 x 3 x 7168 x 2048                                     = 11,318,329,344
  router 256 x 7168 + 256 (bias)                                    =      1,835,264
  MLA 7168x1536 + 1536x128x192 + 7168x576 + 512x128x256 + 128x128x7168
      + norms 1536 + 512                                            =    187,107,328
  the layer's two norms 2 x 7168                                    =         14,336
  eh_proj 2d x d = 2 x 7168^2                                       =    102,760,448
  enorm, hnorm, head norm 3 x 7168                                  =         21,504
  its own embedding and head 2 x 129,280 x 7168                     =  1,853,358,080
                                                            total   = 13,463,426,304
(the model card's "14B MTP module": 685B on Hugging Face, 671B main model).
"""

import dataclasses

import numpy as np
import pytest

from costmodel.cost import as_float
from costmodel.errors import CostModelError
from costmodel.hardware import get_device
from costmodel.keys import GROUP
from graphs import decode_report, prefill_report
from graphs.serving.sim.specdec_sim import SpecConfig, Speculator, spec_forms
from graphs.serving.step.ledger_fit import build_ledger
from graphs.serving.step.workload import as_workload
from models import ModelConfig, get_model, param_counts
from models.params import param_bytes

MTP_PARAMS = 13_463_426_304  # module doc
HW, TP = "h200", 16


def _ledger(cfg):
    return build_ledger(as_workload(cfg), "decode", 1, TP, None, None)


def test_a_plain_run_of_the_mtp_checkpoint_is_deepseek_v3():
    """Same decode and prefill steps, weights and KV per device; no MTP node in the graph."""
    mtp, base = get_model("deepseek-v3-mtp"), get_model("deepseek-v3")
    assert mtp.mtp_layers == 1 and not mtp.mtp_active
    dm, db = decode_report(mtp, HW, ctx=4096, tp=TP), decode_report(base, HW, ctx=4096, tp=TP)
    assert dm.step_s == db.step_s
    assert prefill_report(mtp, HW, seq=512, tp=TP).step_s == prefill_report(base, HW, seq=512, tp=TP).step_s
    lm, lb = _ledger(mtp), _ledger(base)
    assert lm.weights_bytes == lb.weights_bytes and lm.kv_bytes_per_token == lb.kv_bytes_per_token
    g = as_workload(mtp).graph("decode", batch=1, ctx=4096, tp=TP)
    assert not any(d.get(GROUP) == "mtp" for _, d in g.nodes(data=True))
    assert param_bytes(mtp) == param_bytes(base)


def test_the_parameter_count_keeps_the_checkpoint_and_the_weights_follow_loading():
    """The count is the checkpoint's (671.03B + 13.46B = 684.49B, the card's 685B); its bytes
    count only when loaded. The checkpoint is FP8 (its quantization_config): the module's own
    embedding and head, V x d = 129,280 x 7,168 = 926,679,040 each, stay BF16 and the rest is FP8:
    (13,463,426,304 - 2 x 926,679,040) x 1 + 2 x 926,679,040 x 2 = 15,316,784,384 more bytes."""
    mtp = get_model("deepseek-v3-mtp")
    pc = param_counts(mtp)
    assert pc.mtp == MTP_PARAMS
    assert pc.total == param_counts(get_model("deepseek-v3")).total + MTP_PARAMS
    full = dataclasses.replace(mtp, mtp_active=True)
    table = 129_280 * 7_168
    assert param_bytes(full) - param_bytes(mtp) == (MTP_PARAMS - 2 * table) * 1 + 2 * table * 2


def test_speculating_with_mtp_pays_the_module():
    """--spec-draft mtp: the drafts cost the module's forward (the step with it loaded minus the
    plain one, > 0), the KV blocks are sized with its weights and its one MLA layer's cache
    ((512 + 64) x 2 bytes = 1,152 bytes per token, replicated on every tp rank), and the analytic
    TPOT pays the drafts: (verify + k x F) / E with F > 0."""
    hw = get_device(HW)
    mtp = get_model("deepseek-v3-mtp")
    full = dataclasses.replace(mtp, mtp_active=True)
    g = as_workload(full).graph("decode", batch=1, ctx=4096, tp=TP)
    assert any(d.get(GROUP) == "mtp" for _, d in g.nodes(data=True))
    sp = Speculator(SpecConfig.parse("mtp", 1, "0.8"), as_workload(mtp), hw, tp=TP)
    plain = _ledger(mtp)
    assert as_float(sp.ledger.weights_bytes) == as_float(_ledger(full).weights_bytes)
    assert as_float(sp.ledger.weights_bytes) > as_float(plain.weights_bytes)
    assert as_float(sp.ledger.kv_bytes_per_token) - as_float(plain.kv_bytes_per_token) == 1152
    sp.iteration_time(0, 0.0, [], None, [(2.0, 1000.0)])
    assert sp.draft_s > 0

    f = spec_forms(mtp, hw, TP, SpecConfig.parse("mtp", 1, "0.8"))
    b, ctx = np.array([1.0]), np.array([4096.0])
    module = f.draft.step_array(b, ctx) - f.minus.step_array(b, ctx)
    assert module[0] > 0
    assert f.memory(b, ctx)[0] > 0 and f.ttft_extra(np.array([512.0]))[0] > 0


def test_mtp_active_must_be_a_bool():
    with pytest.raises(CostModelError, match="mtp_active must be True or False"):
        ModelConfig("m", 64, 2, 4, 128, 100, mtp_active="yes")


def test_a_plain_report_says_the_module_is_left_out():
    note = "multi-token-prediction module(s) are neither loaded nor run without speculative decoding"
    assert any(note in n for n in decode_report("deepseek-v3-mtp", HW, ctx=4096, tp=TP).notes)
    assert not any(note in n for n in decode_report("deepseek-v3", HW, ctx=4096, tp=TP).notes)
