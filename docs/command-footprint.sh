#!/usr/bin/env bash
# Usage: docs/command-footprint.sh BIN LABEL
#
# What keyed order lifecycles cost the binary BIN on the embedded store: the load harness's
# lifecycles alone (go run ./cmd/load run --no-baseline --no-creates --duration 10s, 64 clients,
# 10% of commands retried, replays of every command after) on a fresh data directory. Prints
# the commands/s and processor time per command of the measured window and its p99; then, from
# the stopped server's store, per key: events in its stream and their bytes (type, data,
# metadata, 16 for the id), and the bytes the process wrote to disk over the whole run
# (/proc/PID/io, sampled every 0.2 s). Needs sqlite3 (Debian's package). LOAD, if set, is a
# built cmd/load to run instead of go run. Run builds alternately: the figures move 10%
# between runs of one binary.
set -euo pipefail
BIN=$1 LABEL=$2
DIR=$(mktemp -d)
(while true; do
	p=$(pgrep -f -- "serve --addr 127.0.0.1:0 --data $DIR" | head -1 || true)
	[ -n "$p" ] && awk '/^write_bytes/{print $2}' /proc/$p/io >"$DIR.io" 2>/dev/null || true
	sleep 0.2
done) &
SAMPLER=$!
${LOAD:-go run ./cmd/load} run --bin "$BIN" --data "$DIR" --no-baseline --no-creates --duration 10s --json "$DIR.json" >/dev/null
kill $SAMPLER
python3 - "$LABEL" "$DIR.json" "$(cat "$DIR.io")" \
	"$(sqlite3 "$DIR/orders.db" "SELECT count(DISTINCT s.id) || ' ' || count(*) || ' ' || sum(length(e.type) + length(e.data) + length(coalesce(e.metadata, '')) + 16)
	FROM events e JOIN streams s ON s.id = e.stream_id WHERE s.name LIKE 'idempotency-%'")" <<'PY'
import json, sys
label, figures, written, (keys, events, size) = sys.argv[1], json.load(open(sys.argv[2]))["server"], int(sys.argv[3]), map(int, sys.argv[4].split())
c, cpu = figures["commands"], figures["commandsCpu"]
print(f"{label}: {c['commands'] / 10:.0f} commands/s, {cpu['targetPerCommandNs'] / 1000:.0f} µs of processor per command, "
      f"p99 {c['latency']['p99Ns'] / 1e6:.1f} ms; per key: {events / keys:.2f} events of {size / keys:.0f} bytes, {written / keys:.0f} bytes written to disk")
PY
rm -rf "$DIR" "$DIR.io" "$DIR.json"
