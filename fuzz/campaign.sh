#!/usr/bin/env bash
# Run one fuzz target on its kept corpus until the fuzzer process has used CPU_MINUTES of CPU
# time (user + system, all threads), then stop it with SIGINT so libFuzzer prints its final
# stats. Wall time is not used: on a shared machine it overstates the work done.
#
# usage: fuzz/campaign.sh TARGET CPU_MINUTES [LOG]     (build first: cargo fuzz build)
# prints: TARGET cpu_s=... execs=... cov=... ft=... findings=...
set -euo pipefail
target=$1
minutes=$2
cd "$(dirname "$0")"
log=${3:-artifacts/$target.log}
bin=target/x86_64-unknown-linux-gnu/release/$target
[ -x "$bin" ] || { echo "no $bin: run 'RUSTC_BOOTSTRAP=1 cargo fuzz build' first" >&2; exit 1; }
mkdir -p "artifacts/$target" "corpus/$target"
budget=$((minutes * 60))
tick=$(getconf CLK_TCK)

# Fuzz from the kept corpus; new inputs go to the same directory (cmin it afterwards).
# -max_total_time is only a backstop against a process that stops using CPU: far beyond the
# budget, since beside other busy processes a run can get a small share of a core (a run
# with 4 times its budget as backstop once stopped at 72 % of it).
"$bin" "corpus/$target" -artifact_prefix="artifacts/$target/" -timeout=10 -rss_limit_mb=1024 \
    -print_final_stats=1 -max_total_time=$((budget * 50)) >"$log" 2>&1 &
pid=$!

cpu_s() { awk -v t="$tick" '{ print int(($14 + $15) / t) }' "/proc/$pid/stat" 2>/dev/null || echo -1; }
used=0
while kill -0 "$pid" 2>/dev/null; do
    now=$(cpu_s)
    [ "$now" -ge 0 ] && used=$now
    if [ "$used" -ge "$budget" ]; then
        kill -INT "$pid"
        break
    fi
    sleep 5
done
wait "$pid" || true

execs=$(grep -a 'stat::number_of_executed_units' "$log" | tail -1 | awk '{print $2}')
last=$(grep -aE 'cov: [0-9]+ ft: [0-9]+' "$log" | tail -1)
cov=$(sed -E 's/.*cov: ([0-9]+).*/\1/' <<<"$last")
ft=$(sed -E 's/.*ft: ([0-9]+).*/\1/' <<<"$last")
findings=$(grep -acE 'ERROR: (libFuzzer|AddressSanitizer|LeakSanitizer)|panicked at' "$log" || true)
echo "$target cpu_s=$used execs=${execs:-?} cov=${cov:-?} ft=${ft:-?} findings=$findings"
