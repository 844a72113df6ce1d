#!/usr/bin/env bash
# Mutation testing with mutmut, one module at a time (docs/guides/mutation.md; modules and their tests:
# scripts/mutation_modules.toml). Not part of the default pytest run.
#
#   scripts/mutation.sh                     # every module in turn, then the kill rate per module
#   scripts/mutation.sh engine metrics      # these modules only
#   JOBS=2 scripts/mutation.sh execution    # mutants tested at once (default 1)
#   python scripts/mutation_report.py       # the table again, from the runs so far
#
# Each module runs in build/mutation/<module>/ (results accumulate there: a rerun tests only changed mutants).
# The verdicts are also saved to scripts/mutation_results/<module>.meta: commit them, and a fresh checkout's run
# starts from them (mutmut retests the functions changed since; a test weakened since is not noticed: delete the
# folder and the saved file to start afresh).
# Needs `pip install -e '.[test,mutation]'`.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=$(realpath -s "${PYTHON:-.venv/bin/python}")
REPORT=$(realpath scripts/mutation_report.py)
if [ $# -eq 0 ]; then
    mapfile -t modules < <("$PYTHON" -c 'import sys, tomllib; print(*tomllib.load(open(sys.argv[1], "rb")), sep="\n")' \
                           scripts/mutation_modules.toml)
else
    modules=("$@")
fi
run() {   # one mutmut run in the module's folder; its wall, user and system seconds appended to time.txt
    (cd "$folder" && /usr/bin/time -a -f '%e %U %S' -o time.txt \
        nice -n 10 "$PYTHON" -m mutmut run --max-children "${JOBS:-1}" "$@" >> mutmut.log 2>&1) || true
}
for module in "${modules[@]}"; do
    folder=$("$PYTHON" "$REPORT" --prepare "$module")
    read -ra names <<< "$("$PYTHON" "$REPORT" --names "$module")"   # none: the whole file
    rm -f "$folder/time.txt" "$folder/mutmut.log"
    echo "$module: mutmut run ${names[*]} (log: $folder/mutmut.log)"
    if [ ${#names[@]} -gt 0 ]; then
        run "${names[@]}"      # mutmut retests every mutant it is given by name
    else
        # A whole-file run tests only mutants without a result (new, or of a changed function): the survivors
        # of earlier runs are retested first, by name (a test added since may kill them).
        read -ra survivors <<< "$("$PYTHON" "$REPORT" --survivors "$module")"
        [ ${#survivors[@]} -eq 0 ] || run "${survivors[@]}"
        run
    fi
    "$PYTHON" "$REPORT" --save "$module" > /dev/null   # its verdicts, to commit (a fresh checkout continues from them)
done
"$PYTHON" "$REPORT" "${modules[@]}"
