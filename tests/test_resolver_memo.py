"""Catalog names are resolved once per process (issue 44 item 6), and a folder of the same name in
the working directory still takes precedence, as before the memo."""

import json

from models.resolver import clear_cache, resolve_model


def test_a_catalog_name_is_the_same_object_each_time():
    a = resolve_model("llama-2-7b")
    assert resolve_model("LLAMA-2-7B") is a and resolve_model("llama-2-7b") is a


def test_a_folder_named_like_a_catalog_model_still_wins(tmp_path, monkeypatch):
    catalog = resolve_model("tiny")
    folder = tmp_path / "tiny"
    folder.mkdir()
    cfg = json.loads(json.dumps({
        "model_type": "llama", "hidden_size": 64, "num_hidden_layers": 3, "num_attention_heads": 4,
        "num_key_value_heads": 4, "intermediate_size": 128, "vocab_size": 1000,
    }))  # fmt: skip
    (folder / "config.json").write_text(json.dumps(cfg))
    monkeypatch.chdir(tmp_path)
    local = resolve_model("tiny")
    assert local is not catalog and local.num_hidden_layers == 3
    monkeypatch.chdir("/")
    assert resolve_model("tiny") is catalog
    clear_cache()
    assert resolve_model("tiny") == catalog


def test_a_memoised_name_costs_no_stat(monkeypatch):
    """Resolved once per working directory: a repeated name reads no file system (issue 44 item 6)."""
    import os

    first = resolve_model("llama-2-7b")

    def refuse(*a, **k):
        raise AssertionError("stat on a memoised catalog name")

    monkeypatch.setattr(os.path, "isdir", refuse)
    monkeypatch.setattr(os, "stat", refuse)
    assert resolve_model("llama-2-7b") is first
