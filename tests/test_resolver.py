"""One model resolver (issue 27 item 3): every way to name a model gives the same config, the
command line and the library accept the same names, and a cold ``decode`` reads the config
file once."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
from pathlib import Path

import pytest

import models
from graphs.cli import main
from models import resolver, sources
from models.config import ModelConfigError

TINY = Path(models.__file__).parent / "configs" / "tiny.json"


def _same(a: models.ModelConfig, b: models.ModelConfig) -> bool:
    """Equal as models: the name and the source string say where each came from."""
    return dataclasses.replace(a, name="m", source="") == dataclasses.replace(b, name="m", source="")


def test_each_input_kind_resolves_to_the_catalog_config(tmp_path: Path) -> None:
    ref = models.get_model("tiny")
    folder = tmp_path / "tiny-model"
    folder.mkdir()
    shutil.copy(TINY, folder / "config.json")
    kinds = {
        "catalog name, any case": "TINY",
        "config.json path (str)": str(TINY),
        "config.json path (Path)": TINY,
        "folder holding config.json": str(folder),
        "parsed config.json": json.loads(TINY.read_text()),
        "ModelConfig": ref,
    }
    for kind, value in kinds.items():
        cfg = models.resolve_model(value)
        assert _same(cfg, ref), kind
        assert _same(models.get_model(value), ref), kind  # the library accepts what the CLI does
    assert models.resolve_model(ref) is ref
    assert models.resolve_model(str(TINY)).name == "tiny"  # a file is named by its stem


def test_cli_and_library_accept_the_same_path(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "mine.json"
    shutil.copy(TINY, path)
    assert models.get_model(str(path)).name == "mine"
    assert main(["decode", str(path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["model"] == "mine"


def test_hub_id_is_refused_with_what_to_do(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(models.HubIdError, match=r"download its config\.json and pass the path"):
        models.resolve_model("meta-llama/Llama-3.1-8B")
    assert main(["decode", "meta-llama/Llama-3.1-8B"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "'meta-llama/Llama-3.1-8B'" in err and "download its config.json" in err


def test_an_existing_org_name_path_is_a_path_not_a_hub_id(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "org" / "name").mkdir(parents=True)
    shutil.copy(TINY, tmp_path / "org" / "name" / "config.json")
    monkeypatch.chdir(tmp_path)
    assert _same(models.resolve_model("org/name"), models.get_model("tiny"))


def test_unknown_name_lists_the_catalog() -> None:
    with pytest.raises(models.UnknownModelError, match="catalog models: llama-2-7b") as info:
        models.resolve_model("gpt-9")
    assert not isinstance(info.value, models.HubIdError)


def test_a_bad_file_is_a_one_line_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"a": 1, "a": 2}')
    with pytest.raises(ModelConfigError, match="appears twice"):
        models.resolve_model(str(bad))
    with pytest.raises(ModelConfigError, match="does not exist"):
        models.resolve_model(str(tmp_path / "missing.json"))


def test_an_edited_file_is_read_again(tmp_path: Path) -> None:
    path = tmp_path / "m.json"
    data = json.loads(TINY.read_text())
    path.write_text(json.dumps(data))
    first = models.resolve_model(str(path))
    assert models.resolve_model(str(path)) is first  # unchanged: built once
    data["num_hidden_layers"] = 3
    path.write_text(json.dumps(data))
    os.utime(path, ns=(1, 1))  # a new modification time even on a coarse clock
    assert models.resolve_model(str(path)).num_hidden_layers == 3


def test_the_caches_are_bounded(tmp_path: Path) -> None:
    resolver.clear_cache()
    for i in range(resolver.MAX_CACHED + 5):
        p = tmp_path / f"m{i}.json"
        shutil.copy(TINY, p)
        models.resolve_model(str(p))
    assert len(sources.FILES) == len(resolver._configs) == resolver.MAX_CACHED


@pytest.mark.parametrize("command", ["decode", "prefill"])
def test_cold_command_reads_the_config_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    """Before: the cache key, the context check and the loader each read the file (three reads)."""
    path = tmp_path / "cold.json"
    shutil.copy(TINY, path)
    monkeypatch.setenv("COSTMODEL_CACHE_DIR", str(tmp_path / "cache"))  # nothing cached: a cold run
    resolver.clear_cache()
    opened: list[str] = []
    real_open = os.open

    def counting_open(file, *a, **kw):  # type: ignore[no-untyped-def]
        if os.fspath(file) == str(path):
            opened.append(os.fspath(file))
        return real_open(file, *a, **kw)

    def counting(read):  # type: ignore[no-untyped-def]
        def wrapped(self, *a, **kw):  # type: ignore[no-untyped-def]
            if str(self) == str(path):
                opened.append(str(self))
            return read(self, *a, **kw)

        return wrapped

    monkeypatch.setattr(os, "open", counting_open)
    for reader in ("read_bytes", "read_text", "open"):  # a read around the resolver counts too
        monkeypatch.setattr(Path, reader, counting(getattr(Path, reader)))
    assert main([command, str(path)]) == 0, capsys.readouterr().err
    assert len(opened) == 1
