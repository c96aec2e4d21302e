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


def test_the_library_says_once_that_a_config_of_no_torch_dtype_is_read_as_bf16(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """From Python, not only from the command line (review finding 8: ``get_model`` of such a
    dict read it as bf16 with nothing said)."""
    from models import get_model

    clear()
    assert get_model(CONFIG).dtype == "bf16"
    assert get_model(dict(CONFIG)).dtype == "bf16"  # the same config again: not said twice
    err = capsys.readouterr().err
    assert err.count("costmodel: note: model: the file states no torch_dtype:") == 1
    assert "taken as bf16" in err
    assert [n for n in said() if "torch_dtype" in n] == [err.strip().removeprefix("costmodel: ")]


def test_a_config_that_states_its_dtype_or_is_refused_gets_no_bf16_note(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from costmodel.errors import CostModelError
    from models import get_model

    clear()
    assert get_model({**CONFIG, "torch_dtype": "float16"}).dtype == "fp16"
    with pytest.raises(CostModelError, match="hidden_size"):  # refused: its one-line error alone
        get_model({**CONFIG, "hidden_size": 0})
    assert capsys.readouterr().err == "" and said() == ()


def test_a_caller_that_gives_the_format_mutes_the_bf16_note(capsys: pytest.CaptureFixture[str]) -> None:
    from costmodel.notes import ASSUMED_FLOAT, mute
    from models import get_model

    clear()
    mute(ASSUMED_FLOAT)
    get_model(CONFIG)
    assert capsys.readouterr().err == ""
    clear()  # a new run: said again
    get_model(CONFIG)
    assert "states no torch_dtype" in capsys.readouterr().err


def test_every_run_says_the_bf16_note_once_though_the_file_was_read_before(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The loader builds a file once per process; each command run still says it, once."""
    cfg = tmp_path / "m.json"
    cfg.write_text(json.dumps(CONFIG))
    for _ in range(2):
        _, err = _run(capsys, "decode", str(cfg), "--device", "h100", "--json")
        assert err.count("states no torch_dtype") == 1
