"""The README matches the code: every repository path it mentions exists, every module in the module table of
a section about one folder (`## DuoPD MMU arbiter (`rtl/mmu/`)`) exists, and its sample `basedie run` summary
lists exactly the bench runs `basedie run` does."""
import re
from collections import Counter
from pathlib import Path

from rtl.registry import BLOCKS
from tb.benches import BENCHES
from tb.runner import non_default
from tb.verify import bench_runs

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
FOLDERS = ("rtl", "tb", "sysmodel", "docs", "basedie", "scripts", "tests", "examples")
PATH = re.compile(rf"(?<![\w/.-])((?:{'|'.join(FOLDERS)})/[\w./*<>-]*[\w/*>])")


def named_paths(text: str) -> set[str]:
    """Paths as written, without `#anchor`s; templates such as `tests/tb/test_<area>_benches.py` are left out."""
    return {match.split("#")[0] for match in PATH.findall(text) if "<" not in match}


def table_modules(text: str) -> set[str]:
    """`folder/module.py` for each module named in the first column of a table under a `## … (`folder/`)`."""
    modules, folder = set(), None
    for line in text.splitlines():
        if line.startswith("## "):
            found = re.search(r"\(`((?:rtl|tb|sysmodel)/[\w/]*)`", line)
            folder = found.group(1) if found else None
        elif folder and line.startswith("| `"):
            first_cell = line.split("|")[1]
            modules |= {folder + name for name in re.findall(r"`([\w/]+\.py)`", first_cell)}
    return modules


def exists(path: str) -> bool:
    return any(ROOT.glob(path)) if "*" in path else (ROOT / path).exists()


def test_the_parsers_find_what_they_should() -> None:
    text = ("## MMU (`rtl/mmu/`)\n| `queue.py` | a FIFO |\n| `a.py`, `b.py` | two |\nsee `tests/tb/test_<area>.py`,"
            " [ports](docs/ports.md#flat-names) and sysmodel/data/verified_blocks.json.\n## Other\n| `c.py` | - |")
    assert table_modules(text) == {"rtl/mmu/queue.py", "rtl/mmu/a.py", "rtl/mmu/b.py"}
    assert named_paths(text) == {"rtl/mmu/", "docs/ports.md", "sysmodel/data/verified_blocks.json"}


def test_every_path_the_readme_names_exists() -> None:
    assert [p for p in sorted(named_paths(README)) if not exists(p)] == []


def test_every_module_in_a_readme_module_table_exists() -> None:
    modules = table_modules(README)
    assert len(modules) > 20  # the rtl/mmu/ and sysmodel/ tables are read
    assert [m for m in sorted(modules) if not exists(m)] == []


def test_the_sample_summary_lists_the_runs_basedie_run_does() -> None:
    sample = re.split(r"\nblock +parameters", README, maxsplit=1)[1].split("```", 1)[0].strip().splitlines()
    _, *rows, last = sample  # the rest of the heading line, one row per run, the closing line
    listed = Counter(tuple(row.split()[:2]) for row in rows)
    runs = bench_runs(list(BENCHES))
    done = Counter((name, ",".join(f"{k}={v}" for k, v in non_default(BLOCKS[name].params(**config)).items())
                    or "(defaults)") for name, config in runs)
    assert listed == done
    assert last.startswith(f"{len(runs)} bench runs passed")
