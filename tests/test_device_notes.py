"""Every command that prices or compares a device says, once, what that device makes its answer
assume: docs/contributing.md's "a report on a preliminary device says so once", and a bf16
matmul bounded by another format's roof is said to be (``costmodel.hardware.fallback.roof_notes``).
``decode``, ``prefill``, ``model analyze``, ``simulate``, ``op``, ``report`` and ``derive`` print
the notes in their reports; the commands below said neither on a Rubin (vr200: NVIDIA's announced
figures; no BF16 rate published) and now say them on stderr and in their ``--json`` notes."""

from __future__ import annotations

import json

import pytest

from graphs.cli import main

PRELIMINARY = "vr200 figures are preliminary"
BF16 = "vr200 publishes no tensor bf16 rate"

# (argv, whether the command prices bf16 matmuls: a model's analysis does, a memory ledger or a
# comparison of published roofs says only the device's own notes)
CASES = [
    (["serve", "disagg", "llama-3.1-8b", "--prefill-device", "vr200", "--decode-device", "vr200"], True),
    (["serve", "specdec", "llama-3.1-8b", "llama-3.2-1b", "--device", "vr200"], True),
    (["serve", "split", "llama-3.1-8b", "--attention-device", "vr200", "--ffn-device", "vr200"], True),
    (["serve", "sram", "llama-3.1-8b", "--device", "vr200"], True),
    (["serve", "plans", "llama-3.1-8b", "--device", "vr200"], True),
    (["fusion", "audit", "llama-3.1-8b", "--device", "vr200"], True),
    (["fusion", "plan", "llama-3.1-8b", "--device", "vr200", "--seq", "64"], True),
    (["hw", "compare", "h100", "vr200"], False),
    (["hw", "claim", "--old", "h100:fp8", "--new", "vr200:fp8"], False),
    (["ledger", "llama-3.1-8b", "--device", "vr200"], False),
    (["sweep", "llama-3.1-8b", "--device", "vr200"], True),
    (["search", "llama-3.1-8b", "--devices", "vr200"], True),
    (
        "size llama-3.1-8b --devices vr200 --rate 2 --slo-ttft 1 --slo-tpot 0.05 --objective gpus".split(),
        True,
    ),
]


@pytest.mark.parametrize(("argv", "bf16"), CASES, ids=[" ".join(a[:2]) for a, _ in CASES])
def test_a_preliminary_device_is_said_once_by_every_command(capsys, argv, bf16):
    assert main(argv) == 0
    out, err = capsys.readouterr()
    assert (out + err).count(PRELIMINARY) == 1, argv
    assert (out + err).count(BF16) == int(bf16), argv
    same = [a.replace("vr200", "b200") for a in argv]  # a datasheet part with a bf16 rate
    assert main(same) == 0
    out, err = capsys.readouterr()
    assert "preliminary" not in out + err and "publishes no tensor" not in out + err, same


@pytest.mark.parametrize(
    "argv",
    [
        ["ledger", "llama-3.1-8b", "--device", "vr200", "--json"],
        ["sweep", "llama-3.1-8b", "--device", "vr200", "--json"],
        ["fusion", "audit", "llama-3.1-8b", "--device", "vr200", "--json"],
    ],
    ids=lambda a: " ".join(a[:2]),
)
def test_the_json_keeps_the_device_notes(capsys, argv):
    assert main(argv) == 0
    notes = json.loads(capsys.readouterr().out)["notes"]
    assert sum(PRELIMINARY in n for n in notes) == 1, notes


@pytest.mark.parametrize("command", ["decode", "prefill"])
def test_a_page_holds_the_notes_the_run_said(capsys, tmp_path, command):
    """``decode --weight-dtype fp8 --html`` says on stderr that its matmuls run W8A8; the page,
    drawn from the report objects, held only the notes the report prints, and lost it. Every
    ``--html`` page now carries the run's stderr notes it does not hold, once, as the terminal
    showed them (graphs.cli.html_option.with_said_notes)."""
    pytest.importorskip("plotly", reason="the html extra (plotly) is not installed")
    import html

    page = tmp_path / "p.html"
    assert (
        main([command, "llama-3.1-8b", "--device", "h100", "--weight-dtype", "fp8", "--html", str(page)]) == 0
    )
    err = capsys.readouterr().err
    said = [ln for ln in err.splitlines() if ln.startswith("costmodel: note: matmuls in fp8_e4m3 (W8A8)")]
    assert len(said) == 1
    doc = page.read_text()
    assert doc.count(html.escape(said[0], quote=False)) == 1


def test_a_cards_device_notes_are_the_devices_own_on_every_catalog_device():
    """``ledger`` reads its device's notes off the decode card without the engine
    (``card_device_notes``, by the marks of DEVICE_NOTE_MARKS); on every catalog device and alias
    series they are exactly ``roof_notes(hw, used=())``, the device's own (a series, preliminary
    figures), no roof substitution among them."""
    from costmodel.hardware import device_names, get_device
    from costmodel.hardware.fallback import roof_notes
    from graphs.serving.present.cards import card_device_notes

    for name in device_names():
        hw = get_device(name)
        assert card_device_notes({"roof_notes": list(roof_notes(hw))}) == roof_notes(hw, used=()), name
