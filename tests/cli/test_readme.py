"""The README and the docs match the code: every repository path they mention exists, every module named in a
section about one folder (`# DuoPD MMU arbiter (`rtl/mmu/`)`) exists, the verified-blocks page is what
its script writes from the committed table and lists exactly the bench runs `basedie run` does, the README's
sample summary agrees with it, and the synthesis results page holds the table its script prints."""
import importlib.util
import re
from collections import Counter
from pathlib import Path

from rtl.registry import BLOCKS
from basedie.flow.runner import non_default
from basedie.flow.verify import planned_runs
from basedie.verified import TABLE_PATH

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
PAGES = {path: path.read_text() for path in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]}
VERIFIED_PAGE = ROOT / "docs" / "results" / "verified-blocks.md"
FOLDERS = ("rtl", "tb", "sysmodel", "docs", "basedie", "scripts", "tests", "examples")
PATH = re.compile(rf"(?<![\w/.-])((?:{'|'.join(FOLDERS)})/[\w./*<>-]*[\w/*>])")


def named_paths(text: str) -> set[str]:
    """Paths as written, without `#anchor`s; templates such as `tests/tb/test_<area>_benches.py` are left out."""
    return {match.split("#")[0] for match in PATH.findall(text) if "<" not in match}


def folder_modules(text: str) -> set[str]:
    """`folder/module.py` for each module named by its file name alone in a section whose heading, or a parent
    heading, names one folder (`## MMU (`rtl/mmu/`)`), and each module a table's first column names with its own
    folder (`tb/dram/timing.py`)."""
    modules, headings = set(), []  # (level, folder) of the open headings
    for line in text.splitlines():
        heading = re.match(r"(#+) ", line)
        if heading:
            level = len(heading.group(1))
            headings = [(lv, folder) for lv, folder in headings if lv < level]
            found = re.search(r"\(`((?:rtl|tb|sysmodel)/[\w/]*)`", line)
            headings.append((level, found.group(1) if found else headings[-1][1] if headings else None))
            continue
        folder = headings[-1][1] if headings else None
        if folder:
            modules |= {folder + name for name in re.findall(r"(?<![\w/.])`(\w+\.py)`", line)}
            if line.startswith("| `"):
                modules |= {name for name in re.findall(r"`([\w/]+\.py)`", line.split("|")[1])
                            if name.split("/")[0] in FOLDERS}
    return modules


def exists(path: str) -> bool:
    return any(ROOT.glob(path)) if "*" in path else (ROOT / path).exists()


def script(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def summary_rows(page: str) -> list[list[str]]:
    """The cells of the verified-blocks page's table rows (below its header)."""
    lines = [line for line in page.splitlines() if line.startswith("| ")]
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in lines[2:]]


def test_the_parsers_find_what_they_should() -> None:
    text = ("## MMU (`rtl/mmu/`)\n| `queue.py` | a FIFO |\n| `a.py`, `b.py` | two |\n| `tb/dram/c.py` | - |\n"
            "see `tests/tb/test_<area>.py`, [ports](docs/reference/ports.md#flat-names) and "
            "sysmodel/data/verified_blocks.json.\n### Inside\nthe `d.py` module\n## Other\n| `c.py` | `e.py` |")
    assert folder_modules(text) == {"rtl/mmu/queue.py", "rtl/mmu/a.py", "rtl/mmu/b.py", "tb/dram/c.py",
                                    "rtl/mmu/d.py"}
    assert named_paths(text) == {"rtl/mmu/", "tb/dram/c.py", "docs/reference/ports.md",
                                 "sysmodel/data/verified_blocks.json"}


def test_every_path_the_readme_and_the_docs_name_exists() -> None:
    missing = {path.relative_to(ROOT).as_posix(): [p for p in sorted(named_paths(text)) if not exists(p)]
               for path, text in PAGES.items()}
    assert {page: paths for page, paths in missing.items() if paths} == {}


def test_every_module_a_section_about_one_folder_names_exists() -> None:
    modules = set().union(*map(folder_modules, PAGES.values()))
    assert len(modules) > 20  # the rtl/mmu/, tb/dram/ and sysmodel/ tables are read
    assert [m for m in sorted(modules) if not exists(m)] == []


def test_the_readme_fits_a_newcomer() -> None:
    lines = README.splitlines()
    assert len(lines) <= 250
    headings = [line for line in lines if line.startswith("## ")]
    assert headings[:2] == ["## Install, run, test", "## Layout"]


def test_the_verified_blocks_page_is_what_its_script_writes_from_the_committed_table() -> None:
    page = script("verified_table")
    assert VERIFIED_PAGE.read_text() == page.page(page.load().entries), \
        "docs/results/verified-blocks.md is stale: run python scripts/verified_table.py"


def test_the_synthesis_results_page_holds_the_table_its_script_prints(monkeypatch, capsys) -> None:
    monkeypatch.setattr("sys.argv", ["synthesis_table.py"])
    script("synthesis_table").main()
    printed = capsys.readouterr().out.splitlines()
    page = (ROOT / "docs" / "results" / "ppa.md").read_text().splitlines()
    start = page.index(printed[0])
    assert page[start:start + len(printed)] == printed, \
        "docs/results/ppa.md is stale: run python scripts/synthesis_table.py --write"


def main_job_runs() -> list[tuple[str, dict]]:
    """What `basedie run` proves: every set of the benches and the sets recorded in the table by name."""
    runs, _ = planned_runs(list(BLOCKS), None, quick=False, table=TABLE_PATH)
    return [(run.block, run.config) for run in runs]


def test_the_verified_blocks_page_lists_the_runs_basedie_run_does() -> None:
    listed = Counter((row[0], row[1]) for row in summary_rows(VERIFIED_PAGE.read_text()))
    done = Counter((name, ",".join(f"{k}={v}" for k, v in non_default(BLOCKS[name].params(**config)).items())
                    or "(defaults)") for name, config in main_job_runs())
    assert listed == done


def test_the_readme_sample_summary_agrees_with_the_page() -> None:
    sample = re.split(r"\nblock +parameters", README, maxsplit=1)[1].split("```", 1)[0].strip().splitlines()
    _, *rows, dots, last = sample  # the rest of the heading line, some rows, an ellipsis, the closing line
    page = summary_rows(VERIFIED_PAGE.read_text())
    assert rows and dots == "..."
    for row in rows:
        cells = row.split()
        assert any(cells[:7] == listed[:7] for listed in page), row
    assert last.startswith(f"{len(main_job_runs())} bench runs passed")
