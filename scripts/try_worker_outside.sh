#!/usr/bin/env bash
# The worker tried as an outside producer would (RELIABILITY.md, "Checks with outside
# clients"): a private Kafka 4.1.1 (scripts/kafka.sh), `streamproc worker` (default judge,
# 3 partitions); kcat sends 30 answers as a zstd batch with a traceparent header, a gzip
# batch of two hostile events, then 600 answers as one lz4 batch; the worker is killed
# (kill -9) 1 s later and a replacement started. Prints what a read_committed reader
# finds: verdicts per answer, those in the producer's trace, dead letters. Needs jq and
# kcat; about two minutes.
#
#   scripts/try_worker_outside.sh [WORKDIR]
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
W=${1:-$(mktemp -d)}; mkdir -p $W
export STREAMPROC_KAFKA_STATE=$W/kafka
BOOT=$(scripts/kafka.sh start 2>$W/kafka.log | head -1); echo "broker $BOOT"
export STREAMPROC_BROKER_URL=kafka://$BOOT STREAMPROC_APP_ID=wk STREAMPROC_TOPICS__PARTITIONS=3
.venv/bin/python - <<'PY'
import asyncio
from streamproc.config import Settings
from streamproc.kafka.topics import prepare_topics
asyncio.run(prepare_topics(Settings()))
PY
mk() { jq -c --arg i "$1" --arg now "$(date -u +%Y-%m-%dT%H:%M:%SZ)" \
  '.event_id="wk-e"+$i | .answer_id="wk-a"+$i | .conversation_id="conv-"+$i | .occurred_at=$now' schemas/examples/answer-event.json; }
for i in $(seq 1 30); do mk $i; done > $W/first.jsonl
for i in $(seq 31 630); do mk $i; done > $W/second.jsonl
.venv/bin/streamproc worker > $W/worker1.log 2>&1 & echo $! > $W/w1.pid
for i in $(seq 120); do grep -q judge_loop_started $W/worker1.log && break; sleep 0.5; done
kcat -P -b $BOOT -t assistant.answers -z zstd -H traceparent=00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01 -l $W/first.jsonl
{ printf '{"schema_version": 1, "answer_id": "trunc\n'; printf '{"schema_version":1,"event_id":"x\\ud800","answer_id":"a","evidence":%s}\n' "$(printf '[%.0s' $(seq 3000))"; } > $W/hostile.txt
kcat -P -b $BOOT -t assistant.answers -z gzip -l $W/hostile.txt
kcat -P -b $BOOT -t assistant.answers -z lz4 -l $W/second.jsonl
sleep 1
kill -9 $(cat $W/w1.pid); echo "kill -9 worker 1; verdicts it logged: $(grep -c '"event": "verdict"' $W/worker1.log)"
.venv/bin/streamproc worker > $W/worker2.log 2>&1 & echo $! > $W/w2.pid
for i in $(seq 180); do n=$(kcat -C -b $BOOT -t groundedness.verdicts -X isolation.level=read_committed -e -q -f '%s\n' 2>/dev/null | wc -l); [ "$n" -ge 630 ] && break; sleep 1; done
sleep 5
kcat -C -b $BOOT -t groundedness.verdicts -X isolation.level=read_committed -e -q -f '%s\n' > $W/verdicts.jsonl
kcat -C -b $BOOT -t groundedness.dead-letter -X isolation.level=read_committed -e -q -f '%s\n' > $W/dead.jsonl
echo "verdicts: $(wc -l < $W/verdicts.jsonl), unique answers: $(jq -r .answer_id $W/verdicts.jsonl | sort -u | wc -l), in the producer's trace: $(jq -r .trace_id $W/verdicts.jsonl | grep -c 4bf92f3577b34da6a3ce929d0e0e4736)"
echo "dead letters: $(wc -l < $W/dead.jsonl)"; jq -c '[.reason, (.error|.[0:80])]' $W/dead.jsonl
echo "worker 2 logged verdicts: $(grep -c '"event": "verdict"' $W/worker2.log)"
kill $(cat $W/w2.pid); sleep 5; scripts/kafka.sh stop 2>/dev/null
