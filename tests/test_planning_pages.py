"""The review of ``size``, ``search`` and ``sweep`` (their answers, ``--html`` pages and edge
inputs): each test asks the command a question and checks the answer against another source (the
same command's ``--json`` or text, another command, the input itself)."""

import contextlib
import io
import json

from graphs.cli import main


def run_cli(*argv, code=0):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        got = main(list(argv))
    assert got == code, err.getvalue()
    return out.getvalue(), err.getvalue()


def test_search_names_no_energy_winner_when_energy_is_not_an_objective():
    """``search`` without ``--energy`` named a "lowest energy per token" winner from the frontier
    of the other objectives, which leaves out points that use less: on h100 and a100-sxm-80gb it
    named h100 at batch 129 (0.139 J/token) while the ``--energy`` search of the same grid finds
    an a100 point below every point of that frontier. Energy is named only as an objective."""
    argv = ("search", "llama-3.1-8b", "--devices", "h100,a100-sxm-80gb", "--batches", "1..256")
    argv += ("--ctxs", "4096", "--quiet", "--json")
    plain = json.loads(run_cli(*argv)[0])
    assert set(plain["best"]) == {"fastest_per_user", "highest_throughput_per_device"}
    text = run_cli(*argv[:-1])[0]
    assert "energy per token:" not in text
    with_energy = json.loads(run_cli(*argv, "--energy")[0])
    least = with_energy["best"]["lowest_energy_per_token"]
    # the energy objective's winner uses less than any point the two-objective frontier holds
    assert least["energy_per_token_j"] < min(p["energy_per_token_j"] for p in plain["frontier"])
    assert least["device"] == "a100-sxm-80gb"
