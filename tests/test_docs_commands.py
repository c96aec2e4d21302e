"""The command lines the README and docs/ show still parse, and the prose about them holds.

Every ``costmodel ...`` line of a shell block in README.md, docs/commands.md and docs/serving.md,
and every one in backticks in the README's question table, is parsed by the command line's own
parser (no command runs): a flag renamed or dropped, a choice that no longer exists or an argument
a command stopped taking fails here, naming the page and the line. The sentences of
docs/commands.md about the default prompt are read back against each command's ``--help``.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = ("README.md", "docs/commands.md", "docs/serving.md")


def _shell_lines(page: str) -> list[tuple[int, str]]:
    """``(line number, command)`` for each ``costmodel`` command of ``page``: the lines of its
    ``sh`` (or unlabelled) code blocks, continuation lines joined and comments dropped, split at
    ``;``; and, in the README, the backticked commands of its prose and tables."""
    lines = (ROOT / page).read_text().splitlines()
    out: list[tuple[int, str]] = []
    block: str | None = None
    i = 0
    while i < len(lines):
        line = lines[i]
        fence = re.match(r"\s*```(\w*)", line)
        if fence:
            block = None if block is not None else fence.group(1)
            i += 1
            continue
        start = i + 1
        if block in ("sh", "") and line.strip().startswith("costmodel"):
            text = line.split(" # ")[0].split("  #")[0].rstrip()
            while text.endswith("\\"):
                i += 1
                text = text[:-1] + " " + lines[i].split(" # ")[0].split("  #")[0].strip()
            out += [(start, part.strip()) for part in text.split(";")]
        elif block is None and page == "README.md":
            out += [(start, c) for c in re.findall(r"`(costmodel [^`]+)`", line) if "..." not in c]
        i += 1
    return out


COMMANDS = [(page, n, cmd) for page in PAGES for n, cmd in _shell_lines(page)]


def test_the_pages_show_commands():
    """The extraction finds what the pages show (a change of layout must not empty this test)."""
    by_page = {page: sum(1 for p, _, _ in COMMANDS if p == page) for page in PAGES}
    assert by_page["README.md"] >= 25 and by_page["docs/commands.md"] >= 60, by_page
    assert by_page["docs/serving.md"] >= 4, by_page


@pytest.mark.parametrize(("page", "line", "command"), COMMANDS, ids=[f"{p}:{n}" for p, n, _ in COMMANDS])
def test_a_documented_command_parses(page, line, command):
    from graphs.cli.main import _hoist_global_options, _json_after_command, build_parser

    argv = _json_after_command(_hoist_global_options(shlex.split(command)[1:]))
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as e:  # argparse's refusal: the page shows a command line that no longer parses
        pytest.fail(f"{page}:{line}: `{command}` no longer parses (exit {e.code})")
    assert getattr(args, "unbuilt", None) is None


def _help_default(words: list[str], flag: str) -> str:
    """The help of ``flag`` as ``costmodel WORDS --help`` prints it (its default included),
    whitespace folded."""
    from graphs.cli.main import build_parser

    parser = build_parser()
    for word in words:  # the subcommand's parser, as argparse keeps it
        sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
        parser = sub.choices[word]
    found = re.search(rf"\n  {flag} [A-Z_]+\s+(.*?)\n  -", parser.format_help(), re.DOTALL)
    assert found, (words, flag)
    return " ".join(found.group(1).split())


def test_commands_md_states_each_prefill_default_prompt():
    """docs/commands.md said "A prefill's prompt is 4096 tokens unless `--seq` says otherwise, in
    every command that prefills", listing ``ledger --phase prefill``; but ``ledger``'s ``--seq``
    defaults to its ``--ctx`` when one is given, ``serve disagg --prompt`` to 8192 and ``search
    --prompt`` to each point's context. The page now states each, and each is the command's help."""
    text = " ".join((ROOT / "docs/commands.md").read_text().split())
    said = re.search(r"A prefill's prompt is (.*?)\. The global options", text)
    assert said, "the sentence about the default prompt moved"
    said_text = said.group(1)
    assert "4096 tokens unless `--seq`" in said_text
    for words in (["prefill"], ["model", "analyze"], ["fusion", "audit"], ["fusion", "plan"], ["plot"]):
        assert "4096" in _help_default(words, "--seq"), words
    assert "default: --ctx, else 4096" in _help_default(["ledger"], "--seq")
    assert "`ledger --phase prefill` takes `--ctx` when given" in said_text
    disagg = _help_default(["serve", "disagg"], "--prompt")
    assert re.search(r"default: 8192\)", disagg), disagg
    assert "`serve disagg --prompt` 8192" in said_text
    assert "each point's ctx" in _help_default(["search"], "--prompt")
    assert "`search --prompt` each point's context" in said_text


def test_the_cli_package_doc_names_every_command_module():
    """graphs/cli's module doc lists the command groups and their modules; it had left out
    ``search``, ``simulate``, ``size``, ``calibrate`` and ``engines`` (5 of the 14 modules in
    ``_MODULES``, the table the parser is built from)."""
    import graphs.cli
    from graphs.cli.main import _MODULES

    doc = " ".join(str(graphs.cli.__doc__).split())
    for module, (_, helps) in _MODULES.items():
        assert f":mod:`.{module}`" in doc, module
        for command in helps:
            assert f"``{command}``" in doc, command


@pytest.mark.parametrize(
    ("argv", "count"),
    [
        (["op", "gemm", "M=1024", "N=4096", "K=4096", "--device", "vr200"], 2),  # preliminary; bf16 on fp8
        (["op", "gemm", "M=4096", "N=4096", "K=4096", "dtype=fp8"], 1),  # the out_dtype assumption
        (
            ["op", "gemm", "M=64", "N=4096", "K=4096", "dtype=fp8", "--device", "vr200"],
            2,
        ),  # out_dtype, preliminary
        (["op", "gemm", "M=64", "N=4096", "K=4096"], 0),
    ],
)
def test_op_json_keeps_the_notes_the_text_prints(capsys, argv, count):
    """docs/commands.md: "`--json` prints one object whose `"notes"` keep the notes the text
    prints". ``op --json`` had them under ``"note"`` and ``"roof_notes"`` and no ``"notes"``: a
    program reading ``notes`` found none of vr200's two (preliminary figures, bf16 bounded by its
    fp8 roof). The JSON's ``notes`` are now the text's ``note:`` lines, in order."""
    import json

    from graphs.cli import main

    assert main(argv) == 0
    text = capsys.readouterr().out
    said = [ln.strip()[len("note: ") :] for ln in text.splitlines() if ln.strip().startswith("note: ")]
    assert len(said) == count
    assert main([*argv, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["notes"] == said


def _blocks_after(page: str, marker: str) -> list[str]:
    """The lines of the first plain code block after ``marker`` in ``page``."""
    text = (ROOT / page).read_text()
    at = text.index(marker)
    block = re.search(r"\n```\n(.*?)\n```", text[at:], re.DOTALL)
    assert block, (page, marker)
    return block.group(1).splitlines()


@pytest.mark.slow
def test_the_serving_example_prints_the_table_the_pages_show(capsys):
    """README's "Serving under load" and docs/serving.md show what ``python
    examples/serving_simulation.py --plot out/sim`` prints (2,000 requests at seven rates, the max
    rate of 1,000 requests drawn with seed 7, three GPUs aggregated and disaggregated). No test
    read the table back: the example's own test runs ``--small``. The full run's lines (less its
    header) are the pages' block, line for line."""
    import runpy
    import sys

    old = sys.argv
    sys.argv = ["serving_simulation.py"]
    try:
        runpy.run_path(str(ROOT / "examples" / "serving_simulation.py"), run_name="__main__")
    finally:
        sys.argv = old
    printed = capsys.readouterr().out.splitlines()[1:]  # the header names the model and workload
    marker = "python examples/serving_simulation.py --plot out/sim"
    assert _blocks_after("README.md", marker) == printed
    assert _blocks_after("docs/serving.md", marker) == printed


