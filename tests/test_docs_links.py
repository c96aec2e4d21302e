"""The README and docs/ link to files and headings that exist: the README's short sections send
readers to docs/ pages, so a moved heading or file must not leave a dead link."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def _anchors(page: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation but '-' and '_' dropped, spaces to '-'."""
    out = set()
    for line in page.read_text().splitlines():
        if m := re.match(r"#{1,6} (.+)", line):
            out.add(re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-"))
    return out


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_relative_links_resolve(page):
    dead = []
    for target in LINK.findall(page.read_text()):
        if re.match(r"[a-z]+:", target):
            continue  # http(s), mailto
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            dead.append(target)
        elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
            dead.append(target)
    assert not dead, f"{page.name}: dead links {dead}"


def test_the_readme_reads_in_five_minutes():
    """Issue 46: at most 300 lines; the depth lives in docs/."""
    assert len((ROOT / "README.md").read_text().splitlines()) <= 300
