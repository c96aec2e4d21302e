"""The small commands (report, op, rules, derive, hw, model, ledger, plot, engines, probe) held to
hand numbers and to their inputs: a review's findings, one test each."""

import json

import numpy as np

from costmodel import op_cost
from graphs.cli import main


def run(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_op_elementwise_takes_its_input_count(capsys):
    """``costmodel op elementwise n=1000 inputs=2`` was refused ("inputs must be an integer >= 0,
    got 2"): the command hands the rule sympy's 2, which the rule's ``isinstance(inputs, int)``
    refused, so no ``inputs`` value worked from the command line. By hand (DESIGN.md: r inputs and
    one output over n bf16 elements): D = (r + 1) * 2 * n = 3 * 2 * 1000 = 6000 B, F = n = 1000."""
    code, out, err = run(capsys, "op", "elementwise", "n=1000", "inputs=2", "--json")
    assert code == 0, err
    cost = json.loads(out)["cost"]
    assert cost["bytes_read"]["dram"] + cost["bytes_written"]["dram"] == 6000
    assert cost["flops"]["vector:fp32"] == 1000
    # the library takes the same count as numpy's or a float's whole number
    assert op_cost("elementwise", n=1000, inputs=np.int64(2)).bytes == 6000
    assert op_cost("elementwise", n=1000, inputs=2.0).bytes == 6000
    assert op_cost("elementwise", n=1000, inputs=0).bytes == 2000  # a generator writes only
    code, _, err = run(capsys, "op", "elementwise", "n=1000", "inputs=-1")
    assert code == 2 and "inputs must be a whole number >= 0" in err and "got -1" in err