def test_speed_md_child_run_of_simulate_speed_runs(capsys, monkeypatch):
    """docs/speed.md gives ``simulate_speed.py``'s one-run form as ``--child 1000000 3300 1``
    (requests, rate, skip); the script had since grown a fourth argument (``dp``) and indexed
    past the end of that line (IndexError). Run the documented form, its size cut to 200
    requests at 20/s: one JSON line of the run's CPU, wall, RSS, iterations and digest."""
    import json

    text = " ".join((ROOT / "docs/speed.md").read_text().split())
    documented = re.search(r"\(`--child ([^`]+)` for one run\)", text)
    assert documented, "the one-run form moved"
    words = documented.group(1).split()
    assert words[:2] == ["1000000", "3300"]
    from benchmarks import simulate_speed

    monkeypatch.setattr("sys.argv", ["simulate_speed.py", "--child", "200", "20", *words[2:]])
    simulate_speed.main()
    run = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert run["iterations"] > 0 and len(run["digest"]) == 64


def test_commands_md_names_every_command_that_draws_a_page():
    """docs/commands.md lists the commands that take ``--html`` beside its ``decode --html``
    example; ``calibrate serving``, which draws one too, was not among them. The list, read from
    the page, is the parser's set of commands with an ``--html`` option."""
    from graphs.cli import build_parser
    from graphs.cli.options import all_actions

    lines = (ROOT / "docs/commands.md").read_text().splitlines()
    at = next(i for i, ln in enumerate(lines) if ln.startswith("costmodel decode llama-3.1-8b --html"))
    comment = [lines[at].split("also on", 1)[1]]
    for ln in lines[at + 1 :]:  # the comment's continuation lines, up to the next command
        if not ln.strip().startswith("#"):
            break
        comment.append(ln.strip().lstrip("#"))
    listed: set[str] = {"decode"}
    for item in " ".join(comment).replace(",", " , ").split(" , "):
        words = item.split()
        if not words:
            continue
        head, *rest = words
        if rest and "|" in rest[0]:
            listed |= {f"{head} {sub}" for sub in rest[0].split("|")}
        else:
            listed.add(" ".join(words))
    drawn = {
        prog.removeprefix("costmodel ")
        for prog, a in all_actions(build_parser())
        if "--html" in a.option_strings
    }
    assert listed == drawn


