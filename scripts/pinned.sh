#!/usr/bin/env bash
# Per-request cost of the sidecar against nginx, server pinned to one core
# (run by `scripts/bench.sh -pinned`, or directly). In one run, interleaved:
#   - nginx (Debian nginx-light, 1 worker) as a plain proxy and as
#     proxy_cache on POST bodies;
#   - Breakwater on default settings (info log to a file, JSON), cache off
#     for the miss path, cache on for the exact hit;
#   - optionally the same Breakwater built from another commit (-before REV);
#   - optionally (-floor) the least a Go proxy can do, scripts/floor, on the
#     standard library's HTTP server and client and on fasthttp's: what the
#     HTTP stack alone costs, before any of Breakwater's work (and, beside
#     the exact hit, the standard library serving a stored answer);
#   - optionally (-syscalls) the system calls per request of each miss-path
#     server at c=16, counted with strace -c (which slows the server: only
#     the counts are read, not the times).
# Every server under test runs on CPU 1 (taskset); the load tool (wrk, one
# thread) and the mock upstream (nginx returning a fixed 1.4 KB completion)
# share CPU 0. Every request is the same 316 bytes long; miss-path requests
# differ by a counter, hit-path requests are one body.
#
# Figures: server CPU per request (utime+stime from /proc of the server's
# processes over the cell / requests answered), requests/s, and p50 at
# concurrency 1 minus the mock's own p50 ("added"). Ratios are taken within
# one round, so other load on the machine moves both sides.
#
# Usage: scripts/pinned.sh [-d 5s] [-rounds 3] [-before REV] [-floor] [-syscalls] [-o out.md]
set -euo pipefail

DUR=5s
ROUNDS=3
BEFORE=
FLOOR=
SYSCALLS=
OUT=
NAME=pinned
while [ $# -gt 0 ]; do
	case "$1" in
	-d) DUR=$2; shift 2 ;;
	-rounds) ROUNDS=$2; shift 2 ;;
	-before) BEFORE=$2; shift 2 ;;
	-floor) FLOOR=1; shift ;;
	-syscalls) SYSCALLS=1; shift ;;
	-o) OUT=$2; shift 2 ;;
	*) echo "usage: $0 [-d 5s] [-rounds 3] [-before REV] [-floor] [-syscalls] [-o out.md]" >&2; exit 2 ;;
	esac
done

. "$(dirname "$0")/common.sh"
PORT=${BENCH_PORT:-19200}
MOCK=$PORT NGX=$((PORT + 1)) NGXC=$((PORT + 2)) BWOFF=$((PORT + 3)) BWON=$((PORT + 4)) OLDOFF=$((PORT + 5)) OLDON=$((PORT + 6))
GONET=$((PORT + 7)) GOFAST=$((PORT + 8)) GOFC=$((PORT + 9)) GOSTORED=$((PORT + 10)) GOPOOL=$((PORT + 11))

if ! command -v nginx >/dev/null || ! command -v wrk >/dev/null || { [ -n "$SYSCALLS" ] && ! command -v strace >/dev/null; }; then
	log "installing nginx-light, wrk and strace (apt-get)"
	as_root apt-get install -y -qq nginx-light wrk strace >"$TMP/apt.log" 2>&1 ||
		(as_root apt-get update -qq && as_root apt-get install -y -qq nginx-light wrk strace) >>"$TMP/apt.log" 2>&1 ||
		{ log "apt-get failed: $(tail -1 "$TMP/apt.log")"; exit 1; }
fi
[ "$(nproc)" -ge 2 ] || { log "needs 2 CPUs (server on CPU 1, load on CPU 0)"; exit 1; }

log "building breakwater"
(cd "$ROOT" && go build -o "$TMP/bw" .)
if [ -n "$FLOOR" ]; then
	(cd "$ROOT/scripts/floor" && go build -o "$TMP/floor" .)
fi
if [ -n "$BEFORE" ]; then
	mkdir -p "$TMP/before-src"
	(cd "$ROOT" && git archive "$BEFORE") | tar -x -C "$TMP/before-src"
	(cd "$TMP/before-src" && go build -o "$TMP/bw-before" .)
