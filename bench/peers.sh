#!/usr/bin/env bash
# corral's command line beside its peers: whole-process timings on this host, in one run, with
# hyperfine, and one table of ratios computed from that run.
#   /bin/true      alone; through `corral exec` (default policy: workspace-write, network
#                  denied) against a `corral serve` this script starts on a private socket and
#                  stops at exit; bwrap with every namespace (as bench_exec's BM_Bwrap);
#                  `codex sandbox` (@openai/codex, its default read-only policy); `srt`
#                  (@anthropic-ai/sandbox-runtime, the built-in default settings)
#   corral status  against /bin/true: the client's own cost (connect, hello, one request)
#   8 clients      isolated /bin/true runs per second with 8 concurrent clients looping,
#                  corral exec against bwrap
#   64 MB output   `corral exec -- head -c 64000000 /dev/zero` against
#                  `head -c 64000000 /dev/zero | cat`, both to /dev/null: throughput ratio
# A peer that is missing or cannot run here is skipped with the reason printed.
#
# Usage: bench/peers.sh [CORRAL_BINARY]   (default: build/tools/corral)
# Environment: RUNS hyperfine runs per fast command (default 100); PEER_RUNS per codex/srt
# command (node or a proxy start per run; default 30); CONC_RUNS runs per concurrent client
# (default 50); BIG_RUNS runs of each 64 MB command (default 10).
# The npm peers are pinned in bench/npm (package.json + package-lock.json); tools/setup.sh
# --bench installs them into bench/npm/node_modules. srt also needs ripgrep and socat on PATH.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
corral="${1:-$root/build/tools/corral}"
npm_dir="$root/bench/npm"
RUNS="${RUNS:-100}"
PEER_RUNS="${PEER_RUNS:-30}"
CONC_RUNS="${CONC_RUNS:-50}"
BIG_RUNS="${BIG_RUNS:-10}"
CLIENTS=8
BIG_BYTES=64000000

command -v hyperfine >/dev/null || { echo "peers: needs hyperfine (tools/setup.sh installs it)" >&2; exit 1; }
command -v jq >/dev/null || { echo "peers: needs jq" >&2; exit 1; }
[ -x "$corral" ] || { echo "peers: no corral binary at $corral (build it, or pass its path)" >&2; exit 1; }
corral="$(cd "$(dirname "$corral")" && pwd)/$(basename "$corral")"

work="$(mktemp -d /tmp/corral-peers-XXXXXX)"
sock="$work/c.sock"
serve_pid=""
stop() {
  if [ -n "$serve_pid" ]; then
    kill -TERM "$serve_pid" 2>/dev/null || true
    wait "$serve_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap stop EXIT
trap 'exit 130' INT TERM

# name|command lines, in the order they are timed; the table follows this order.
results="$work/results"
: >"$results"
skipped=()

skip() {  # skip NAME REASON...
  local name="$1"
  shift
  echo "skip $name: $*"
  skipped+=("$name: $*")
}

# Runs COMMAND once (through bash, as given); a failure skips NAME with its exit status and
# the last lines it wrote. Returns 0 if it ran.
preflight() {  # preflight NAME COMMAND
  local name="$1" cmd="$2" out rc=0
  out="$(bash -c "$cmd" 2>&1 >/dev/null)" || rc=$?
  if [ "$rc" -ne 0 ]; then
    skip "$name" "\`$cmd\` exited $rc: $(printf '%s' "$out" | tail -n 3 | tr '\n' ' ')"
    return 1
  fi
}

# Times COMMAND with hyperfine and records its mean and median (s) under NAME.
# MODE: -N (no shell: the command is split into words and run directly) or shell.
timed() {  # timed NAME RUNS MODE COMMAND
  local name="$1" runs="$2" mode="$3" cmd="$4" json="$work/h$(wc -l <"$results").json"
  local args=(--style basic --warmup 3 --runs "$runs" --export-json "$json" -n "$name")
  [ "$mode" = "-N" ] && args+=(-N)
  hyperfine "${args[@]}" "$cmd"
  echo "$name|$(jq -r '.results[0] | "\(.mean)|\(.median)"' "$json")" >>"$results"
}

# CLIENTS loops of RUNS_PER_CLIENT runs each, at once; records the runs per second.
concurrent() {  # concurrent NAME RUNS_PER_CLIENT COMMAND...
  local name="$1" n="$2"
  shift 2
  local pids=() failed=0 t0 t1 c
  t0=$(date +%s%N)
  for ((c = 0; c < CLIENTS; ++c)); do
    (for ((i = 0; i < n; ++i)); do "$@" >/dev/null 2>&1 || exit 1; done) &
    pids+=($!)
  done
  for c in "${pids[@]}"; do wait "$c" || failed=1; done
  t1=$(date +%s%N)
  if [ "$failed" -ne 0 ]; then
    skip "$name" "a run failed with $CLIENTS concurrent clients"
    return 0
  fi
  local rate
  rate=$(awk -v r=$((CLIENTS * n)) -v ns=$((t1 - t0)) 'BEGIN { printf "%.1f", r / (ns / 1e9) }')
  echo "$name: $((CLIENTS * n)) runs by $CLIENTS clients in $(awk -v ns=$((t1 - t0)) 'BEGIN { printf "%.2f", ns / 1e9 }') s = $rate runs/s"
  echo "$name|$rate" >>"$work/rates"
}

echo "peers.sh: $(date -u '+%Y-%m-%d %H:%M:%S UTC'), $(uname -srm), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "corral: $corral ($("$corral" --version 2>&1 | head -n1))"
echo "hyperfine: $(hyperfine --version)"

# --- corral serve on a private socket --------------------------------------------------------
"$corral" serve --socket "$sock" >"$work/serve.log" 2>&1 &
serve_pid=$!
for ((i = 0; ; ++i)); do
  if "$corral" status --socket "$sock" >/dev/null 2>&1; then break; fi
  if ! kill -0 "$serve_pid" 2>/dev/null; then
    wait "$serve_pid" && rc=0 || rc=$?
    serve_pid=""
    echo "peers: corral serve exited ($rc); its log:" >&2
    cat "$work/serve.log" >&2
    exit 1
  fi
  if [ "$i" -ge 1000 ]; then
    echo "peers: corral serve did not answer within 10 s; its log:" >&2
    cat "$work/serve.log" >&2
    exit 1
  fi
  sleep 0.01
done
echo "corral serve: pid $serve_pid on $sock; layers: $("$corral" status --socket "$sock" --json 2>/dev/null |
  jq -r '[.layers[]? | select(.available) | .name] | join(" ")' 2>/dev/null || echo '(status --json unreadable)')"