@pytest.mark.parametrize(
    "argv",
    [
        ["simulate", "tiny", "--max-rate", "--slo-ttft", "1e-6", "--slo-tpot", "1e-6", "--requests", "20"],
        [
            "size",
            "tiny",
            "--rate",
            "5",
            "--slo-ttft",
            "1e-6",
            "--slo-tpot",
            "1e-6",
            "--requests",
            "20",
            "--tp",
            "1",
        ],
    ],
)
def test_the_pages_state_exit_1_when_nothing_meets_the_slos(capsys, argv):
    """Every ``--help`` ends with the exit codes: "1 does not fit (memory) or nothing meets the SLOs
    (size, simulate --max-rate)". README and docs/commands.md gave exit 1 as "does not fit" alone.
    Tiny's lone request takes 40-50 us to its first token, so an SLO of 1 us is met at no rate and
    by no deployment: exit 1, which both pages now name."""
    from graphs.cli import main
    from graphs.cli.options import EXIT_CODES

    assert "nothing meets the SLOs (size, simulate --max-rate)" in EXIT_CODES
    assert main(argv) == 1
    capsys.readouterr()
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert 'exit codes 0 ok, 1 "does not fit" or "nothing meets the SLOs", 2 bad input' in readme
    commands = " ".join((ROOT / "docs/commands.md").read_text().split())
    assert 'or "nothing meets the SLOs" (`size`, `simulate --max-rate`), 2 bad input' in commands
