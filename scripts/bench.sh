#!/usr/bin/env bash
# Reproducible benchmarks for docs/BENCHMARKS.md. One run measures:
#   (a) Breakwater's overhead vs direct on the miss and exact-hit paths at
#       concurrency 1, 16, 64 (breakwater overhead, closed loop);
#   (b) exact-hit throughput, Breakwater vs nginx proxy_cache on POST bodies
#       (Debian's nginx), same run, same load tool (wrk);
#   (c) miss-path overhead vs the Portkey gateway (npm @portkey-ai/gateway),
#       same upstream, same load (breakwater overhead);
#   (d) the demo's peak-load table (breakwater demo).
# Every server runs on loopback in front of the same simulated model
# (breakwater sim, no latency, no capacity limit), so what is measured is
# the proxies, not the model.
#
# Usage: scripts/bench.sh [-d 5s] [-c 1,16,64] [-o results.md] [-smoke]
#        scripts/bench.sh -pinned [pinned.sh options]
#   -smoke   a smoke run: 1s cells, concurrency 1, no installs, no demo
#   -pinned  instead: per-request CPU against nginx with the server pinned
#            to one core (scripts/pinned.sh)
# Needs: go; installs nginx + wrk with apt-get (root or sudo) and the Portkey
# gateway with npm into a temporary folder when missing. A peer that cannot
# be installed or started is reported as skipped, with the reason.
set -euo pipefail

DUR=5s
CONC=1,16,64
OUT=
SMOKE=0
NAME=bench
while [ $# -gt 0 ]; do
	case "$1" in
	-d) DUR=$2; shift 2 ;;
	-c) CONC=$2; shift 2 ;;
	-o) OUT=$2; shift 2 ;;
	-smoke) SMOKE=1; DUR=1s; CONC=1; shift ;;
	-pinned) shift; exec "$(dirname "$0")/pinned.sh" "$@" ;;
	*) echo "usage: $0 [-d 5s] [-c 1,16,64] [-o results.md] [-smoke]" >&2; exit 2 ;;
	esac
done

. "$(dirname "$0")/common.sh"
PORT=${BENCH_PORT:-19000}
SIM=$PORT BW=$((PORT + 80)) NGINX=$((PORT + 81)) PORTKEY=$((PORT + 82)) BWNC=$((PORT + 83))

log "building breakwater"
(cd "$ROOT" && go build -o "$TMP/breakwater" .)
BIN=$TMP/breakwater

say "## Run of $(date -u '+%Y-%m-%d %H:%M UTC')"
say
say "- machine: $(uname -srm), $(nproc) CPUs ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'))," \
	"$(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo) RAM; load tool and servers share these CPUs"
say "- $(go version | cut -d' ' -f3-), breakwater at $(cd "$ROOT" && git rev-parse --short HEAD 2>/dev/null || echo '?')$(cd "$ROOT" && git diff --quiet 2>/dev/null || echo ' (with uncommitted changes)')"
say "- command: \`scripts/bench.sh $([ "$SMOKE" = 1 ] && echo -smoke || echo "-d $DUR -c $CONC")\`"
say

# --- the simulated model ---------------------------------------------------
"$BIN" sim -listen 127.0.0.1:$SIM -latency 0 -jitter 0 -capacity 0 >"$TMP/sim.log" 2>&1 &
PIDS+=($!)
wait_http http://127.0.0.1:$SIM/sim/stats || { log "sim did not start"; cat "$TMP/sim.log" >&2; exit 1; }

# --- Breakwater, production defaults but for the upstream and its limits ---
cat >"$TMP/breakwater.toml" <<EOF
default_upstream = "sim"
[server]
listen = "127.0.0.1:$BW"
[cache]
data_dir = "$TMP/data"
[[upstreams]]
name = "sim"
base_url = "http://127.0.0.1:$SIM/v1"
max_concurrency = 256
max_queue = 1024
EOF
"$BIN" -config "$TMP/breakwater.toml" >"$TMP/breakwater.log" 2>&1 &
PIDS+=($!)
wait_http http://127.0.0.1:$BW/readyz || { log "breakwater did not start"; tail "$TMP/breakwater.log" >&2; exit 1; }
# The same proxy with the cache off: its miss path is the proxy and the
# caller alone, without embedding the question, searching and writing back.
sed -e "s/:$BW\"/:$BWNC\"/" -e "s|$TMP/data|$TMP/data-nocache|" -e 's/^\[cache\]$/[cache]\nenabled = false/' "$TMP/breakwater.toml" >"$TMP/breakwater-nocache.toml"
"$BIN" -config "$TMP/breakwater-nocache.toml" >"$TMP/breakwater-nocache.log" 2>&1 &
PIDS+=($!)
wait_http http://127.0.0.1:$BWNC/readyz || { log "breakwater (cache off) did not start"; tail "$TMP/breakwater-nocache.log" >&2; exit 1; }
TARGETS=(-target "direct=http://127.0.0.1:$SIM" -target "breakwater=http://127.0.0.1:$BW" -target "breakwater-nocache=http://127.0.0.1:$BWNC")
SKIPPED=()

