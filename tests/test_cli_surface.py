"""The command line as a person uses it: help everywhere, validated numbers, --json, every model."""

import json

import pytest

from graphs.cli import build_parser, main
from graphs.cli.options import all_actions
from models import model_names

ACTIONS = all_actions(build_parser())


def test_every_option_has_help_and_shows_its_default():
    missing = [f"{prog} {a.option_strings or a.dest}" for prog, a in ACTIONS if not a.help]
    assert not missing, f"options without help: {missing}"


def test_every_numeric_option_is_validated():
    raw = [f"{prog} {a.option_strings}" for prog, a in ACTIONS if a.type in (int, float)]
    assert not raw, f"numeric options without a range (add them to cli/options.py): {raw}"


def test_every_command_that_prints_numbers_has_json():
    leaves: dict[str, set[str]] = {}
    for prog, a in ACTIONS:
        leaves.setdefault(prog, set()).add(a.dest)
    parents = {p for p in leaves if any(q != p and q.startswith(p + " ") for q in leaves)}
    lacking = [p for p in leaves if p not in parents and "json" not in leaves[p] and not p.endswith(" plot")]
    assert not lacking, lacking


def test_help_lists_the_exit_codes(capsys):
    assert main(["ledger", "--help"]) == 0
    out = capsys.readouterr().out
    assert "1 does not fit" in out and "2 bad input" in out and "(default: 4096)" in out


# decode and ledger for every model in the default run; prefill and sweep (whose graphs
# test_graphs checks for every model) in the slow run: together about 28 s of the suite
_SLOW = pytest.mark.slow


@pytest.mark.parametrize("model", model_names())
@pytest.mark.parametrize(
    "command",
    ["decode", "ledger", pytest.param("prefill", marks=_SLOW), pytest.param("sweep", marks=_SLOW)],
)
def test_every_catalog_model_in_every_phase_command(capsys, model, command):
    extra: list[str] = []
    if command == "sweep":  # its default contexts within the model's limit (a longer one is refused)
        from models import get_model

        limit = get_model(model).max_context
        ctxs = [c for c in (1024, 4096, 16384, 65536) if limit is None or c <= limit]
        extra = ["--quiet", "--ctxs", ",".join(map(str, ctxs))]
    code = main([command, model, "--json", *extra])
    out = capsys.readouterr()
    assert code in (0, 1), out.err  # 1: ledger says it does not fit one device
    json.loads(out.out)


def test_help_needs_neither_sympy_nor_numpy_nor_networkx():
    """The parser and --help load no engine: a subprocess shows which heavy modules got imported."""
    import subprocess
    import sys

    code = (
        "import sys; from graphs.cli import main; main(['decode', '--help']); "
        "print([m for m in ('sympy', 'numpy', 'networkx') if m in sys.modules], file=sys.stderr)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stderr.strip() == "[]", out.stderr


def test_help_states_each_default_once():
    """Issue 46: '(default uniform) (default: uniform)' and '(default: None)' in --help."""
    import contextlib
    import io

    from graphs.cli import main

    for cmd in ("simulate", "search", "size", "decode"):
        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
            main([cmd, "--help"])
        text = " ".join(out.getvalue().split())
        assert "(default: None)" not in text, cmd
        assert not __import__("re").search(r"\(default[^)]*\) \(default", text), cmd
