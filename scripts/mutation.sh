#!/usr/bin/env bash
# Mutation testing of the system model and the CLI's simulate argument checks with mutmut (docs/mutation.md).
# Not part of the default pytest run: mutmut copies the sources into ./mutants and runs the fast system-model
# tests (listed under [tool.mutmut] in pyproject.toml; no Verilator, no study runs) against every mutant.
#
#   scripts/mutation.sh                   # every module, then the kill rate per module
#   scripts/mutation.sh engine            # one module (names below); run modules one at a time this way
#   JOBS=2 scripts/mutation.sh            # mutants tested at once (default 1)
#
# The modules given are mutated in one mutmut run (each run first reruns the whole test selection once).
#
# Needs `pip install -e '.[test,mutation]'`. Results accumulate in ./mutants (delete it to start afresh).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-.venv/bin/python}
ALL=(engine memory execution metrics arbitration cli systems servers)
declare -A PATTERNS=(
    [engine]="sysmodel.engine.*" [memory]="sysmodel.memory.*" [execution]="sysmodel.execution.*"
    [metrics]="sysmodel.metrics.*" [arbitration]="sysmodel.arbitration.*" [systems]="sysmodel.systems.*"
    [servers]="sysmodel.servers.*"
    # The simulate subcommand's argument checks, not the rest of the CLI (help texts, bench commands).
    [cli]="basedie.cli.x__simulat*"
)
modules=("${@:-${ALL[@]}}")
patterns=()
for module in "${modules[@]}"; do
    patterns+=("${PATTERNS[$module]:?unknown module $module; choose from ${ALL[*]}}")
done
echo "mutmut run ${patterns[*]} (log: mutants.log)"
"$PYTHON" -m mutmut run --max-children "${JOBS:-1}" "${patterns[@]}" > mutants.log 2>&1 || true
"$PYTHON" -m mutmut results --all true | "$PYTHON" scripts/mutation_report.py "${modules[@]}"
