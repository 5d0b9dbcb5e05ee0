# shellcheck shell=bash
# What scripts/bench.sh and scripts/pinned.sh share, sourced once their
# options are read (NAME, the log prefix, and OUT set): a temporary folder
# TMP; the background processes PIDS, stopped on exit with every nginx
# started under TMP; log (stderr) and say (the report: stdout, or OUT);
# wait_http and as_root; ROOT, the repository.
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TMP=$(mktemp -d "/tmp/breakwater-$NAME.XXXXXX")
chmod 755 "$TMP"
PIDS=()
cleanup() {
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	for f in "$TMP"/*/nginx.pid; do [ -f "$f" ] && kill "$(cat "$f")" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$TMP"
}
trap cleanup EXIT
log() { echo "$NAME: $*" >&2; }

exec 3>&1
[ -n "$OUT" ] && exec 3>"$OUT"
say() { echo "$*" >&3; }

wait_http() { # url
	for _ in $(seq 100); do
		curl -s -o /dev/null "$1" && return 0
		sleep 0.1
	done
	return 1
}

as_root() {
	if [ "$(id -u)" = 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo -n "$@"; else return 1; fi
}