fi

# --- the mock model: a fixed 1.4 KB completion, on CPU 0 ------------------
CONTENT=$(printf 'The answer, in some detail. %.0s' $(seq 44))
ANSWER="{\"id\":\"chatcmpl-mock\",\"object\":\"chat.completion\",\"created\":1700000000,\"model\":\"gpt-test\",\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":\"$CONTENT\"},\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":16,\"completion_tokens\":300,\"total_tokens\":316}}"
mkdir -p "$TMP/mock/tmp" "$TMP/ngx/cache" "$TMP/ngx/tmp"
chmod -R 777 "$TMP/mock" "$TMP/ngx"
# nginx_head DIR: how every nginx.conf here starts, up to inside http {}:
# one worker, its pid, log and temporary files under DIR.
nginx_head() {
	cat <<EOF
worker_processes 1;
pid $1/nginx.pid;
error_log $1/error.log warn;
events { worker_connections 4096; }
http {
	access_log off;
	client_body_temp_path $1/tmp/body; proxy_temp_path $1/tmp/proxy; fastcgi_temp_path $1/tmp/fcgi; uwsgi_temp_path $1/tmp/uwsgi; scgi_temp_path $1/tmp/scgi;
	keepalive_requests 1000000;
EOF
}
cat >"$TMP/mock/nginx.conf" <<EOF
$(nginx_head "$TMP/mock")
	server {
		listen 127.0.0.1:$MOCK;
		client_body_buffer_size 64k;
		location / {
			default_type application/json;
			return 200 '$ANSWER';
		}
	}
}
EOF
taskset -c 0 nginx -c "$TMP/mock/nginx.conf" -p "$TMP/mock" || { log "mock nginx did not start"; exit 1; }
wait_http "http://127.0.0.1:$MOCK/v1/chat/completions" || { log "mock not answering"; exit 1; }
[ "$(curl -s -X POST -d '{}' "http://127.0.0.1:$MOCK/v1/chat/completions" | wc -c)" -gt 1000 ] || { log "mock does not answer POST"; exit 1; }

# --- nginx under test: plain proxy and proxy_cache, CPU 1 -----------------
# to_mock: a server's body limits and the start of its location /, passed
# to the mock over kept-alive connections.
to_mock() {
	cat <<EOF
		client_body_buffer_size 1m;
		client_max_body_size 1m;
		location / {
			proxy_pass http://mock;
			proxy_http_version 1.1;
			proxy_set_header Connection "";
EOF
}
cat >"$TMP/ngx/nginx.conf" <<EOF
$(nginx_head "$TMP/ngx")
	proxy_cache_path $TMP/ngx/cache levels=1:2 keys_zone=llm:16m max_size=1g inactive=1h use_temp_path=off;
	upstream mock { server 127.0.0.1:$MOCK; keepalive 256; keepalive_requests 1000000; }
	server {
		listen 127.0.0.1:$NGX;
$(to_mock)
		}
	}
	server {
		listen 127.0.0.1:$NGXC;
		# \$request_body is only set when the whole body fits this buffer.
$(to_mock)
			proxy_cache llm;
			proxy_cache_methods POST;
			proxy_cache_key "\$request_uri|\$request_body";
			proxy_cache_valid 200 1h;
			proxy_ignore_headers Cache-Control Expires Set-Cookie;
			add_header X-Cache-Status \$upstream_cache_status;
		}
	}
}
EOF
taskset -c 1 nginx -c "$TMP/ngx/nginx.conf" -p "$TMP/ngx" || { log "nginx did not start"; exit 1; }
wait_http "http://127.0.0.1:$NGX/" || { log "nginx not answering"; exit 1; }
NGINX_VERSION=$(nginx -v 2>&1 | cut -d/ -f2)

