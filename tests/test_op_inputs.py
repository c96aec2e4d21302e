"""`costmodel op` and the expressions it reads: every input a review found priced wrong, hanging or
failing with an internal error is refused in one line naming the parameter, or answered."""

import pytest

from costmodel.errors import ExpressionSyntaxError
from costmodel.expr import MAX_DEGREE, MAX_TERMS, parse_expr
from graphs.cli import main


def run(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def one_line_error(capsys, *argv) -> str:
    code, _out, err = run(capsys, *argv)
    assert code == 2, (code, err)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("(x+1)**1000", "degree 1000 is too high"),  # op gemm spun >10 min in simplify
        ("(x+1)**100", "degree 100 is too high"),  # derive crossover --N: >60 s
        ("x**9", "degree 9 is too high"),
        ("1/(x+1)**20", "degree 20 is too high"),
        ("((x+1)**8)**8", "degree 64 is too high"),
        ("(a+c+d+e+f+g+h+i+j+k+l+m)**2", "expands to 78 terms"),
    ],
)
def test_an_expression_too_large_for_symbolic_work_is_refused(text, fragment):
    with pytest.raises(ExpressionSyntaxError, match=r"^M ") as info:
        parse_expr(text, field="M")
    assert fragment in str(info.value)


def test_expressions_within_the_bounds_still_parse():
    assert parse_expr("B*S*ctx + 1") == parse_expr("ctx*S*B + 1")
    assert parse_expr("(x+1)**8").free_symbols == parse_expr("x").free_symbols
    assert parse_expr("2**900 / 2**899") == 2  # numbers have no degree
    assert MAX_DEGREE == 8 and MAX_TERMS == 64


def test_caret_is_said_not_to_be_a_power(capsys):
    line = one_line_error(capsys, "op", "gemm", "M=2^3", "N=4", "K=4")
    assert 'M "2^3": ^ is not a power here; write **' in line and "BinOp" not in line


def test_a_huge_symbolic_gemm_is_refused_at_once(capsys):
    line = one_line_error(capsys, "op", "gemm", "M=(x+1)**1000", "N=4", "K=4")
    assert 'M "(x+1)**1000": degree 1000 is too high (at most 8 in its names)' in line
    line = one_line_error(capsys, "derive", "crossover", "--N", "(x+1)**100")
    assert 'N "(x+1)**100": degree 100' in line
