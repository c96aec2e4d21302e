"""Analyses select nodes by role (costmodel.keys.Role), never by op-name strings (STYLE 13,
issue 27): outside the modules that own ops (the rules, the mixer plug-ins and graph blocks that
build them, the importers that map foreign ops onto them, and the fusion legality table that
classifies them as data), no line compares a node's op (rule) name with a string literal."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: where op names legitimately appear as literals: their owners
OWNERS = (
    "costmodel/rules/",
    "models/mixers/",
    "graphs/blocks/",
    "graphs/importers/",
    "costmodel/fusion_legality.py",  # OP_CLASSES: the op -> class table, legality as data
)
#: a node's op read (d[OP], d.get(OP), d["op"], a local ``op``/``rule`` variable) compared with text
PATTERN = re.compile(
    r"""(\[OP\]|\.get\(OP\b[^)]*\)|\[["']op["']\]|\.get\(["']op["'][^)]*\)|\b(op|rule)\b)\s*"""
    r"""(==|!=|\bin\b|\bnot in\b)\s*[(\[{]?\s*["'][a-z_]+["']"""
)


def test_no_op_name_matching_outside_the_owners():
    found = []
    for pkg in ("costmodel", "graphs", "models"):
        for path in sorted((ROOT / pkg).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel.startswith(OWNERS):
                continue
            for i, line in enumerate(path.read_text().splitlines(), 1):
                code = line.split("#", 1)[0]
                if PATTERN.search(code):
                    found.append(f"{rel}:{i}: {line.strip()}")
    assert not found, "op-name matching outside the op's owners:\n" + "\n".join(found)


def test_the_pattern_catches_what_it_must():
    for line in ('if d[OP] == "attention":', "if g.nodes[n].get(OP) in ('gemm', 'moe'):", 'if op == "gemm":'):
        assert PATTERN.search(line), line
    for line in ("if d[ROLE] == Role.ATTENTION:", 'x = f"{op}"', "if family == 'gemm':"):
        assert not PATTERN.search(line), line