# --- Breakwater on defaults (no config file; env for the upstream, port,
# data dir and, for the miss path, the cache switch), CPU 1 ----------------
start_bw() { # name bin port cache(true|false)
	BREAKWATER_UPSTREAM_URL="http://127.0.0.1:$MOCK/v1" BREAKWATER_SERVER_LISTEN="127.0.0.1:$3" \
		BREAKWATER_CACHE_DATA_DIR="$TMP/data-$1" BREAKWATER_CACHE_ENABLED="$4" \
		taskset -c 1 "$2" >/dev/null 2>"$TMP/$1.log" &
	PIDS+=($!)
	eval "PID_$1=$!"
	wait_http "http://127.0.0.1:$3/readyz" || { log "$1 did not start"; tail "$TMP/$1.log" >&2; exit 1; }
}
start_bw bwoff "$TMP/bw" $BWOFF false
start_bw bwon "$TMP/bw" $BWON true
if [ -n "$FLOOR" ]; then
	for m in gonethttp:nethttp:$GONET gofasthttp:fasthttp:$GOFAST gonethttpfc:nethttp-fastclient:$GOFC gostored:nethttp-stored:$GOSTORED gopool:nethttp-pool:$GOPOOL; do
		IFS=: read -r name mode port <<<"$m"
		taskset -c 1 "$TMP/floor" "$mode" "127.0.0.1:$port" "127.0.0.1:$MOCK" 2>"$TMP/floor-$mode.log" &
		PIDS+=($!)
		eval "PID_$name=$!"
		wait_http "http://127.0.0.1:$port/" || { log "floor $mode did not start"; exit 1; }
	done
fi
if [ -n "$BEFORE" ]; then
	start_bw oldoff "$TMP/bw-before" $OLDOFF false
	start_bw oldon "$TMP/bw-before" $OLDON true
fi

