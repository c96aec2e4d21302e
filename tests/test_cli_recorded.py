"""README commands still print the numbers they printed before the package move.

Every value below was recorded from ``costmodel ... --json`` at commit dc291a3
(the last layout before the redesign into ``costmodel/cli/`` (since moved to ``graphs/cli/``), ``graphs/blocks/``,
``graphs/importers/`` and ``graphs/serving/``). A move of code must not move a
number; a deliberate model change updates this table with a reason.

2026-12-07: capacity checks divide the memory the driver reports where the catalog sources it
(``Hardware.memory_bytes``: an H100 SXM's 81,559 MiB = 85.52e9 B, not the datasheet's 80e9), as
the engines' KV pools always did: the 70B ledger at tp 4 holds batch 74 (was 66) and context
76,659 (was 68,235) per the same terms (``terms.total`` unchanged).

2026-12-07 (later): ``serve disagg``'s first decode step computes the prompt's last token, at a
context of the prompt (it was priced at the prompt + 1): 32 sequences x 1 token of KV less, the
disaggregated TTFT 451.2198 -> 451.2147 ms, equal to a lone request's in ``simulate --disagg``.

``serve disagg``'s link latency defaults to 0 s per layer, as ``simulate --disagg``, ``size`` and
``disaggregated()`` take it (it was 5 us): 32 layers x 5 us less, 451.2147 -> 451.0547 ms.
"""

import json

import pytest

from graphs.cli import main

RECORDED = [
    (["report", "--device", "a100"], "ridge_flop_per_byte", 200.64308681672026),
    (
        ["derive", "crossover", "--N", "18944", "--K", "3584", "--device", "h100"],
        "numeric.exact",
        327.43026559308737,
    ),
    (["derive", "crossover", "--N", "18944", "--K", "3584", "--device", "h100"], "numeric.integer", 328),
    (
        [
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
        ],
        "rows.1.bytes",
        139264.0,
    ),
    (
        ["ledger", "llama-3.1-70b", "--device", "h100", "--batch", "8", "--ctx", "8192", "--tp", "4"],
        "terms.total",
        40650105856.0,
    ),
    (
        ["ledger", "llama-3.1-70b", "--device", "h100", "--batch", "8", "--ctx", "8192", "--tp", "4"],
        "max_batch.value",
        74,
    ),
    (
        ["ledger", "llama-3.1-70b", "--device", "h100", "--batch", "8", "--ctx", "8192", "--tp", "4"],
        "max_context.value",
        76659,
    ),
    (["prefill", "llama-3.1-8b", "--seq", "32768", "--chunk", "8192"], "step_s", 0.8103931215678377),
    (["prefill", "llama-3.1-8b", "--seq", "32768", "--chunk", "8192"], "terms_s.sfu", 0.14482232661358974),
    (["decode", "qwen2.5-7b", "--batch", "1", "--ctx", "1024"], "step_s", 0.004242258685373135),
    (["decode", "qwen2.5-7b", "--batch", "1", "--ctx", "1024"], "kv_read_s", 1.752843462686567e-05),
    (["decode", "llama-3.1-70b", "--tp", "8", "--batch", "32"], "step_s", 0.009654625786799338),
    (
        ["decode", "llama-3.1-70b", "--tp", "8", "--batch", "32"],
        "terms_s.link:scale_up",
        0.0026052232888888888,
    ),
    (["fusion", "tiling", "--device", "h100"], "flash_attention.tiled_bytes", 69206016.0),
    (["hw", "claim", "--old", "h100:fp8:8", "--new", "b300:fp4:72"], "claimed_speedup", 68.21971802516549),
    (
        [
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
            "--ignore-capacity",  # decode batch 32 at 8704 tokens does not fit one H100: refused without it
            "--allow-long-context",  # 8,704 tokens past Llama-2's 4,096: refused without it
        ],
        "ttft.ttft_s",
        0.4510547464365913,
    ),
    (
        ["serve", "specdec", "llama-3.1-70b", "llama-3.1-8b", "--device", "b200", "--alpha", "0.8"],
        "best_speedup",
        2.3706943791380084,
    ),
    (
        ["serve", "split", "llama-3.1-70b", "--attention-device", "h200", "--ffn-device", "b200"],
        "step_s",
        0.03881656245829726,
    ),
    (["serve", "sram", "llama-3.1-70b", "--device", "groq-lpu", "--hop-latency", "1e-6"], "devices", 614),
    (
        ["serve", "plans", "mixtral-8x7b", "--plans", "8x1x1x1,2x1x4x1,4x2x1x2"],
        "0.step_s",
        0.004753532400410447,
    ),
]


def _at(data, path):
    for part in path.split("."):
        data = data[int(part)] if isinstance(data, list) else data[part]
    return data


@pytest.mark.parametrize(("argv", "path", "value"), RECORDED, ids=[f"{a[0]}-{p}" for a, p, _ in RECORDED])
def test_cli_prints_the_recorded_number(capsys, argv, path, value):
    code = main([*argv, "--json"])
    assert code == 0
    got = _at(json.loads(capsys.readouterr().out), path)
    assert got == pytest.approx(value, rel=1e-12)
