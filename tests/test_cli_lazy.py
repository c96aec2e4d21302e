"""A CLI that starts without importing what it does not run (issue 27 item 6): commands load on
demand, global options go before or after the command, one spelling per concept."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from graphs.cli import build_parser, main
from graphs.cli.main import COMMANDS

ROOT = Path(__file__).resolve().parents[1]


def _choices(parser: argparse.ArgumentParser) -> argparse._SubParsersAction:  # type: ignore[type-arg]
    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))


def test_the_table_lists_every_command_with_the_modules_own_help() -> None:
    sub = _choices(build_parser())
    assert list(sub.choices) == list(COMMANDS)
    assert {c.dest: c.help for c in sub._choices_actions} == {k: v[2] for k, v in COMMANDS.items()}
    assert not any(p.get_default("unbuilt") for p in sub.choices.values())  # complete: all built


def _modules_after(args: list[str]) -> set[str]:
    code = (
        f"import sys; from graphs.cli import main; rc = main({args!r}); "
        "print(sorted(m for m in sys.modules if m.startswith('graphs.cli.')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    return set(json.loads(out.stdout.strip().splitlines()[-1].replace("'", '"')))


def test_help_lists_every_command_and_imports_none() -> None:
    loaded = _modules_after(["--help"])
    command_modules = {f"graphs.cli.{m}" for m, _, _ in COMMANDS.values()} - {"graphs.cli.main"}
    assert not loaded & command_modules, loaded & command_modules
    loaded = _modules_after(["decode", "--help"])  # its own module (and what that one imports)
    assert "graphs.cli.phases" in loaded
    assert not loaded & {f"graphs.cli.{m}" for m in ("serve", "simulate", "search", "plot", "fusion", "hw")}


def test_help_text_names_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    for name, (_, _, help_text) in COMMANDS.items():
        assert name in out and help_text.split()[0] in out


def _run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(args)
    cap = capsys.readouterr()
    return code, cap.out, cap.err


def test_json_before_or_after_the_command(capsys: pytest.CaptureFixture[str]) -> None:
    after = _run(["decode", "tiny", "--json"], capsys)
    before = _run(["--json", "decode", "tiny"], capsys)
    assert after == before and after[0] == 0
    assert json.loads(before[1])["model"] == "tiny"
    assert _run(["--json"], capsys)[1] == _run(["report", "--json"], capsys)[1]
    code, _, err = _run(["--json", "rules", "--bogus"], capsys)
    assert code == 2 and err.count("\n") == 1


def test_hw_file_before_or_after_the_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "d.toml"
    spec.write_text(
        '[devices.mybox]\nroofs = [{ unit = "tensor", precision = "bf16", peak_flops_per_s = 1e12, source = "a sheet" }]\n'
        'memory = [{ name = "dram", bandwidth_bytes_per_s = 1e10, source = "a sheet" }]\n'
    )
    base = ["derive", "crossover", "--device", "mybox", "--json"]
    runs = [
        _run(["--hw-file", str(spec), *base], capsys),
        _run([*base, "--hw-file", str(spec)], capsys),
        _run([*base, f"--hw-file={spec}"], capsys),
        _run(["--json", "--hw-file", str(spec), *base[:-1]], capsys),
    ]
    assert all(r == runs[0] for r in runs) and runs[0][0] == 0
    assert json.loads(runs[0][1])["numeric"]["balance"] == 100.0  # 1e12 FLOP/s / 1e10 B/s


@pytest.mark.parametrize(
    "command", [["sweep", "tiny", "--batches", "1", "--ctxs", "1024"], ["search", "tiny"]]
)
def test_device_and_devices_are_one_option(command: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    one = _run([*command, "--device", "h100-sxm,a100", "--json"], capsys)
    other = _run([*command, "--devices", "h100-sxm,a100", "--json"], capsys)
    assert one == other and one[0] == 0, one[2]


@pytest.mark.parametrize(
    ("command", "metavar"), [("sweep", "DEVICE"), ("search", "DEVICES"), ("size", "DEVICES")]
)
def test_the_help_of_a_device_list_names_both_spellings(
    command: str, metavar: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``sweep --devices h100,a100`` runs (the test above) and docs/commands.md says ``--devices``
    is the same option, yet no ``--help`` named it: a hidden alias. A command whose device option
    takes a comma list lists both spellings; one that takes one device (decode) lists ``--device``."""
    from graphs.cli import main

    assert main([command, "--help"]) == 0
    out = capsys.readouterr().out
    assert f"--device {metavar}, --devices {metavar}\n" in out and "comma list" in out
    assert main(["decode", "--help"]) == 0
    out = capsys.readouterr().out
    assert "--device DEVICE " in out and "--devices" not in out


def test_every_device_list_option_lists_both_spellings() -> None:
    from graphs.cli import build_parser
    from graphs.cli.options import all_actions

    for prog, action in all_actions(build_parser()):
        if "--device" in action.option_strings or "--devices" in action.option_strings:
            listed = "comma list" in str(action.help)
            assert ("--devices" in action.option_strings) == listed, (
                prog,
                action.option_strings,
                action.help,
            )


def test_the_command_line_reads_arrow_tables_with_the_c_heap_unless_told(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The command line's Arrow pool is glibc's heap, whose freed pages ``release_unused`` hands
    back (mimalloc keeps them: a first ``--predict`` peaked ~40 MiB higher); a user's choice stays."""
    from graphs.cli.main import ARROW_POOL, _arrow_allocator

    monkeypatch.delenv("ARROW_DEFAULT_MEMORY_POOL", raising=False)
    _arrow_allocator()
    assert ARROW_POOL == "system"
    assert os.environ["ARROW_DEFAULT_MEMORY_POOL"] == "system"
    monkeypatch.setenv("ARROW_DEFAULT_MEMORY_POOL", "mimalloc")
    _arrow_allocator()
    assert os.environ["ARROW_DEFAULT_MEMORY_POOL"] == "mimalloc"


def test_a_command_process_allocates_arrow_tables_from_the_c_heap() -> None:
    pytest.importorskip("pyarrow")
    code = (
        "from graphs.cli import main; main(['--version']); "
        "import pyarrow; print(pyarrow.default_memory_pool().backend_name)"
    )
    env = {k: v for k, v in os.environ.items() if k != "ARROW_DEFAULT_MEMORY_POOL"}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env, check=True
    )
    assert out.stdout.strip().splitlines()[-1] == "system"


def test_the_shipped_served_errors_load_without_sympy() -> None:
    """Reading the shipped served-error table needs no symbolic engine (the module's own design:
    the catalog loads on use); a review found memory_kind's new home pulling sympy in."""
    code = (
        "import sys, graphs.serving.sim.served_errors as m; m.served_errors(); print('sympy' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == "False"
