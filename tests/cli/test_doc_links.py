"""Every relative Markdown link in README.md and docs/ leads to a file that exists and, when it names an anchor in
a Markdown page, to a heading of that page."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^(```|~~~).*?^\1", re.MULTILINE | re.DOTALL)


def links(text: str) -> list[str]:
    """Link targets outside fenced code, without web addresses."""
    return [t for t in LINK.findall(FENCE.sub("", text)) if not re.match(r"[a-z][a-z+.-]*:", t)]


def anchors(text: str) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces as hyphens, repeats numbered -1, -2, …"""
    found: set[str] = set()
    for heading in re.findall(r"^#+ +(.+?) *$", FENCE.sub("", text), re.MULTILINE):
        slug = re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
        found.add(next(f"{slug}-{n}" if n else slug for n in range(100) if (f"{slug}-{n}" if n else slug) not in found))
    return found


def broken(page: Path) -> list[str]:
    text = page.read_text()
    out = []
    for target in links(text):
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        if not resolved.exists():
            out.append(target)
        elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved.read_text()):
            out.append(target)
    return out


def test_the_parsers_find_what_they_should() -> None:
    text = ("## Soaks (`basedie verify BLOCK --soak N`)\n# A → B, why\n## Results\n## Results\n"
            "[a](b.md#x) [web](https://example.org) [top](#results-1)\n```\n[no](code.md)\n```\n")
    assert links(text) == ["b.md#x", "#results-1"]
    assert anchors(text) == {"soaks-basedie-verify-block---soak-n", "a--b-why", "results", "results-1"}


def test_every_relative_link_in_the_readme_and_the_docs_resolves() -> None:
    assert len(PAGES) > 20
    assert {str(page.relative_to(ROOT)): broken(page) for page in PAGES if broken(page)} == {}