c_exec="$corral exec --socket $sock -- /bin/true"
c_status="$corral status --socket $sock"
bwrap_cmd="bwrap --unshare-all --die-with-parent --ro-bind / / --dev /dev --proc /proc /bin/true"

# --- the peers: found, and able to run here? -------------------------------------------------
have_bwrap=0
if ! command -v bwrap >/dev/null; then
  skip bwrap "not installed (tools/setup.sh installs bubblewrap)"
elif preflight bwrap "$bwrap_cmd"; then
  have_bwrap=1
  bwrap_cmd="$(command -v bwrap) ${bwrap_cmd#bwrap }"
  echo "bwrap: $(bwrap --version)"
fi

codex_bin="$npm_dir/node_modules/.bin/codex"
codex_native=""
# codex refuses to put its helper links under a temporary dir, so its home is beside the packages.
export CODEX_HOME="$npm_dir/node_modules/.codex-home"
if [ ! -x "$codex_bin" ]; then
  skip codex "no $codex_bin (run tools/setup.sh --bench)"
  codex_bin=""
else
  mkdir -p "$CODEX_HOME"
  echo "codex: $("$codex_bin" --version 2>&1 | head -n1)"
  if preflight "codex sandbox" "$codex_bin sandbox -- /bin/true"; then
    # The npm bin is a node launcher; the native binary it runs is timed too.
    codex_native="$(find "$npm_dir/node_modules/@openai" -path '*/vendor/*/bin/codex' -type f 2>/dev/null | head -n1)"
    if [ -z "$codex_native" ]; then
      skip "codex sandbox (native)" "no native codex binary under $npm_dir/node_modules/@openai"
    elif ! preflight "codex sandbox (native)" "$codex_native sandbox -- /bin/true"; then
      codex_native=""
    fi
  else
    codex_bin=""
  fi
fi

srt_bin="$npm_dir/node_modules/.bin/srt"
srt_settings="$work/srt-settings.json"
# srt's built-in defaults (no network domain allowed, no extra read or write rule), written out
# so that a ~/.srt-settings.json cannot change what is measured.
cat >"$srt_settings" <<'JSON'
{"network": {"allowedDomains": [], "deniedDomains": []},
 "filesystem": {"denyRead": [], "allowRead": [], "allowWrite": [], "denyWrite": []}}
JSON
if [ ! -x "$srt_bin" ]; then
  skip srt "no $srt_bin (run tools/setup.sh --bench)"
  srt_bin=""
else
  echo "srt: $("$srt_bin" --version 2>&1 | head -n1) on node $(node --version 2>&1)"
  missing=""
  for tool in rg socat; do command -v "$tool" >/dev/null || missing+=" $tool"; done
  if [ -n "$missing" ]; then
    skip srt "needs$missing on PATH (Debian: ripgrep socat)"
    srt_bin=""
  elif ! preflight srt "$srt_bin -s $srt_settings /bin/true"; then
    srt_bin=""
  fi
fi

