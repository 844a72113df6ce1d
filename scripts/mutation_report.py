"""Kill rate per module from `mutmut results --all true` (read on stdin), for the modules named on the command
line (scripts/mutation.sh's names; default all). Survivors are listed by name (`mutmut show NAME` shows one)."""
import re
import sys
from collections import Counter, defaultdict

MODULES = {"engine": "sysmodel.engine.", "memory": "sysmodel.memory.", "execution": "sysmodel.execution.",
           "metrics": "sysmodel.metrics.", "arbitration": "sysmodel.arbitration.", "systems": "sysmodel.systems.",
           "servers": "sysmodel.servers.", "cli": "basedie.cli.x__simulat"}


def main(names: list[str]) -> None:
    status: dict[str, Counter] = defaultdict(Counter)
    survivors: dict[str, list[str]] = defaultdict(list)
    for line in sys.stdin:
        match = re.match(r"\s*(\S+): (.+)$", line)
        if not match:
            continue
        mutant, verdict = match.groups()
        module = next((m for m, prefix in MODULES.items() if mutant.startswith(prefix)), None)
        if module in (names or MODULES):
            status[module][verdict] += 1
            if verdict in ("survived", "no tests"):
                survivors[module].append(f"{mutant} ({verdict})")
    print(f"{'module':<12} {'mutants':>7} {'checked':>7} {'killed':>6} {'kill rate':>9}  other")
    for module in names or MODULES:
        counts = status[module]
        total, unchecked = sum(counts.values()), counts["not checked"]
        checked = total - unchecked
        killed = counts["killed"] + counts["timeout"] + counts["caught by type check"]
        rate = f"{100 * killed / checked:.1f} %" if checked else "-"
        other = ", ".join(f"{v} {k}" for k, v in counts.items() if k not in ("killed", "not checked"))
        print(f"{module:<12} {total:>7} {checked:>7} {killed:>6} {rate:>9}  {other}")
    for module, names_ in survivors.items():
        print(f"\n{module} survivors:")
        print("\n".join(f"  {n}" for n in names_))


if __name__ == "__main__":
    main(sys.argv[1:])
