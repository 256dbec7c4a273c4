#!/usr/bin/env bash
# Benchmark: every generated litmus family on the simulator against the PTX model's verdicts.
#
#   scripts/litmus_families.sh [EXECUTIONS] [OUT]     (defaults: 100000, target/litmus-families)
#
# Generates the families (`gpuwmm litmus generate`), runs each family with `litmus run --backend
# sim --seed 26 --executions EXECUTIONS --expect`, one CSV per family under OUT/runs (a family
# whose CSV exists is not run again, so an interrupted run resumes), then prints the table:
# tests, UNSOUND, weak-only allowed states reached / not reached (by family and by access
# order), wall time. Simulator results. GPUWMM_BIN=path runs that binary instead of building.
set -euo pipefail
cd "$(dirname "$0")/.."
executions=${1:-100000}
out=${2:-target/litmus-families}
[ -n "${GPUWMM_BIN:-}" ] || cargo build --release -q
bin=${GPUWMM_BIN:-target/release/gpuwmm}
mkdir -p "$out/runs"
[ -f "$out/gen/expected.csv" ] || "$bin" litmus generate --out "$out/gen" >/dev/null
start=$(date +%s)
for family in $(ls "$out/gen" | grep -v expected.csv); do
    csv="$out/runs/$family.csv"
    [ -f "$csv" ] && continue
    # exit 1 (UNSOUND) is reported in the table, not a reason to stop
    "$bin" litmus run "$out/gen/$family" --backend sim --seed 26 --executions "$executions" \
        --expect "$out/gen/expected.csv" --csv "$csv.part" >"$out/runs/$family.log" 2>&1 || [ $? -eq 1 ]
    mv "$csv.part" "$csv"
done
end=$(date +%s)
echo "executions per test: $executions; wall time of this invocation: $((end - start)) s (simulator)"
# table columns: test,tier,expected,sc_reachable,executions,not_finished,reached,verdict,reason
cat "$out"/runs/*.csv | awk -F, '
    $1 == "test" { next }
    {
        tests++
        if ($8 == "UNSOUND") unsound++
        split($1, p, "/"); family = p[1]
        split(substr(p[2], length(family) + 2), n, "+"); order = n[1]
        if ($3 == "allowed" && $4 != "yes") {
            weak++
            if ($7 > 0) reached++
            else { missed++; by_family[family]++; by_order[order]++ }
        }
    }
    END {
        printf "| tests | UNSOUND | weak-only allowed | reached | not reached |\n|---|---|---|---|---|\n"
        printf "| %d | %d | %d | %d (%.1f%%) | %d |\n\n", tests, unsound, weak, reached, 100 * reached / (weak ? weak : 1), missed
        printf "not reached, by family:"; for (f in by_family) printf " %s %d;", f, by_family[f]; printf "\n"
        printf "not reached, by access order:"; for (o in by_order) printf " %s %d;", o, by_order[o]; printf "\n"
    }'
