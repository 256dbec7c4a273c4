#!/usr/bin/env bash
# Hardens the paper's seven fence-less apps one after another and writes their results as a table
# in the shape of the paper's table 6 (initial sites, fences kept, rounds, runs, wall time).
#
# Usage: scripts/harden-table.sh OUT [HARDEN-OPTION...]
#   OUT             folder of the journals (APP.csv, APP.json), reports (APP.report.json), table.md
#   HARDEN-OPTION   passed to every `gpuwmm harden` (e.g. --stable-runs 1000 --jobs 1)
# Environment: BACKEND (default sim), APPS (default: the seven fence-less apps), GPUWMM (default
# target/release/gpuwmm).
#
# Run it twice and it goes on where it stopped: an app with a report is skipped, an app with a
# journal but no report is resumed (`harden --resume`).
set -euo pipefail
cd "$(dirname "$0")/.."

usage() { sed -n '5,9p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
[[ $# -ge 1 && "$1" != -* ]] || usage
out="$1"
shift
backend="${BACKEND:-sim}"
apps="${APPS:-cbe-ht cbe-dot ct-octree tpo-tm sdk-red-nf cub-scan-nf ls-bh-nf}"
gpuwmm="${GPUWMM:-target/release/gpuwmm}"
[[ -x "$gpuwmm" ]] || { echo "harden-table: $gpuwmm not built (cargo build --release)" >&2; exit 2; }
mkdir -p "$out"
if [[ -e "$out/options.txt" ]]; then
    started="$(cat "$out/options.txt")"
    [[ "$started" == "$*" ]] || {
        echo "harden-table: $out was started with options '$started', not '$*'" >&2
        exit 2
    }
else
    printf '%s\n' "$*" >"$out/options.txt"
fi

# Whether FILE is a whole harden report that says the result is not stable.
unstable() {
    python3 -c 'import json, sys; sys.exit(json.load(open(sys.argv[1]))["stable"] is not False)' "$1" \
        2>/dev/null
}

for app in $apps; do
    report="$out/$app.report.json"  # not APP.json: that is the journal's sidecar
    if [[ -s "$report" ]]; then
        echo "harden-table: $app done ($report)"
        continue
    fi
    journal="$out/$app.csv"
    resume=()
    [[ -e "$journal" ]] && resume=(--resume)
    echo "harden-table: hardening $app on $backend ($*)"
    status=0
    "$gpuwmm" harden "$app" --backend "$backend" --journal "$journal" "${resume[@]}" --json "$@" \
        >"$report.partial" || status=$?
    # Exit code 1 with a whole report: the rounds ran out without a stable fence set. That is a
    # row of the table (stable: NO) all the same; anything else stops the script.
    if [[ $status -eq 1 ]] && unstable "$report.partial"; then
        status=0
    fi
    [[ $status -eq 0 ]] || exit "$status"
    mv "$report.partial" "$report"
done

python3 - "$out" $apps >"$out/table.md" <<'EOF'
import json, sys
from pathlib import Path

out, apps = Path(sys.argv[1]), sys.argv[2:]
# The paper's table 6 (seeds/004, fences inserted initially and kept on Titan).
paper = {"cbe-ht": (10, 1), "cbe-dot": (4, 1), "ct-octree": (33, 1), "tpo-tm": (28, 1),
         "sdk-red-nf": (6, 1), "cub-scan-nf": (51, 2), "ls-bh-nf": (90, 4)}
options = (out / "options.txt").read_text().strip() or "none"
print(f"Options besides the defaults: `{options}`.\n")
print("| app | initial sites | fences kept | stable | rounds | queries | runs | wall (s) "
      "| paper: initial → kept |")
print("|---|---:|---|---|---:|---:|---:|---:|---|")
for app in apps:
    r = json.loads((out / f"{app}.report.json").read_text())
    kept = ", ".join(f"#{f['site']}" + (f" (:{f['line']})" if f.get("line") else "")
                     + f" {f['kind']}" for f in r["fences"]) or "none"
    p = paper.get(app)
    print(f"| {app} | {r['candidate_sites']} | {len(r['fences'])}: {kept} "
          f"| {'yes' if r['stable'] else 'NO'} | {r['rounds']} | {r['queries']} | {r['runs']:,} "
          f"| {r['wall_s']:.1f} | {f'{p[0]} → {p[1]}' if p else '—'} |")
first = json.loads((out / f"{apps[0]}.report.json").read_text())
print(f"\n{first['provenance']}; granularity {first['granularity']}, "
      f"environment {first['env']}, seed {first['seed']}. Wall time is that of the invocation that "
      "finished the hardening (a resumed one counts only its own part).")
EOF
cat "$out/table.md"
