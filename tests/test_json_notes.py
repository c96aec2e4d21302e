"""``--json`` keeps what the command said on stderr: the assumptions a program must not lose."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from costmodel.notes import clear, said, say
from graphs.cli.common import dump
from graphs.cli.main import main

# a config with neither torch_dtype nor max_position_embeddings: two assumptions to say
CONFIG = {
    "model_type": "llama",
    "hidden_size": 256,
    "intermediate_size": 512,
    "num_attention_heads": 4,
    "num_key_value_heads": 4,
    "num_hidden_layers": 2,
    "vocab_size": 1000,
}


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[dict, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out), err


def test_decode_json_carries_the_stderr_notes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = tmp_path / "m.json"
    cfg.write_text(json.dumps(CONFIG))
    doc, err = _run(capsys, "decode", str(cfg), "--device", "h100", "--json")
    said_lines = [
        ln.removeprefix("costmodel: ") for ln in err.splitlines() if ln.startswith("costmodel: note:")
    ]
    assert len(said_lines) == 2  # bf16 taken, context not checked
    assert any("no torch_dtype" in n for n in said_lines)
    assert any("no max_position_embeddings" in n for n in said_lines)
    # every note on stderr is in the JSON, once, after the report's own
    assert [n for n in doc["notes"] if n in said_lines] == said_lines


def test_notes_are_per_command_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = tmp_path / "m.json"
    cfg.write_text(json.dumps(CONFIG))
    _run(capsys, "decode", str(cfg), "--device", "h100", "--json")
    doc, err = _run(capsys, "decode", "llama-3.1-8b", "--device", "h100", "--json")
    # a catalog model states both: nothing said, nothing carried over from the run before
    assert "costmodel: note:" not in err
    assert not any("no torch_dtype" in n for n in doc.get("notes", []))


def test_dump_merges_keeps_and_places(capsys: pytest.CaptureFixture[str]) -> None:
    clear()
    assert json.loads(dump({"a": 1})) == {"a": 1}  # nothing said, nothing added
    say("x assumed")
    say("x assumed")  # once
    say("y costed anyway", kind="warning")
    assert capsys.readouterr().err == "costmodel: note: x assumed\ncostmodel: warning: y costed anyway\n"
    assert said() == ("note: x assumed", "warning: y costed anyway")
    # appended after a report's own list, not repeated
    assert json.loads(dump({"notes": ["own", "note: x assumed"]}))["notes"] == [
        "own",
        "note: x assumed",
        "warning: y costed anyway",
    ]
    # a device's notes text keeps its meaning: the said ones go beside it
    doc = json.loads(dump({"notes": "a device's own text"}))
    assert doc["notes"] == "a device's own text" and doc["notes_said"] == list(said())
    # a list result has no place for them
    assert json.loads(dump([1, 2])) == [1, 2]
    clear()
    assert said() == ()
