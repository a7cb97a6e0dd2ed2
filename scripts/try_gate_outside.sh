#!/usr/bin/env bash
# The gate tried as an outside caller would (RELIABILITY.md, "The inline gate"): a private
# Kafka 4.1.1 (scripts/kafka.sh), `streamproc gate serve` publishing, HTTP by curl (good,
# hostile and unauthorised requests), Kafka requests by kcat (zstd, lz4, gzip, snappy;
# headers), requests with no usable reply route, and a kill -9 of the gate mid-stream
# followed by a restart. Prints what a read_committed reader finds: replies per
# correlation id, verdicts per answer, dead letters. Needs curl, jq and kcat; about 90 s.
#
#   scripts/try_gate_outside.sh [WORKDIR]
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
W=${1:-$(mktemp -d)}; mkdir -p $W/msgs
export STREAMPROC_KAFKA_STATE=$W/kafka
BOOT=$(scripts/kafka.sh start 2>$W/kafka.log | head -1); echo "broker $BOOT"
.venv/bin/streamproc gate token --name shop --tenant acme > $W/token.out
TOKEN=$(head -1 $W/token.out); sed -n '2,5p' $W/token.out > $W/tokens.toml
export STREAMPROC_BROKER_URL=kafka://$BOOT STREAMPROC_GATE__PORT=18790 \
  STREAMPROC_GATE__TOKENS_FILE=$W/tokens.toml STREAMPROC_METRICS__PORT=18791 STREAMPROC_APP_ID=try-gate
start_gate() { .venv/bin/streamproc gate serve >>$W/gate.log 2>&1 & echo $! > $W/gate.pid; \
  for i in $(seq 120); do curl -sf localhost:18790/readyz >/dev/null && break; sleep 0.5; done; }
start_gate; echo "gate ready pid $(cat $W/gate.pid)"
mk() { # i -> answer event with fresh ids, now
  jq -c --arg i "$1" --arg now "$(date -u +%Y-%m-%dT%H:%M:%SZ)" \
    '.event_id="gk-e"+$i | .answer_id="gk-a"+$i | .occurred_at=$now' schemas/examples/answer-event.json; }
H=(-H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json')
echo "--- HTTP"
mk h1 > $W/msgs/h1.json
curl -s -o $W/h1.out -w 'good: %{http_code}\n' "${H[@]}" -H 'traceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01' --data @$W/msgs/h1.json localhost:18790/v1/check
jq -c '{decision, verified, reason, trace: .verdict.trace_id, answer_text}' $W/h1.out
curl -s "${H[@]}" -H 'X-Budget-Ms: 1' --data @<(mk h2) localhost:18790/v1/check | jq -c '{decision, verified, reason}'
curl -s -w ' <- no token %{http_code}\n' -H 'Content-Type: application/json' --data @$W/msgs/h1.json localhost:18790/v1/check
curl -s -w ' <- truncated %{http_code}\n' "${H[@]}" --data '{"schema_version": 1, "answer' localhost:18790/v1/check
curl -s -w ' <- other tenant %{http_code}\n' "${H[@]}" --data "$(mk h3 | jq -c '.tenant="globex"')" localhost:18790/v1/check
head -c 2000000 /dev/zero | tr '\0' 'a' > $W/big.bin
curl -s -w ' <- 2 MB %{http_code}\n' "${H[@]}" --data-binary @$W/big.bin localhost:18790/v1/check
curl -s -w ' <- bad budget %{http_code}\n' "${H[@]}" -H 'X-Budget-Ms: NaN' --data @$W/msgs/h1.json localhost:18790/v1/check
echo "--- Kafka by kcat"
send() { # i codec
  mk k$1 | kcat -P -b $BOOT -t groundedness.gate-requests -z $2 -H reply-topic=groundedness.gate-replies \
    -H "authorization=Bearer $TOKEN" -H correlation-id=c$1 -H x-budget-ms=3000 -H traceparent=00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01 -k c$1; }
for i in $(seq 1 15); do send $i zstd; done
# hostile: no reply route; an internal reply topic; a missing one; truncated JSON with a route; a bad budget
mk x1 | kcat -P -b $BOOT -t groundedness.gate-requests -z gzip -H "authorization=Bearer $TOKEN" -H correlation-id=x1
mk x2 | kcat -P -b $BOOT -t groundedness.gate-requests -H "authorization=Bearer $TOKEN" -H reply-topic=__consumer_offsets -H correlation-id=x2
mk x3 | kcat -P -b $BOOT -t groundedness.gate-requests -H "authorization=Bearer $TOKEN" -H reply-topic=no-such-topic -H correlation-id=x3
printf '{"schema_version": 1, "answ' | kcat -P -b $BOOT -t groundedness.gate-requests -z snappy -H "authorization=Bearer $TOKEN" -H reply-topic=groundedness.gate-replies -H correlation-id=x4
mk x5 | kcat -P -b $BOOT -t groundedness.gate-requests -H "authorization=Bearer $TOKEN" -H reply-topic=groundedness.gate-replies -H correlation-id=x5 -H x-budget-ms=-3
sleep 1.5
kill -9 $(cat $W/gate.pid); echo "kill -9 at $(date +%T)"
for i in $(seq 16 30); do send $i lz4; done
start_gate; echo "gate restarted"
sleep 15
echo "--- read back (read_committed)"
kcat -C -b $BOOT -t groundedness.gate-replies -X isolation.level=read_committed -e -q -f '%h\t%s\n' > $W/replies.tsv
kcat -C -b $BOOT -t groundedness.verdicts -X isolation.level=read_committed -e -q -f '%s\n' > $W/verdicts.jsonl
kcat -C -b $BOOT -t groundedness.dead-letter -X isolation.level=read_committed -e -q -f '%s\n' > $W/dead.jsonl
echo "replies: $(wc -l < $W/replies.tsv), unique correlation ids: $(grep -o 'correlation-id=[^,	]*' $W/replies.tsv | sort -u | wc -l)"
grep -o 'correlation-id=[^,	]*' $W/replies.tsv | sort | uniq -d | head
cut -f2 $W/replies.tsv | jq -c '[.decision // .error, .verified, .reason] ' | sort | uniq -c
echo "verdicts: $(wc -l < $W/verdicts.jsonl), unique answers: $(jq -r .answer_id $W/verdicts.jsonl | sort -u | wc -l)"
echo "verdicts in the caller's trace: $(jq -r .trace_id $W/verdicts.jsonl | grep -c 4bf92f3577b34da6a3ce929d0e0e4736)"
echo "dead letters: $(wc -l < $W/dead.jsonl)"; jq -c '[.reason, .error[0:90]]' $W/dead.jsonl
kill $(cat $W/gate.pid); sleep 3
scripts/kafka.sh stop 2>/dev/null
