"""Cards that ship with the package (costmodel.formstore, graphs.cli.cached.shipped_card): a
first command answers from them byte for byte as it does by deriving, without importing sympy
or networkx; a store built from other sources (an edit of a file its build read, a module added
beside them), or edited, is never an answer; an edit of a module the build never read leaves
it in use."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import costmodel.formstore as formstore
import graphs.cli.cached as cached
import graphs.serving.present.cards as cards
from costmodel.formcache import FORMAT, cache_key, sources_fingerprint
from costmodel.formstore import open_store, recorded_sources, write_store
from graphs.cli import main
from graphs.cli.cached import card_parts, shipped_entries, shipped_key
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


def _store(path: Path) -> Path:
    entries = {
        **shipped_entries("llama-3.2-1b", "h100-sxm"),
        **shipped_entries("llama-3.2-1b", "a100-sxm-40gb"),
    }
    groups = {"all": (b"", entries)}
    # the modules this process imported (no audit hook here: the configs and catalog are key parts)
    write_store(path, groups, NAMES, recorded_sources())
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


def _tree(root: Path) -> None:
    """A miniature installation: two folders of the packages, one module the build read."""
    for rel, text in {
        "costmodel/__init__.py": "",
        "costmodel/rules/__init__.py": "",
        "costmodel/rules/gemm.py": "FLOPS_PER_MAC = 2\n",
        "costmodel/rules/other.py": "X = 1\n",
        "costmodel/hardware/catalog.toml": "[devices]\n",
        "graphs/cli/simulate.py": "Y = 1\n",
    }.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)


def _entry(key):
    return {"all": (b"", {key: {"kind": "decode", "value": 1}})}


SOURCES = (["costmodel/rules/gemm.py", "costmodel/hardware/catalog.toml"], ["costmodel/rules"])


def _add_package(r: Path) -> None:
    (r / "costmodel/rules/sub").mkdir()
    (r / "costmodel/rules/sub/__init__.py").write_text("")


@pytest.mark.parametrize(
    ("edit", "served"),
    [
        (lambda r: None, True),
        # a module the build never imported, a command it did not run: the store stays in use
        (lambda r: (r / "graphs/cli/simulate.py").write_text("Y = 2\n"), True),
        (
            lambda r: (r / "costmodel/rules/other.py").write_text("X = 2\n"),
            True,
        ),  # its folder lists names only
        (lambda r: (r / "costmodel/rules/notes.txt").write_text("x"), True),  # nothing import finds
        # a file the build read, a byte of it: set aside
        (lambda r: (r / "costmodel/rules/gemm.py").write_text("FLOPS_PER_MAC = 1\n"), False),
        (lambda r: (r / "costmodel/hardware/catalog.toml").write_text("[devices]\n\n"), False),
        (lambda r: (r / "costmodel/rules/gemm.py").unlink(), False),
        # a module or package added where pkgutil registries import every one, or one taken away
        (lambda r: (r / "costmodel/rules/new_rule.py").write_text(""), False),
        (_add_package, False),
        (lambda r: (r / "costmodel/rules/other.py").unlink(), False),
    ],
)
def test_a_store_is_served_for_the_sources_its_build_read_only(tmp_path, edit, served):
    """The store is keyed by the contents of the files its build read and the module names in
    their folders: an edit of one of those sets it aside, an edit anywhere else does not."""
    root = tmp_path / "site"
    _tree(root)
    path = tmp_path / "cards.bin"
    write_store(path, _entry("decode-k"), NAMES, SOURCES, root=root)
    edit(root)
    formstore._stores.clear()
    store = open_store(path, root=root)
    assert (store is not None) == served
    if store is not None:
        assert store.get("decode-k") == {"kind": "decode", "value": 1, "format": FORMAT}
        assert store.get("decode-other") is None


def test_a_store_of_other_sources_is_not_read(tmp_path):
    """A store whose listed sources are not this installation's (missing, or outside the
    packages) or that is of another layout: no store."""
    root = tmp_path / "site"
    _tree(root)
    path = tmp_path / "cards.bin"
    write_store(path, _entry("decode-k"), NAMES, SOURCES, root=root)
    formstore._stores.clear()
    assert open_store(path) is None  # this installation has no costmodel/rules/gemm.py
    assert open_store(tmp_path / "missing.bin") is None
    for bad in (
        "../costmodel/x.py",
        "/etc/passwd",
        "costmodel/../../etc/passwd",
        "docs/x.md",
        "costmodel/.x",
    ):
        assert sources_fingerprint([bad], [], root=root) is None
        assert sources_fingerprint([], [bad], root=root) is None
    with pytest.raises(ValueError):
        write_store(path, _entry("decode-k"), NAMES, (["costmodel/none.py"], []), root=root)
    raw = path.read_bytes()
    path.write_bytes(raw.replace(b"costmodel-formstore 2 ", b"costmodel-formstore 1 ", 1))
    formstore._stores.clear()
    assert open_store(path, root=root) is None


def test_a_build_lists_what_it_read():
    """A build's recorded sources (benchmarks/build_cards.py's way: the hook started first) hold
    the modules it imported, the files it opened and their folders; not a command it did not
    run, nor byte code."""
    code = (
        "from costmodel.formstore import record_sources, recorded_sources\n"
        "record_sources()\n"
        "from graphs.cli.cached import shipped_entries\n"
        "shipped_entries('llama-3.2-1b', 'h100-sxm')\n"
        "import json; print(json.dumps(recorded_sources()))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    r = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300, cwd=ROOT
    )
    assert r.returncode == 0, r.stderr[-2000:]
    files, dirs = json.loads(r.stdout.splitlines()[-1])
    for f in (
        "graphs/serving/present/cards.py",  # built the cards
        "costmodel/rules/attention.py",  # imported by the rule registry's pkgutil scan
        "costmodel/hardware/catalog.toml",  # opened: the device's roofs
        "models/configs/llama-3.2-1b.json",  # opened: the model
    ):
        assert f in files, f
    assert {"costmodel/rules", "costmodel/hardware", "graphs/serving/step"} <= set(dirs)
    assert "graphs/cli/simulate.py" not in files and "graphs/serving/sim" not in dirs
    assert not any("__pycache__" in f or f.endswith(".pyc") for f in files)
    assert sources_fingerprint(files, dirs) is not None


def test_an_edited_store_is_never_an_answer(tmp_path):
    path = _store(tmp_path / "cards.bin")
    raw = path.read_bytes()
    formstore._stores.clear()
    store = open_store(path)
    assert store is not None and len(store) == 8  # 4 kinds x 2 devices
    parts = card_parts(build_parser().parse_args(["decode", "llama-3.2-1b", "--device", "h100"]), "h100-sxm")
    key = shipped_key("decode", parts)
    assert store.get(key)["kind"] == "decode"
    start, length, _ = store._find(key)
    head = store._base
    for at in (head + start, head + start + length // 2, head + start + length - 1):  # one entry's bytes
        bad = bytearray(raw)
        bad[at] ^= 0x01
        path.write_bytes(bytes(bad))
        formstore._stores.clear()
        s = open_store(path)
        assert s is not None and s.get(key) is None
    index_at = raw.index(b"\n", raw.index(b"\n") + 1) + 1
    for at in (index_at, index_at + 20):  # the index: a key id, an offset
        bad = bytearray(raw)
        bad[at] ^= 0x01
        path.write_bytes(bytes(bad))
        formstore._stores.clear()
        assert open_store(path) is None
    edited = raw.replace(b'"a100":"a100-sxm-40gb"', b'"a100":"h100-sxm"')  # the meta
    assert edited != raw
    path.write_bytes(edited)
    formstore._stores.clear()
    assert open_store(path) is None


def test_an_entry_is_bound_to_its_store_sources(tmp_path):
    """An entry's text carries a digest under its key and the sources' fingerprint: the same
    entry from a store of other sources, spliced in, does not read back."""
    root = tmp_path / "site"
    _tree(root)
    a, b = tmp_path / "a.bin", tmp_path / "b.bin"
    write_store(a, _entry("decode-k"), NAMES, SOURCES, root=root)
    write_store(b, _entry("decode-k"), NAMES, (["costmodel/rules/other.py"], []), root=root)
    formstore._stores.clear()
    sa, sb = open_store(a, root=root), open_store(b, root=root)
    assert sa is not None and sb is not None and sa.fingerprint != sb.fingerprint
    _, la, _ = sa._find("decode-k")
    _, lb, _ = sb._find("decode-k")
    ra, rb = a.read_bytes(), b.read_bytes()
    assert la == lb  # one entry each, the same text but for its digest: the same compressed length
    a.write_bytes(ra[:-la] + rb[-lb:])
    formstore._stores.clear()
    s = open_store(a, root=root)
    assert s is not None and s.get("decode-k") is None


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
        for key, card in shipped_entries(model, device).items():
            assert store.get(key) == json.loads(json.dumps({**card, "format": FORMAT}))