# --- load -------------------------------------------------------------------
# 316-byte bodies; miss.lua numbers them so every one is new.
cat >"$TMP/miss.lua" <<'EOF'
-- A question of about 16 tokens carrying a counter; the "user" field (which
-- does not change the answer) pads every body to 316 bytes.
-- SEQ (set per cell) keeps questions new across cells and runs.
local n = tonumber(os.getenv("SEQ") or "0")
request = function()
	n = n + 1
	local head = '{"model":"gpt-test","messages":[{"role":"system","content":"You are a helpful assistant. Answer briefly."},{"role":"user","content":"How do I parse JSON file number ' .. n .. ' in Go quickly?"}],"temperature":0,"max_tokens":256,"user":"'
	local body = head .. string.rep("u", 316 - #head - 2) .. '"}'
	return wrk.format("POST", "/v1/chat/completions", {["Content-Type"] = "application/json", ["Authorization"] = "Bearer sk-bench"}, body)
end
EOF
sed -e 's/n = n + 1/n = 0/' "$TMP/miss.lua" >"$TMP/hit.lua"

server_pids() { # name
	case $1 in
	nginx | nginx-cache) cat "$TMP/ngx/nginx.pid"; pgrep -P "$(cat "$TMP/ngx/nginx.pid")" ;;
	mock) echo "" ;;
	*) eval "echo \$PID_$1" ;;
	esac
}
cpu_ticks() { # pids...
	local t=0
	for p in "$@"; do
		[ -r "/proc/$p/stat" ] || continue
		t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat")))
	done
	echo $t
}
to_us() { # wrk duration (e.g. 229.00us, 1.20ms, 2.00s) -> µs
	awk -v v="$1" 'BEGIN { n = v + 0; if (v ~ /us$/) print n; else if (v ~ /ms$/) print n * 1000; else if (v ~ /s$/) print n * 1e6; else print n }'
}
HZ=$(getconf CLK_TCK)
CELLNO=$(( $(date +%s) % 1000 * 100 ))
# cell name port script conns -> sets RPS, CPU_US (per request), P50_US
cell() {
	local name=$1 port=$2 script=$3 c=$4
	local pids
	pids=$(server_pids "$name")
	# warm-up (and, for hits, the first request that fills the cache)
	CELLNO=$((CELLNO + 1))
	export SEQ=$((CELLNO * 1000000))
	taskset -c 0 wrk -t1 -c"$c" -d1s -s "$TMP/$script" "http://127.0.0.1:$port" >/dev/null 2>&1 || true
	local t0 t1 res
	# shellcheck disable=SC2086
	t0=$(cpu_ticks $pids)
	export SEQ=$((SEQ + 500000))
	res=$(taskset -c 0 wrk -t1 -c"$c" -d"$DUR" --latency -s "$TMP/$script" "http://127.0.0.1:$port")
	# shellcheck disable=SC2086
	t1=$(cpu_ticks $pids)
	local reqs
	reqs=$(echo "$res" | awk '/requests in/ {print $1}')
	RPS=$(echo "$res" | awk '/Requests\/sec/ {printf "%.0f", $2}')
	P50_US=$(to_us "$(echo "$res" | awk '$1=="50%" {print $2}')")
	CPU_US=$(awk -v d=$((t1 - t0)) -v hz="$HZ" -v n="$reqs" 'BEGIN { if (n > 0) printf "%.1f", d / hz * 1e6 / n; else print "n/a" }')
	NON2XX=$(echo "$res" | awk '/Non-2xx/ {print $4}')
	if [ -n "$NON2XX" ]; then log "$name c=$c: $NON2XX non-2xx answers"; fi
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'; }

say "## Pinned comparison, $(date -u '+%Y-%m-%d %H:%M UTC')"
say
say "- machine: $(uname -srm), $(nproc) CPUs ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')), shared with other work (load average $(cut -d' ' -f1-3 /proc/loadavg))"
say "- $(go version | cut -d' ' -f3), breakwater at $(cd "$ROOT" && git rev-parse --short HEAD)$(cd "$ROOT" && git diff --quiet 2>/dev/null || echo ' (with uncommitted changes)')${BEFORE:+, before = $BEFORE}; nginx $NGINX_VERSION (Debian nginx-light), 1 worker"
say "- servers under test on CPU 1; wrk (1 thread) and the mock upstream (nginx, fixed 1.4 KB completion) on CPU 0; $DUR per cell after 1 s warm-up; 316-byte requests"
say "- command: \`scripts/pinned.sh -d $DUR -rounds $ROUNDS${BEFORE:+ -before $BEFORE}${FLOOR:+ -floor}\`"
say

MISS=(nginx:$NGX bwoff:$BWOFF)
HIT=(nginx-cache:$NGXC bwon:$BWON)
[ -n "$FLOOR" ] && MISS+=(gonethttp:$GONET gofasthttp:$GOFAST gonethttpfc:$GOFC gopool:$GOPOOL) && HIT+=(gostored:$GOSTORED)
if [ -n "$BEFORE" ]; then
	MISS+=(oldoff:$OLDOFF)
	HIT+=(oldon:$OLDON)
fi
for r in $(seq "$ROUNDS"); do
	log "round $r"
	say "### Round $r"
	say
	say "| path | c | server | req/s | server CPU/request | p50 | vs nginx (CPU) | vs nginx (req/s) |"
	say "|---|---:|---|---:|---:|---:|---:|---:|"
	cell mock $MOCK miss.lua 1
	MOCKP50=$P50_US
	say "| mock alone | 1 | – | $RPS | – | ${MOCKP50} µs | | |"
	for c in 1 16 64; do
		base_cpu= base_rps= base_p50=
		for t in "${MISS[@]}"; do
			name=${t%%:*} port=${t#*:}
			cell "$name" "$port" miss.lua "$c"
			if [ -z "$base_cpu" ]; then base_cpu=$CPU_US base_rps=$RPS base_p50=$P50_US; fi
			extra=
			if [ "$c" = 1 ]; then
				added=$(awk -v a="$P50_US" -v m="$MOCKP50" 'BEGIN { printf "%.0f", a - m }')
				base_added=$(awk -v a="$base_p50" -v m="$MOCKP50" 'BEGIN { printf "%.0f", a - m }')
				extra=" (added $added µs, $(ratio "$added" "$base_added")× nginx's)"
			fi
			say "| miss | $c | $name | $RPS | $CPU_US µs | $P50_US µs$extra | $(ratio "$CPU_US" "$base_cpu")× | $(ratio "$RPS" "$base_rps") |"
		done
	done
	# Semantic misses: cache on, every question new (embed, search, write
	# back); "added" is over the cache-off proxy's p50 in the same round.
	SEM=(bwon:$BWON)
	[ -n "$BEFORE" ] && SEM+=(oldon:$OLDON)
	cell bwoff $BWOFF miss.lua 1
	OFFP50=$P50_US
	for c in 1 16; do
		base_cpu= base_rps=
		for t in "${SEM[@]}"; do
			name=${t%%:*} port=${t#*:}
			cell "$name" "$port" miss.lua "$c"
			if [ -z "$base_cpu" ]; then base_cpu=$CPU_US base_rps=$RPS; fi
			extra=
			[ "$c" = 1 ] && extra=" (added $(awk -v a="$P50_US" -v m="$OFFP50" 'BEGIN { printf "%.0f", a - m }') µs over cache off)"
			say "| semantic miss | $c | $name | $RPS | $CPU_US µs | $P50_US µs$extra | $(ratio "$CPU_US" "$base_cpu")× bwon | $(ratio "$RPS" "$base_rps") bwon |"
		done
	done
	for c in 16 64; do
		base_cpu= base_rps=
		for t in "${HIT[@]}"; do
			name=${t%%:*} port=${t#*:}
			cell "$name" "$port" hit.lua "$c"
			if [ -z "$base_cpu" ]; then base_cpu=$CPU_US base_rps=$RPS; fi
			say "| exact hit | $c | $name | $RPS | $CPU_US µs | $P50_US µs | $(ratio "$CPU_US" "$base_cpu")× | $(ratio "$RPS" "$base_rps") |"
		done
	done
	say
done
# System calls per request on the miss path at c=16: strace -c follows every
# thread of the server for one wrk run; calls (and failed calls, which for
# read are EAGAIN: a read tried before the socket had data) are divided by
# the requests answered.
if [ -n "$SYSCALLS" ]; then
	say "### System calls per request, miss path, c=16 (strace -c -f)"
	say
	say "| server | requests | read/recvfrom | of which EAGAIN | write/writev | epoll | futex | other | total |"
	say "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
	for t in "${MISS[@]}"; do
		name=${t%%:*} port=${t#*:}
		pids=$(server_pids "$name")
		taskset -c 0 wrk -t1 -c16 -d1s -s "$TMP/miss.lua" "http://127.0.0.1:$port" >/dev/null 2>&1 || true
		args=()
		for p in $pids; do args+=(-p "$p"); done
		strace -f -c -o "$TMP/strace-$name.txt" "${args[@]}" 2>/dev/null &
		spid=$!
		sleep 0.5
		reqs=$(taskset -c 0 wrk -t1 -c16 -d2s -s "$TMP/miss.lua" "http://127.0.0.1:$port" | awk '/requests in/ {print $1}')
		sleep 0.2
		kill -INT "$spid" 2>/dev/null || true
		wait "$spid" 2>/dev/null || true
		say "$(awk -v n="$reqs" -v name="$name" '
			$NF ~ /^(read|recvfrom|readv)$/ { rd += $4; if (NF == 6) eagain += $5 }
			$NF ~ /^(write|writev|sendto|sendmsg)$/ { wr += $4 }
			$NF ~ /^epoll/ { ep += $4 }
			$NF == "futex" { fx += $4 }
			$NF ~ /^[a-z_0-9]+$/ && $NF != "total" && $NF != "syscall" && $4 ~ /^[0-9]+$/ { all += $4 }
			END {
				oth = all - rd - wr - ep - fx
				printf "| %s | %d | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f |", name, n, rd / n, eagain / n, wr / n, ep / n, fx / n, oth / n, all / n
			}' "$TMP/strace-$name.txt")"
	done
	say
fi
for _ in 1 2; do
	hdr=$(curl -s -D - -o /dev/null -H 'Content-Type: application/json' -H 'Authorization: Bearer sk-bench' -d '{"model":"gpt-test","messages":[{"role":"user","content":"x"}]}' "http://127.0.0.1:$BWON/v1/chat/completions" | tr -d '\r' | grep -i '^x-breakwater-cache' || true)
done
say "Check: a repeated request to Breakwater (cache on) answers \`${hdr:-no header}\` after the first; its log has $(grep -c '"msg":"request"' "$TMP/bwon.log" || echo 0) request lines at info."
log "done"
