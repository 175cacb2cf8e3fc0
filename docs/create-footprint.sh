#!/usr/bin/env bash
# Usage: docs/create-footprint.sh BIN LABEL
#
# What one keyed create costs the binary BIN on the embedded store: on a fresh data directory,
# 3 s of warm-up, then 10 s of wrk keyed creates (64 connections, cmd/load/wrk_creates.lua, no
# retries). Prints the creates, the bytes the process wrote to disk (/proc/PID/io) and its
# processor time per create over the measured window, and wrk's p99; then, once the server has
# stopped cleanly, what its store holds per create: events in key streams, their bytes (type,
# data, metadata, 16 for the id) and the database file's bytes. Needs wrk and sqlite3
# (Debian's packages). Run builds alternately: the figures move 10% between runs of one binary.
set -euo pipefail
BIN=$1 LABEL=$2
LUA=$(dirname "$0")/../cmd/load/wrk_creates.lua
DIR=$(mktemp -d) PORT=$((20000 + RANDOM % 20000))
"$BIN" serve --addr 127.0.0.1:$PORT --data "$DIR" >/dev/null 2>&1 &
PID=$!
for _ in $(seq 50); do curl -s -o /dev/null localhost:$PORT/healthz && break; sleep 0.1; done
wrk -t 2 -c 64 -d 3s -s "$LUA" http://127.0.0.1:$PORT -- warm$RANDOM 0 >/dev/null
w0=$(awk '/^write_bytes/{print $2}' /proc/$PID/io) c0=$(awk '{print $14+$15}' /proc/$PID/stat)
OUT=$(wrk -t 2 -c 64 -d 10s -s "$LUA" http://127.0.0.1:$PORT -- run$RANDOM 0 | tail -1)
w1=$(awk '/^write_bytes/{print $2}' /proc/$PID/io) c1=$(awk '{print $14+$15}' /proc/$PID/stat)
kill $PID
wait $PID 2>/dev/null || true
python3 - "$LABEL" "$OUT" "$w0" "$w1" "$c0" "$c1" "$(getconf CLK_TCK)" <<'PY'
import json, sys
label, out = sys.argv[1], json.loads(sys.argv[2])
w0, w1, c0, c1, tick = map(int, sys.argv[3:])
n = out["requests"] - out["replays"] - out["conflicts"] - out["bad"]
print(f"{label}: {n / 10:.0f} creates/s, {(w1 - w0) / n:.0f} bytes written and "
      f"{(c1 - c0) / tick * 1e6 / n:.0f} µs of processor per create, p99 {out['p99Us'] / 1000:.1f} ms, {out['bad']} bad")
PY
sqlite3 "$DIR/orders.db" "WITH n AS (SELECT count(*) AS creates FROM streams WHERE name LIKE 'order-%'),
  k AS (SELECT count(*) AS events, sum(length(e.type) + length(e.data) + length(coalesce(e.metadata, '')) + 16) AS bytes
        FROM events e JOIN streams s ON s.id = e.stream_id WHERE s.name LIKE 'idempotency-%')
  SELECT '$LABEL: ' || n.creates || ' creates stored; per create: ' || round(1.0 * k.events / n.creates, 2) || ' key events, '
    || round(1.0 * k.bytes / n.creates) || ' key bytes, ' || round(1.0 * (SELECT page_count * page_size FROM pragma_page_count, pragma_page_size) / n.creates)
    || ' bytes of database file' FROM n, k"
rm -rf "$DIR"
