#!/usr/bin/env bash
# Mutation testing of the system model and the CLI's simulate argument checks with mutmut (docs/mutation.md).
# Not part of the default pytest run: mutmut copies the sources into ./mutants and runs the fast system-model
# tests (listed under [tool.mutmut] in pyproject.toml; no Verilator, no study runs) against every mutant.
#
#   scripts/mutation.sh                   # every module, one after another, then the kill rate per module
#   scripts/mutation.sh engine memory     # only these modules (names below)
#   JOBS=2 scripts/mutation.sh            # mutants tested at once (default 1)
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
for module in "${modules[@]}"; do
    pattern=${PATTERNS[$module]:?unknown module $module; choose from ${ALL[*]}}
    echo "== $module ($pattern)"
    "$PYTHON" -m mutmut run --max-children "${JOBS:-1}" "$pattern" > "mutants-$module.log" 2>&1 || true
done
"$PYTHON" -m mutmut results --all true | "$PYTHON" scripts/mutation_report.py "${modules[@]/#/}"
