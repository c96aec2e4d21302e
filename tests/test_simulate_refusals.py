"""What ``simulate`` would silently ignore or get wrong is refused in one line (exit 2): a
request longer than the model's context (Llama-3.1-8B's config.json: 131,072 tokens), a load
bound given to a router that has none, prefix routing with no prefix cache, and drawn-workload
flags beside a trace, which fixes every request."""

import pytest

from graphs.cli import main

BASE = ["simulate", "llama-3.1-8b", "--device", "h100", "--quiet"]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            ["--rate", "2", "--requests", "3", "--prompt", "fixed:200000"],
            "exceeds the model's context limit of 131,072",
        ),
        (["--rate", "2", "--requests", "3", "--prefix-eps", "0.1"], "--prefix-eps bounds --router prefix"),
        (  # vLLM V1 caches by default: refused with caching turned off
            [
                "--rate",
                "2",
                "--requests",
                "3",
                "--router",
                "prefix",
                "--replicas",
                "2",
                "--no-enable-prefix-caching",
            ],
            "give --enable-prefix-caching",
        ),
    ],
)
def test_refused_in_one_line(capsys, extra, message):
    assert main([*BASE, *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1


def test_a_trace_refuses_the_flags_it_fixes(tmp_path, capsys):
    trace = tmp_path / "t.csv"
    trace.write_text("arrival_s,prompt_tokens,output_tokens\n0,100,10\n0.5,200,20\n")
    for flag, value in (
        ("--seed", "3"),
        ("--requests", "5"),
        ("--prompt", "fixed:50"),
        ("--output", "fixed:5"),
    ):
        assert main([*BASE, "--trace", str(trace), flag, value]) == 2
        assert f"drop {flag}" in capsys.readouterr().err
    assert main([*BASE, "--trace", str(trace)]) == 0  # the defaults are not "given"


def test_long_context_runs_when_allowed(capsys):
    # 200,000 + 2 = 200,002 tokens > 131,072: a warning, then the run
    args = ["--rate", "2", "--requests", "1", "--prompt", "fixed:200000", "--output", "fixed:2"]
    assert main([*BASE, *args, "--allow-long-context"]) == 0
    out = capsys.readouterr()
    assert "200,002 exceeds" in out.err + out.out and "costed anyway" in out.err + out.out