preflight "corral exec" "$c_exec" || { echo "peers: corral exec cannot run /bin/true; serve log:" >&2; cat "$work/serve.log" >&2; exit 1; }
c_big="$corral exec --socket $sock --max-output 64M -- head -c $BIG_BYTES /dev/zero > /dev/null"
pipe_big="head -c $BIG_BYTES /dev/zero | cat > /dev/null"
have_big=0
if preflight "corral exec 64 MB" "$c_big"; then have_big=1; fi

# --- whole process, /bin/true ----------------------------------------------------------------
echo
timed "/bin/true" "$RUNS" -N /bin/true
timed "corral exec" "$RUNS" -N "$c_exec"
timed "corral status" "$RUNS" -N "$c_status"
[ "$have_bwrap" -eq 1 ] && timed "bwrap" "$RUNS" -N "$bwrap_cmd"
[ -n "$codex_bin" ] && timed "codex sandbox (npm bin)" "$PEER_RUNS" -N "$codex_bin sandbox -- /bin/true"
[ -n "$codex_native" ] && timed "codex sandbox (native)" "$PEER_RUNS" -N "$codex_native sandbox -- /bin/true"
[ -n "$srt_bin" ] && timed "srt" "$PEER_RUNS" -N "$srt_bin -s $srt_settings /bin/true"

# --- 64 MB of output -------------------------------------------------------------------------
if [ "$have_big" -eq 1 ]; then
  timed "64 MB through corral exec" "$BIG_RUNS" shell "$c_big"
  timed "64 MB through a pipe" "$BIG_RUNS" shell "$pipe_big"
fi

# --- 8 concurrent clients --------------------------------------------------------------------
echo
: >"$work/rates"
read -r -a c_exec_argv <<<"$c_exec"
concurrent "corral exec" "$CONC_RUNS" "${c_exec_argv[@]}"
if [ "$have_bwrap" -eq 1 ]; then
  read -r -a bwrap_argv <<<"$bwrap_cmd"
  concurrent "bwrap" "$CONC_RUNS" "${bwrap_argv[@]}"
fi

# --- the table -------------------------------------------------------------------------------
echo
echo "load at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
python3 - "$results" "$work/rates" "$BIG_BYTES" <<'PY'
import sys
times = {}
for line in open(sys.argv[1]):
    name, mean, median = line.rstrip("\n").split("|")
    times[name] = (float(mean), float(median))
rates = {}
for line in open(sys.argv[2]):
    name, rate = line.rstrip("\n").split("|")
    rates[name] = float(rate)
big = int(sys.argv[3])

def ratio(a, b, i):
    return f"{times[a][i] / times[b][i]:8.2f}x" if a in times and b in times else "       -"

print(f"{'/bin/true, whole process (hyperfine)':<34}   mean ms median ms   ÷ corral exec: mean  median   ÷ /bin/true: mean  median")
for name in ["/bin/true", "corral status", "corral exec", "bwrap", "codex sandbox (npm bin)",
             "codex sandbox (native)", "srt"]:
    if name not in times:
        print(f"{name:<34} skipped (reason above)")
        continue
    mean, median = times[name]
    print(f"{name:<34} {mean * 1e3:9.2f} {median * 1e3:9.2f}               {ratio(name, 'corral exec', 0)} {ratio(name, 'corral exec', 1)}"
          f"             {ratio(name, '/bin/true', 0)} {ratio(name, '/bin/true', 1)}")

print()
print("ratios")
if "corral status" in times:
    print(f"  corral status / /bin/true:               {ratio('corral status', '/bin/true', 0).strip()} (mean), "
          f"{ratio('corral status', '/bin/true', 1).strip()} (median)")
for peer in ["bwrap", "codex sandbox (npm bin)", "codex sandbox (native)", "srt"]:
    if peer in times:
        print(f"  {peer + ' / corral exec:':<41} {ratio(peer, 'corral exec', 0).strip()} (mean), "
              f"{ratio(peer, 'corral exec', 1).strip()} (median)   (> 1: corral is faster)")
    else:
        print(f"  {peer + ' / corral exec:':<41} skipped (reason above)")
if "corral exec" in rates and "bwrap" in rates:
    print(f"  8 clients, runs/s corral exec / bwrap:   {rates['corral exec'] / rates['bwrap']:.2f}x "
          f"({rates['corral exec']:.1f} / {rates['bwrap']:.1f} runs/s)")
elif "corral exec" in rates:
    print(f"  8 clients: corral exec {rates['corral exec']:.1f} runs/s; bwrap skipped (reason above)")
else:
    print("  8 clients: skipped (reason above)")
a, b = "64 MB through corral exec", "64 MB through a pipe"
if a in times and b in times:
    ca, pb = big / times[a][0] / 1e6, big / times[b][0] / 1e6
    print(f"  64 MB output, throughput corral / pipe:  {ca / pb:.2f}x ({ca:.0f} / {pb:.0f} MB/s, from the means)")
else:
    print("  64 MB output: skipped (reason above)")
PY

if [ ${#skipped[@]} -gt 0 ]; then
  echo
  echo "skipped:"
  printf '  %s\n' "${skipped[@]}"
fi
