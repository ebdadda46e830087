#!/usr/bin/env bash
# Lookups of `bosun dispatcher` (or of `bosun serve`'s `/api/v1/dispatch`,
# MODE serve) side by side with nginx answering a fixed 200
# (worker_processes 1), both driven by `wrk -t2 -c32 -d10s --latency` with the
# same POST body, in turns, ROUNDS times. The dispatcher serves a plan of
# JOBS jobs (in files of 5, 3 clusters); each wrk thread asks for a
# different job. Prints each run's requests/s and p99, and the medians' ratios.
#
#   bench/dispatch-lookup.sh [JOBS] [ROUNDS] [dispatcher|serve]
#   (defaults 60000, 3, dispatcher; needs wrk and nginx)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
jobs=${1:-60000}
rounds=${2:-3}
mode=${3:-dispatcher}
command -v wrk >/dev/null || { echo "needs wrk: apt-get install -y wrk" >&2; exit 1; }
command -v nginx >/dev/null || { echo "needs nginx: apt-get install -y nginx" >&2; exit 1; }
work=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"' EXIT

cargo build --quiet --release --bin bosun --manifest-path "$root/Cargo.toml"
bosun="$root/target/release/bosun"

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# The job configuration: JOBS periodics, 5 to a file, none pinned.
mkdir -p "$work/jobs"
cat > "$work/config.yaml" <<YAML
scheduler: {enabled: true}
build_clusters:
  build01: {kind: local}
  build02: {kind: local}
  build03: {kind: local, capacity: 50}
dispatcher:
  relocatable_clusters: [default]
YAML
# (`bosun serve` would run interval periodics at once: there they never fire.)
if [ "$mode" = serve ]; then schedule='cron: "0 0 31 2 *"'; else schedule='interval: 1h'; fi
python3 - "$work/jobs" "$jobs" "$schedule" <<'PY'
import sys
d, n, schedule = sys.argv[1], int(sys.argv[2]), sys.argv[3]
for f in range((n + 4) // 5):
    with open(f"{d}/file-{f:05}.yaml", "w") as out:
        out.write("periodics:\n")
        for j in range(5):
            i = f * 5 + j
            if i >= n:
                break
            out.write(f"- name: job-{i:06}\n  {schedule}\n  spec: {{containers: [{{image: x, command: [\"true\"]}}]}}\n")
PY

bport=$(free_port)
if [ "$mode" = serve ]; then
  "$bosun" serve --config "$work/config.yaml" --job-config "$work/jobs" \
    --data-dir "$work/data" --listen "127.0.0.1:$bport" > "$work/dispatcher.log" 2>&1 &
  burl="http://127.0.0.1:$bport/api/v1/dispatch"
else
  "$bosun" dispatcher --config "$work/config.yaml" --job-config "$work/jobs" \
    --data-dir "$work/data" --listen "127.0.0.1:$bport" > "$work/dispatcher.log" 2>&1 &
  burl="http://127.0.0.1:$bport"
fi
pids+=($!)
for _ in $(seq 1 1200); do
  curl -sf "$burl/readyz" >/dev/null 2>&1 && break
  sleep 0.1
done
curl -sf "$burl/readyz" >/dev/null || { cat "$work/dispatcher.log"; exit 1; }
answer=$(curl -s -XPOST "$burl" -d '{"job": "job-000042"}')
echo "$mode: $jobs jobs planned; job-000042 -> $answer"

nport=$(free_port)
mkdir -p "$work/nginx"
cat > "$work/nginx/nginx.conf" <<CONF
worker_processes 1;
daemon off;
pid $work/nginx/nginx.pid;
error_log $work/nginx/error.log;
events { worker_connections 1024; }
http {
  access_log off;
  server {
    listen 127.0.0.1:$nport;
    location / { default_type application/json; return 200 '{"cluster":"build01"}'; }
  }
}
CONF
nginx -c "$work/nginx/nginx.conf" -p "$work/nginx" &
pids+=($!)
sleep 0.5

# Each wrk thread asks for its own job.
cat > "$work/post.lua" <<'LUA'
local n = 0
setup = function(thread)
  n = n + 1
  thread:set("body", string.format('{"job": "job-%06d"}', (n * 7919) % tonumber(os.getenv("BENCH_JOBS"))))
end
init = function(args)
  wrk.method = "POST"
  wrk.headers["Content-Type"] = "application/json"
  wrk.body = body
end
LUA

export BENCH_JOBS=$jobs
run() { # URL -> "requests/s p99_ms"
  wrk -t2 -c32 -d10s --latency -s "$work/post.lua" "$1" > "$work/wrk.txt" 2>&1
  rps=$(awk '/^Requests\/sec/ {print $2}' "$work/wrk.txt")
  p99=$(awk '$1 == "99%" {v=$2; if (v ~ /us$/) {sub(/us/,"",v); v=v/1000} else if (v ~ /ms$/) {sub(/ms/,"",v)} else if (v ~ /s$/) {sub(/s/,"",v); v=v*1000}; print v}' "$work/wrk.txt")
  non2xx=$(awk '/Non-2xx/ {print $NF}' "$work/wrk.txt")
  [ -z "$non2xx" ] || { echo "non-2xx answers: $non2xx" >&2; cat "$work/wrk.txt" >&2; exit 1; }
  echo "$rps $p99"
}
: > "$work/results"
for r in $(seq 1 "$rounds"); do
  read -r nr np < <(run "http://127.0.0.1:$nport/")
  read -r br bp < <(run "$burl")
  printf 'round %d: nginx %9.0f req/s p99 %7.3f ms | bosun %9.0f req/s p99 %7.3f ms\n' "$r" "$nr" "$np" "$br" "$bp"
  echo "$nr $np $br $bp" >> "$work/results"
done
python3 - "$work/results" <<'PY'
import statistics, sys
rows = [list(map(float, l.split())) for l in open(sys.argv[1])]
nr, np_, br, bp = (statistics.median(c) for c in zip(*rows))
print(f"medians: nginx {nr:.0f} req/s p99 {np_:.3f} ms; bosun {br:.0f} req/s p99 {bp:.3f} ms")
print(f"bosun / nginx requests/s: {br / nr:.3f} (target >= 0.7); p99 bosun / nginx: {bp / np_:.3f} (target <= 2)")
PY
