"""Cards that ship with the package (costmodel.formstore, graphs.cli.cached.shipped_card): a
first command answers from them byte for byte as it does by deriving, without importing sympy
or networkx, and a store built from other sources, or edited, is never an answer."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import costmodel.formstore as formstore
import graphs.cli.cached as cached
import graphs.serving.present.cards as cards
from costmodel.formcache import FORMAT, cache_key, content_fingerprint
from costmodel.formstore import open_store, write_store
from graphs.cli import main
from graphs.cli.cached import card_parts, shipped_entries
from graphs.cli.main import build_parser

ROOT = Path(__file__).resolve().parent.parent
NAMES = {
    "h100": "h100-sxm",
    "h100-sxm": "h100-sxm",
    "a100": "a100-sxm-40gb",
    "a100-sxm-40gb": "a100-sxm-40gb",
}
COMMANDS = [
    ("decode", "llama-3.2-1b", "--device", "h100", "--batch", "8", "--ctx", "2048", "--json"),
    ("decode", "llama-3.2-1b", "--device", "A100", "--batch", "3", "--ctx", "777"),
    ("prefill", "llama-3.2-1b", "--device", "h100-sxm", "--batch", "2", "--seq", "4096", "--json"),
    ("model", "analyze", "llama-3.2-1b", "--device", "a100", "--phase", "decode", "--json"),
    ("model", "analyze", "llama-3.2-1b", "--device", "h100", "--phase", "prefill"),
    ("ledger", "llama-3.2-1b", "--device", "h100", "--batch", "8", "--ctx", "4096", "--json"),
]


def _store(path: Path, fingerprint: str | None = None) -> Path:
    fp = content_fingerprint() if fingerprint is None else fingerprint
    entries = {
        **shipped_entries("llama-3.2-1b", "h100-sxm", fp),
        **shipped_entries("llama-3.2-1b", "a100-sxm-40gb", fp),
    }
    groups = {"all": (b"", entries)}
    write_store(path, groups, NAMES, fingerprint=fp)
    return path


@pytest.fixture
def shipped(tmp_path, monkeypatch):
    """A store of Llama-3.2-1B's cards on H100 and A100 in place of the package's, an empty cache."""
    path = _store(tmp_path / "cards.bin")
    monkeypatch.setattr(cards, "SHIPPED_CARDS", path)
    monkeypatch.setenv("COSTMODEL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("COSTMODEL_NO_SHIPPED_CARDS", raising=False)
    monkeypatch.setattr(cached, "_shipped", {})
    monkeypatch.setattr(formstore, "_stores", {})
    return path


def _run(capsys, argv):
    code = main(list(argv))
    return code, capsys.readouterr().out


@pytest.mark.parametrize("argv", COMMANDS)
def test_shipped_answers_equal_derived_ones(shipped, tmp_path, capsys, monkeypatch, argv):
    """Each command from the store (building a card refused) prints what it prints when it
    derives everything (store set aside, another empty cache)."""

    def refuse(*a, **k):
        raise AssertionError("built a card the store holds")

    for name in ("build_decode_card", "build_prefill_card", "build_analysis_card"):
        monkeypatch.setattr(cards, name, refuse)
    from_store = _run(capsys, argv)
    monkeypatch.undo()
    monkeypatch.setenv("COSTMODEL_CACHE_DIR", str(tmp_path / "other"))
    monkeypatch.setenv("COSTMODEL_NO_SHIPPED_CARDS", "1")
    assert from_store == _run(capsys, argv)


def test_a_shipped_card_is_kept_in_the_cache(shipped, tmp_path, capsys):
    _run(capsys, COMMANDS[0])
    assert len(list((tmp_path / "cache" / "forms").glob("decode-*.json"))) == 1


def test_first_command_imports_no_sympy_or_networkx(shipped, tmp_path):
    code = (
        "import sys, graphs.serving.present.cards as c, pathlib\n"
        f"c.SHIPPED_CARDS = pathlib.Path({str(shipped)!r})\n"
        "from graphs.cli import main\n"
        "for argv in " + repr([list(a) for a in COMMANDS]) + ":\n"
        "    main(argv)\n"
        "bad = [m for m in ('sympy', 'networkx', 'numpy') if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    env = {**os.environ, "COSTMODEL_CACHE_DIR": str(tmp_path / "sub"), "PYTHONPATH": str(ROOT)}
    env.pop("COSTMODEL_NO_SHIPPED_CARDS", None)
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]


def test_a_store_of_other_sources_is_not_read(tmp_path):
    """Built under another content fingerprint (any edited source, config or catalog): no store."""
    path = _store(tmp_path / "old.bin", fingerprint="0" * 64)
    formstore._stores.clear()
    assert open_store(path) is None
    assert open_store(tmp_path / "missing.bin") is None


def test_an_edited_store_is_never_an_answer(tmp_path):
    path = _store(tmp_path / "cards.bin")
    raw = path.read_bytes()
    formstore._stores.clear()
    store = open_store(path)
    assert store is not None and len(store) == 8  # 4 kinds x 2 devices
    key = next(iter(store._index))
    assert store.get(key)["kind"] in ("decode", "prefill", "analysis")
    start, length, _ = store._index[key]
    head = store._base
    for at in (head + start, head + start + length // 2, head + start + length - 1):  # one entry's bytes
        bad = bytearray(raw)
        bad[at] ^= 0x01
        path.write_bytes(bytes(bad))
        formstore._stores.clear()
        s = open_store(path)
        assert s is not None and s.get(key) is None
    edited = raw.replace(b'"a100":"a100-sxm-40gb"', b'"a100":"h100-sxm"')  # the header
    assert edited != raw
    path.write_bytes(edited)
    formstore._stores.clear()
    assert open_store(path) is None


def test_ledger_reads_the_decode_card():
    """``ledger`` and ``decode`` key the same card (their plans name the same fields)."""
    p = build_parser()
    dec = p.parse_args(["decode", "llama-3.2-1b", "--device", "h100"])
    led = p.parse_args(["ledger", "llama-3.2-1b", "--device", "h100"])
    assert card_parts(dec, "h100-sxm") == card_parts(led, "h100-sxm")
    assert cache_key("decode", *card_parts(dec, "h100-sxm"), fingerprint="x") == cache_key(
        "decode", *card_parts(led, "h100-sxm"), fingerprint="x"
    )


@pytest.mark.slow
def test_the_package_store_holds_what_a_build_gives(monkeypatch):
    """When the package's store matches the sources (it is rebuilt by benchmarks/build_cards.py
    after an edit), a sample of its cards equals the cards built now."""
    formstore._stores.clear()
    store = open_store(cards.SHIPPED_CARDS)
    if store is None:
        pytest.skip("the shipped cards were built from other sources: run benchmarks/build_cards.py")
    for model, device in (
        ("llama-3.1-8b", "h100-sxm"),
        ("mixtral-8x7b", "b200"),
        ("qwen3-next-80b-a3b", "a100-sxm-40gb"),
    ):
        for key, card in shipped_entries(model, device, store.fingerprint).items():
            assert store.get(key) == json.loads(json.dumps({**card, "format": FORMAT}))
