#!/usr/bin/env bash
# Scale-out (docs/deploy.md): two `bicache serve` replicas behind nginx with consistent hashing on
# a prefix key (`hash $http_x_prefix_key consistent;`). K distinct shared prefixes x M requests
# each go through nginx; every prefix must land on exactly one replica (nginx's access log records
# the upstream of each request), each prefix is built once in the whole fleet, and the aggregate
# prefix-cache hit rate over both replicas' /metrics is (M-1)/M -- what one server would reach.
# nginx runs as the current user from a temp prefix (own pid, temp paths and logs, no system
# config), in the foreground with master_process off, and is stopped by PID.
set -euo pipefail
BIN=$1
SRC=$2
M_FILE=$SRC/tests/data/golden/llada-tiny.gguf
K=6  # prefixes
M=4  # requests per prefix

NGINX=$(command -v nginx || true)
[[ -z $NGINX && -x /usr/sbin/nginx ]] && NGINX=/usr/sbin/nginx
if [[ -z $NGINX ]]; then
  echo "FAIL: nginx not found (Debian package 'nginx'; scripts/deps.sh installs it)"
  exit 1
fi

TMP=$(mktemp -d)
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null && wait "$p" 2>/dev/null; done
  rm -rf "$TMP"
}
trap cleanup EXIT
fail=0
check() {
  local label=$1; shift
  if "$@"; then echo "ok   $label"; else echo "FAIL $label"; fail=1; fi
}

# ---- two replicas on free loopback ports ----------------------------------------------------
URLS=()
for r in 0 1; do
  : >"$TMP/replica$r.log"  # exists before the first poll (the background child opens it late)
  "$BIN" serve -m "$M_FILE" --host 127.0.0.1 --port 0 -t 1 --cache llm >>"$TMP/replica$r.log" 2>&1 &
  PIDS+=($!)
  url=
  for _ in $(seq 1 300); do
    url=$(sed -n 's/^bicache: listening on \(http:[^ ]*\)$/\1/p' "$TMP/replica$r.log")
    [[ -n $url ]] && break
    sleep 0.1
  done
  [[ -n $url ]] || { echo "FAIL: replica $r: no listening line"; cat "$TMP/replica$r.log"; exit 1; }
  URLS+=("$url")
done
for url in "${URLS[@]}"; do
  for _ in $(seq 1 300); do
    [[ $(curl -s -o /dev/null -w '%{http_code}' "$url/health") == 200 ]] && break
    sleep 0.1
  done
  [[ $(curl -s -o /dev/null -w '%{http_code}' "$url/health") == 200 ]] || { echo "FAIL: $url/health never 200"; exit 1; }
done
echo "replicas: ${URLS[*]}"

# ---- nginx in front ---------------------------------------------------------------------------
NPORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
mkdir -p "$TMP/nginx/logs" "$TMP/nginx/tmp"
cat >"$TMP/nginx/nginx.conf" <<CONF
daemon off;
master_process off;
worker_processes 1;
pid $TMP/nginx/nginx.pid;
error_log $TMP/nginx/logs/error.log warn;
events { worker_connections 256; }
http {
  log_format affinity '\$http_x_prefix_key \$upstream_addr \$status';
  access_log $TMP/nginx/logs/access.log affinity;
  client_body_temp_path $TMP/nginx/tmp/body;
  proxy_temp_path $TMP/nginx/tmp/proxy;
  fastcgi_temp_path $TMP/nginx/tmp/fastcgi;
  uwsgi_temp_path $TMP/nginx/tmp/uwsgi;
  scgi_temp_path $TMP/nginx/tmp/scgi;
  upstream bicache {
    hash \$http_x_prefix_key consistent;
    server ${URLS[0]#http://};
    server ${URLS[1]#http://};
    keepalive 16;
  }
  server {
    listen 127.0.0.1:$NPORT;
    location / {
      proxy_pass http://bicache;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering off;
      proxy_read_timeout 300s;
    }
  }
}
CONF
"$NGINX" -p "$TMP/nginx" -c "$TMP/nginx/nginx.conf" -e "$TMP/nginx/logs/error.log" &
PIDS+=($!)
LB=http://127.0.0.1:$NPORT
for _ in $(seq 1 100); do
  [[ $(curl -s -o /dev/null -w '%{http_code}' "$LB/health") == 200 ]] && break
  sleep 0.1
done
check "nginx forwards /health" [ "$(curl -s -o /dev/null -w '%{http_code}' "$LB/health")" = 200 ]

# ---- K prefixes x M requests, interleaved (A1 B1 .. A2 B2 ..) --------------------------------
: >"$TMP/nginx/logs/access.log"
errors=0
for m in $(seq 1 $M); do
  for k in $(seq 1 $K); do
    body=$(printf '{"messages":[{"role":"system","content":"Shared document %d: %s"},{"role":"user","content":"Question %d about it?"}],"max_tokens":4}' \
      "$k" "$(printf 'facts about topic %d, ' $(seq 1 12) | sed "s/topic/topic-$k/g")" "$m")
    st=$(curl -s -o "$TMP/body" -w '%{http_code}' "$LB/v1/chat/completions" -H "X-Prefix-Key: doc-$k" -d "$body")
    [[ $st == 200 ]] || { errors=$((errors + 1)); echo "request k=$k m=$m: HTTP $st $(head -c 200 "$TMP/body")"; }
  done
done
check "all $((K * M)) requests succeeded" [ "$errors" = 0 ]

# Every prefix key went to exactly one upstream.
echo "routing (key -> upstream):"
awk '$1 ~ /^doc-/ { print $1, $2 }' "$TMP/nginx/logs/access.log" | sort -u | tee "$TMP/routes"
check "each prefix on exactly one replica" [ "$(cut -d' ' -f1 "$TMP/routes" | sort | uniq -d | wc -l)" = 0 ]
check "every prefix routed" [ "$(wc -l <"$TMP/routes")" = "$K" ]
echo "requests per replica: $(awk '$1 ~ /^doc-/ { print $2 }' "$TMP/nginx/logs/access.log" | sort | uniq -c | tr '\n' ' ')"

# Aggregate hit rate over both replicas.
sum_metric() {
  local total=0 v
  for url in "${URLS[@]}"; do
    v=$(curl -s "$url/metrics" | sed -n "s/^$1{[^}]*} //p")
    total=$((total + ${v:-0}))
  done
  echo "$total"
}
lookups=$(sum_metric bicache_cache_lookups_total)
hits=$(sum_metric bicache_cache_lookup_hits_total)
builds=$(sum_metric bicache_prefix_builds_total)
echo "fleet: $hits hits / $lookups lookups, $builds prefix builds"
check "each prefix built once in the fleet" [ "$builds" = "$K" ]
check "lookups counted" [ "$lookups" = "$((K * M))" ]
# hit rate >= (M-1)/M  <=>  hits * M >= lookups * (M-1)
check "aggregate hit rate >= (M-1)/M" [ $((hits * M)) -ge $((lookups * (M - 1))) ]
exit $fail
