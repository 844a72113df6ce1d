"""Mutation testing per module (docs/guides/mutation.md). Each module (scripts/mutation_modules.toml) runs in its own
folder, build/mutation/<module>/, with a mutmut configuration naming only its file and its tests, so a run pays
for the tests of that module only and modules can be rerun one at a time.

    python scripts/mutation_report.py --prepare MODULE    # write the module's folder; print its path
    python scripts/mutation_report.py --save MODULE       # keep its verdicts in scripts/mutation_results/
    python scripts/mutation_report.py [MODULE ...]         # kill rate per module from the runs so far
    python scripts/mutation_report.py --unlisted .coverage # test files that run a module's lines, not listed
"""
import argparse
import re
import shutil
import subprocess
import sys
import tomllib
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODULES = tomllib.loads((ROOT / "scripts" / "mutation_modules.toml").read_text())
WORK = ROOT / "build" / "mutation"
# Each module's verdicts so far (mutmut's .meta of its file: a verdict per mutant, a hash per function), committed so
# that a run in a fresh checkout continues where the last one stopped: mutmut keeps the verdicts of the functions
# whose hash is unchanged and tests the rest.
RESULTS = ROOT / "scripts" / "mutation_results"
# What a test may read besides the sources (the sources' folders are copied whole, data files included).
ALSO_COPY = ["rtl", "tb", "examples", "tests", "docs", "scripts"]
KILLED = ("killed", "timeout", "caught by type check")


def names(module: str) -> list[str]:
    """mutmut's mutant-name globs of a module: every function of its file unless the mapping narrows them."""
    spec = MODULES[module]
    return spec.get("names", [spec["file"].removesuffix(".py").replace("/", ".") + ".*"])


def run_names(module: str) -> list[str]:
    """The names to give `mutmut run`: none for a whole file, so a rerun tests only the mutants without a result
    (new, or of a function that changed); mutmut reruns every mutant it is given by name."""
    return MODULES[module].get("names", [])


def prepare(module: str) -> Path:
    """The module's folder: links to the repository's top-level folders and a pyproject.toml for mutmut."""
    spec = MODULES[module]
    folder = WORK / module
    folder.mkdir(parents=True, exist_ok=True)
    for name in ("sysmodel", "basedie", *ALSO_COPY):
        link = folder / name
        if link.is_symlink() and link.readlink() != ROOT / name:   # a folder copied from another checkout
            link.unlink()
        if not link.is_symlink():
            link.symlink_to(ROOT / name)
    # mutmut copies a source folder's other files (data, such as the verified table) only when its copy lacks
    # them, and copies `also_copy` over the old copy: drop both, so that a rerun sees today's files, not those of
    # the first run (the results, *.meta and mutmut-stats.json, stay).
    mutants = folder / "mutants"
    for name in ALSO_COPY:
        shutil.rmtree(mutants / name, ignore_errors=True)
    for name in ("sysmodel", "basedie"):
        for path in (mutants / name).rglob("*") if (mutants / name).exists() else ():
            if path.is_file() and path.suffix not in (".py", ".meta"):
                path.unlink()
    meta = mutants / f"{spec['file']}.meta"
    if not meta.exists() and (RESULTS / f"{module}.meta").exists():
        meta.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(RESULTS / f"{module}.meta", meta)
    deselect = [arg for test in spec.get("deselect", []) for arg in ("--deselect", test)]
    quoted = lambda items: "[" + ", ".join(f'"{item}"' for item in items) + "]"  # noqa: E731
    (folder / "pyproject.toml").write_text(
        "[tool.mutmut]\n"
        'source_paths = ["sysmodel/", "basedie/"]\n'
        f"only_mutate = {quoted([spec['file']])}\n"
        f"also_copy = {quoted(name + '/' for name in ALSO_COPY)}\n"
        f"pytest_add_cli_args_test_selection = {quoted(spec['tests'])}\n"
        f"pytest_add_cli_args = {quoted(['-o', 'addopts=', '-p', 'no:cacheprovider', *deselect])}\n"
        # mutmut waits (tests' time + 1 s) × this before calling a mutant a timeout (its default, 15, makes
        # each mutant that loops forever cost minutes).
        f"timeout_multiplier = {spec.get('timeout_multiplier', 15.0)}\n")
    return folder


def save(module: str) -> Path:
    """Copy the module's verdicts from its folder to `RESULTS` (what `prepare` restores in a fresh checkout)."""
    RESULTS.mkdir(exist_ok=True)
    saved = RESULTS / f"{module}.meta"
    shutil.copyfile(WORK / module / "mutants" / f"{MODULES[module]['file']}.meta", saved)
    return saved


