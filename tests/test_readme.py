"""The README's tour is executable documentation."""

import doctest
from pathlib import Path


def test_readme_tour():
    readme = Path(__file__).resolve().parents[1] / "README.md"
    result = doctest.testfile(str(readme), module_relative=False, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 5
    assert result.failed == 0