# --- nginx with proxy_cache on POST bodies ---------------------------------
if [ "$SMOKE" = 0 ] && ! command -v nginx >/dev/null; then
	log "installing nginx and wrk (apt-get)"
	as_root apt-get install -y -qq nginx-light wrk >"$TMP/apt.log" 2>&1 ||
		(as_root apt-get update -qq && as_root apt-get install -y -qq nginx-light wrk) >>"$TMP/apt.log" 2>&1 ||
		log "apt-get failed: $(tail -1 "$TMP/apt.log")"
fi
if [ "$SMOKE" = 0 ] && ! command -v wrk >/dev/null; then
	as_root apt-get install -y -qq wrk >>"$TMP/apt.log" 2>&1 || true
fi
NGINX_BIN=$(command -v nginx || echo /usr/sbin/nginx)
if [ -x "$NGINX_BIN" ]; then
	mkdir -p "$TMP/nginx/cache" "$TMP/nginx/tmp"
	chmod -R 777 "$TMP/nginx"
	cat >"$TMP/nginx/nginx.conf" <<EOF
worker_processes 2;
daemon on;
pid $TMP/nginx/nginx.pid;
error_log $TMP/nginx/error.log warn;
events { worker_connections 4096; }
http {
	access_log off;
	client_body_temp_path $TMP/nginx/tmp/body;
	proxy_temp_path $TMP/nginx/tmp/proxy;
	fastcgi_temp_path $TMP/nginx/tmp/fastcgi;
	uwsgi_temp_path $TMP/nginx/tmp/uwsgi;
	scgi_temp_path $TMP/nginx/tmp/scgi;
	proxy_cache_path $TMP/nginx/cache levels=1:2 keys_zone=llm:16m max_size=1g inactive=1h use_temp_path=off;
	upstream sim { server 127.0.0.1:$SIM; keepalive 256; }
	server {
		listen 127.0.0.1:$NGINX;
		# \$request_body is only set when the whole body fits this buffer.
		client_body_buffer_size 1m;
		client_max_body_size 1m;
		location / {
			proxy_pass http://sim;
			proxy_http_version 1.1;
			proxy_set_header Connection "";
			proxy_cache llm;
			proxy_cache_methods POST;
			proxy_cache_key "\$request_uri|\$request_body";
			proxy_cache_valid 200 1h;
			proxy_cache_lock on;
			proxy_ignore_headers Cache-Control Expires Set-Cookie;
			add_header X-Cache-Status \$upstream_cache_status;
		}
	}
}
EOF
	if "$NGINX_BIN" -c "$TMP/nginx/nginx.conf" -p "$TMP/nginx" 2>"$TMP/nginx/start.log" && wait_http http://127.0.0.1:$NGINX/v1/models; then
		TARGETS+=(-target "nginx=http://127.0.0.1:$NGINX")
		NGINX_VERSION=$("$NGINX_BIN" -v 2>&1 | cut -d/ -f2)
		say "- nginx $NGINX_VERSION (Debian package), proxy_cache on POST, key \`\$request_uri|\$request_body\`, 2 workers"
	else
		SKIPPED+=("nginx: did not start: $(tail -1 "$TMP/nginx/start.log" 2>/dev/null)")
	fi
else
	SKIPPED+=("nginx: not installed and apt-get could not install it")
fi

# --- Portkey gateway ---------------------------------------------------------
PORTKEY_DIR=${PORTKEY_DIR:-$TMP/portkey}
if [ "$SMOKE" = 0 ] && [ ! -f "$PORTKEY_DIR/node_modules/@portkey-ai/gateway/build/start-server.js" ] && command -v npm >/dev/null; then
	log "installing @portkey-ai/gateway (npm) into $PORTKEY_DIR"
	mkdir -p "$PORTKEY_DIR"
	(cd "$PORTKEY_DIR" && npm init -y >/dev/null && npm install --no-audit --no-fund @portkey-ai/gateway) >"$TMP/npm.log" 2>&1 ||
		log "npm install failed: $(tail -1 "$TMP/npm.log")"