def counts(module: str) -> tuple[Counter, list[str]]:
    """(mutants per verdict, survivors) of the module's runs so far (`mutmut results` in its folder)."""
    folder = WORK / module
    status, survivors = Counter(), []
    if not (folder / "mutants").exists():
        return status, survivors
    output = subprocess.run([sys.executable, "-m", "mutmut", "results", "--all", "true"], cwd=folder,
                            capture_output=True, text=True, check=True).stdout
    patterns = [re.compile(re.escape(glob).replace(r"\*", ".*") + "$") for glob in names(module)]
    for line in output.splitlines():
        match = re.match(r"\s*(\S+): (.+)$", line)
        if match and any(p.match(match[1]) for p in patterns):
            status[match[2]] += 1
            if match[2] in ("survived", "no tests"):
                survivors.append(f"{match[1]} ({match[2]})")
    return status, survivors


def unlisted(data_file: str) -> dict[str, list[str]]:
    """Per module, the test files that run a line of its file inside a test (coverage.py data recorded with
    `dynamic_context = test_function`) but are not among its tests."""
    import coverage
    data = coverage.CoverageData(data_file)
    data.read()
    missing = {}
    for module, spec in MODULES.items():
        path = str(ROOT / spec["file"])
        contexts = {c for line in (data.contexts_by_lineno(path) or {}).values() for c in line if c}
        files = {"/".join(c.rsplit(".", 1)[0].split(".")) + ".py" for c in contexts}
        missing[module] = sorted(files - set(spec["tests"]))
    return missing


def report(modules: list[str]) -> None:
    print(f"{'module':<20} {'mutants':>7} {'checked':>7} {'killed':>6} {'survived':>8} {'kill rate':>9} "
          f"{'wall s':>7} {'CPU s':>7}  other")
    all_survivors = {}
    for module in modules:
        status, all_survivors[module] = counts(module)
        total = sum(status.values())
        checked = total - status["not checked"]
        killed = sum(status[k] for k in KILLED)
        survived = status["survived"] + status["no tests"]
        rate = f"{100 * killed / checked:.1f} %" if checked else "-"
        timing = WORK / module / "time.txt"
        # /usr/bin/time's lines of the last `mutation.sh` run of the module (skipping its "exited non-zero" notes).
        runs = [[float(x) for x in line.split()] for line in (timing.read_text().splitlines() if timing.exists()
                                                             else []) if re.fullmatch(r"[\d. ]+", line)]
        wall, cpu = (f"{sum(r[0] for r in runs):.0f}", f"{sum(r[1] + r[2] for r in runs):.0f}") if runs else "--"
        other = ", ".join(f"{v} {k}" for k, v in status.items()
                          if k not in (*KILLED, "survived", "no tests", "not checked") or k == "timeout")
        print(f"{module:<20} {total:>7} {checked:>7} {killed:>6} {survived:>8} {rate:>9} {wall:>7} {cpu:>7}  {other}")
    for module, survivors in all_survivors.items():
        if survivors:
            print(f"\n{module} survivors (`cd build/mutation/{module} && mutmut show NAME`):")
            print("\n".join(f"  {name}" for name in survivors))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prepare", metavar="MODULE", choices=MODULES)
    parser.add_argument("--save", metavar="MODULE", choices=MODULES,
                        help="copy the module's verdicts to scripts/mutation_results/ (commit them)")
    parser.add_argument("--names", metavar="MODULE", choices=MODULES, help="print the names for `mutmut run`")
    parser.add_argument("--survivors", metavar="MODULE", choices=MODULES,
                        help="print the module's surviving mutants so far (a rerun retests them by name)")
    parser.add_argument("--unlisted", metavar="DATA_FILE",
                        help="coverage.py data with per-test contexts: print the test files a module's list lacks")
    parser.add_argument("modules", nargs="*", help=f"default: all ({', '.join(MODULES)})")
    args = parser.parse_args()
    if args.prepare:
        print(prepare(args.prepare))
    elif args.save:
        print(save(args.save))
    elif args.survivors:
        print(" ".join(name.split()[0] for name in counts(args.survivors)[1]))
    elif args.unlisted:
        for module, files in unlisted(args.unlisted).items():
            print(f"{module}: {' '.join(files) or '-'}")
    elif args.names:
        print(" ".join(run_names(args.names)))
    else:
        unknown = [m for m in args.modules if m not in MODULES]
        if unknown:
            parser.error(f"unknown module {unknown[0]!r} (known: {', '.join(MODULES)})")
        report(args.modules or list(MODULES))


if __name__ == "__main__":
    main()