fi
PK_JS=$PORTKEY_DIR/node_modules/@portkey-ai/gateway/build/start-server.js
if [ -f "$PK_JS" ] && command -v node >/dev/null; then
	node "$PK_JS" --port=$PORTKEY --headless >"$TMP/portkey.log" 2>&1 &
	PIDS+=($!)
	if wait_http http://127.0.0.1:$PORTKEY/; then
		TARGETS+=(-target "portkey=http://127.0.0.1:$PORTKEY|x-portkey-provider=openai|x-portkey-custom-host=http://127.0.0.1:$SIM/v1")
		PK_VERSION=$(node -p "require('$PORTKEY_DIR/node_modules/@portkey-ai/gateway/package.json').version")
		say "- Portkey gateway $PK_VERSION (npm), node $(node --version), headers x-portkey-provider: openai, x-portkey-custom-host: the sim"
	else
		SKIPPED+=("portkey: did not start: $(tail -1 "$TMP/portkey.log")")
	fi
else
	SKIPPED+=("portkey: @portkey-ai/gateway not installed (npm missing or install failed)")
fi
for s in "${SKIPPED[@]}"; do say "- skipped $s"; done
say

# --- (a) + (c): latency added, miss and exact-hit paths ----------------------
say "### Latency added (closed loop, $DUR per cell after 0.5s warm-up; baseline: the sim itself)"
say
say "Command: \`breakwater overhead $(printf '%q ' "${TARGETS[@]}")-c $CONC -d $DUR -skip-hit portkey,breakwater-nocache\`"
say
"$BIN" overhead "${TARGETS[@]}" -c "$CONC" -d "$DUR" -skip-hit portkey,breakwater-nocache >&3
say

# --- (b): exact-hit throughput with wrk ----------------------------------
if command -v wrk >/dev/null; then
	BODY='{"model":"gpt-test","messages":[{"role":"user","content":"What is the best way to parse JSON in Go?"}]}'
	cat >"$TMP/post.lua" <<EOF
wrk.method = "POST"
wrk.body = '$BODY'
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer sk-wrk"
EOF
	say "### Exact-hit throughput (wrk, one cached POST body, $DUR per row)"
	say
	say "Command per row: \`wrk -t2 -c64 -d$DUR --latency -s post.lua URL/v1/chat/completions\` (post.lua sets the method, body and headers)"
	say
	say "| target | req/s | p50 | p99 | cache header on the 2nd request |"
	say "|---|---:|---:|---:|---|"
	for row in "sim (no cache)=http://127.0.0.1:$SIM" "breakwater=http://127.0.0.1:$BW" "nginx=http://127.0.0.1:$NGINX"; do
		name=${row%%=*} url=${row#*=}/v1/chat/completions
		if [ "$name" = nginx ] && [ -z "${NGINX_VERSION:-}" ]; then continue; fi
		for _ in 1 2; do hdr=$(curl -s -D - -o /dev/null -H 'Content-Type: application/json' -H 'Authorization: Bearer sk-wrk' -d "$BODY" "$url" | tr -d '\r' | grep -i -E '^(x-breakwater-cache|x-cache-status):' || true); done
		res=$(wrk -t2 -c64 -d"$DUR" --latency -s "$TMP/post.lua" "$url")
		rps=$(echo "$res" | awk '/Requests\/sec/ {print $2}')
		p50=$(echo "$res" | awk '$1=="50%" {print $2}')
		p99=$(echo "$res" | awk '$1=="99%" {print $2}')
		non2xx=$(echo "$res" | awk '/Non-2xx/ {print " ("$4" non-2xx)"}')
		say "| $name | ${rps%.*}$non2xx | $p50 | $p99 | ${hdr:-–} |"
	done
	say
else
	say "### Exact-hit throughput: skipped (wrk is not installed and apt-get could not install it)"
	say
fi

# --- (d): the demo ---------------------------------------------------------
if [ "$SMOKE" = 0 ]; then
	say "### Peak load: \`breakwater demo\`"
	say
	say '```'
	"$BIN" demo >&3 2>"$TMP/demo.log" || { log "demo failed"; cat "$TMP/demo.log" >&2; exit 1; }
	say '```'
fi
log "done"
