#!/usr/bin/env bash
# A throwaway single-node Apache Kafka (KRaft) for tests and local runs, without Docker:
# the broker jars come from Maven Central (deploy/kafka/pom.xml) and run on the local JDK.
#
#   scripts/kafka.sh start    fetch jars (once), start a fresh broker, print 127.0.0.1:PORT
#   scripts/kafka.sh status   print the bootstrap address if running, exit 1 otherwise
#   scripts/kafka.sh stop     stop the broker and remove its state (safe to repeat)
#
# Only the bootstrap address goes to stdout; progress goes to stderr.
# Environment: STREAMPROC_KAFKA_CACHE (jar cache root, default ~/.cache/streamproc),
# STREAMPROC_KAFKA_STATE (state dir, default <repo>/.kafka), PYTHON (with aiokafka, for the
# readiness probe; default <repo>/.venv/bin/python), STREAMPROC_KAFKA_START_TIMEOUT (s, 90),
# STREAMPROC_KAFKA_HEAP (default 512m), JAVA_HOME.
set -euo pipefail

readonly KAFKA_VERSION=4.1.1
readonly SCALA_VERSION=2.13
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
readonly REPO
readonly CACHE=${STREAMPROC_KAFKA_CACHE:-${HOME}/.cache/streamproc}
readonly LIBS=${CACHE}/kafka_${SCALA_VERSION}-${KAFKA_VERSION}/libs
readonly LIBS_MARKER=${LIBS}/.complete
readonly STATE=${STREAMPROC_KAFKA_STATE:-${REPO}/.kafka}
readonly STATE_MARKER=${STATE}/.streamproc-kafka
readonly START_TIMEOUT=${STREAMPROC_KAFKA_START_TIMEOUT:-90}
readonly HEAP=${STREAMPROC_KAFKA_HEAP:-512m}
readonly START_ATTEMPTS=3

if [[ -n "${JAVA_HOME:-}" && -x "${JAVA_HOME}/bin/java" ]]; then
    JAVA=${JAVA_HOME}/bin/java
else
    JAVA=java
fi
if [[ -n "${PYTHON:-}" ]]; then
    PY=${PYTHON}
elif [[ -x "${REPO}/.venv/bin/python" ]]; then
    PY=${REPO}/.venv/bin/python
else
    PY=python3
fi

log() { printf 'kafka.sh: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

# --- jars -------------------------------------------------------------------------------

# Resolve the broker's runtime jars once; the marker is written last, so an interrupted
# download is detected and redone. flock keeps parallel clones from racing on the cache.
ensure_jars() {
    [[ -f "${LIBS_MARKER}" ]] && return 0
    command -v mvn >/dev/null || die "mvn not found (needed once to fetch the Kafka jars)"
    mkdir -p "${CACHE}"
    (
        flock 9
        [[ -f "${LIBS_MARKER}" ]] && exit 0
        log "fetching Kafka ${KAFKA_VERSION} jars into ${LIBS} (one time)"
        local tmp="${LIBS}.partial.$$"
        rm -rf "${LIBS}" "${tmp}"
        local mvn_log="${CACHE}/kafka-jars-mvn.log"
        if ! mvn -q -B -f "${REPO}/deploy/kafka/pom.xml" dependency:copy-dependencies \
            -DoutputDirectory="${tmp}" -DincludeScope=runtime >"${mvn_log}" 2>&1; then
            tail -n 40 "${mvn_log}" >&2
            rm -rf "${tmp}"
            die "maven could not resolve the Kafka jars"
        fi
        compgen -G "${tmp}/kafka_${SCALA_VERSION}-${KAFKA_VERSION}.jar" >/dev/null \
            || { rm -rf "${tmp}"; die "kafka jar missing after maven run"; }
        mv "${tmp}" "${LIBS}"
        date -u +%FT%TZ >"${LIBS_MARKER}"
    ) 9>"${CACHE}/.kafka-jars.lock"
}

# --- process helpers --------------------------------------------------------------------

# The pid in the pid file, if that process is alive and still our broker (pids get reused).
running_pid() {
    local pid
    [[ -f "${STATE}/kafka.pid" ]] || return 1
    pid=$(<"${STATE}/kafka.pid")
    [[ "${pid}" =~ ^[0-9]+$ ]] || return 1
    kill -0 "${pid}" 2>/dev/null || return 1
    tr '\0' ' ' <"/proc/${pid}/cmdline" 2>/dev/null | grep -q 'kafka\.Kafka' || return 1
    printf '%s\n' "${pid}"
}

# Two distinct free ports on 127.0.0.1 (both bound at once so they differ).
free_ports() {
    "${PY}" - <<'EOF'
import socket

socks = [socket.socket() for _ in range(2)]
for s in socks:
    s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in socks))
for s in socks:
    s.close()
EOF
}

# One metadata round trip: the broker answers only once it serves requests.
probe() {
    "${PY}" - "$1" <<'EOF' >/dev/null 2>&1
import asyncio
import sys

from aiokafka.admin import AIOKafkaAdminClient


async def main(bootstrap: str) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=5000)
    await admin.start()
    try:
        await admin.list_topics()
    finally:
        await admin.close()


asyncio.run(asyncio.wait_for(main(sys.argv[1]), 10))
EOF
}

# Kill the broker's process group: TERM (controlled shutdown), then KILL after a grace period.
kill_broker() {
    local pid pgid
    pid=$(running_pid) || return 0
    pgid=$(ps -o pgid= -p "${pid}" | tr -d ' ')
    log "stopping broker (pid ${pid})"
    kill -TERM -- "-${pgid}" 2>/dev/null || kill -TERM "${pid}" 2>/dev/null || true
    for _ in $(seq 1 150); do
        kill -0 "${pid}" 2>/dev/null || return 0
        sleep 0.2
    done
    log "broker did not stop in 30 s; killing it"
    kill -KILL -- "-${pgid}" 2>/dev/null || kill -KILL "${pid}" 2>/dev/null || true
    for _ in $(seq 1 50); do
        kill -0 "${pid}" 2>/dev/null || return 0
        sleep 0.1
    done
    die "could not kill broker pid ${pid}"
}

# Remove the state dir, but only one this script created (never a mistyped path).
remove_state() {
    [[ -d "${STATE}" ]] || return 0
    if [[ -f "${STATE_MARKER}" ]] || [[ -z "$(ls -A "${STATE}")" ]]; then
        rm -rf "${STATE}"
    else
        die "${STATE} exists but was not made by kafka.sh; not removing it"
    fi
}

# --- configuration ----------------------------------------------------------------------

write_config() {
    local port=$1 cport=$2
    cat >"${STATE}/server.properties" <<EOF
# Written by scripts/kafka.sh: single-node KRaft broker+controller for tests.
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:${cport}
listeners=PLAINTEXT://127.0.0.1:${port},CONTROLLER://127.0.0.1:${cport}
advertised.listeners=PLAINTEXT://127.0.0.1:${port}
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
log.dirs=${STATE}/data
num.partitions=1
auto.create.topics.enable=false
group.initial.rebalance.delay.ms=0
offsets.topic.replication.factor=1
offsets.topic.num.partitions=10
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=10
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
EOF
    cat >"${STATE}/log4j2.properties" <<EOF
# Broker logs go to a file, never to the terminal running the tests.
status = warn
appender.file.type = File
appender.file.name = file
appender.file.fileName = ${STATE}/logs/server.log
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = file
logger.request.name = kafka.request.logger
logger.request.level = WARN
logger.statechange.name = state.change.logger
logger.statechange.level = WARN
EOF
}

# --- subcommands ------------------------------------------------------------------------

# One attempt on fresh ports; returns 2 when the JVM died early (e.g. a port got taken).
start_once() {
    local ports port cport cluster_id pid waited
    remove_state
    mkdir -p "${STATE}/logs"
    : >"${STATE_MARKER}"
    ports=$(free_ports)
    read -r port cport <<<"${ports}"
    write_config "${port}" "${cport}"
    cluster_id=$("${PY}" -c \
        'import base64,uuid;print(base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("="))')
    local jvm_opts=("-Dlog4j2.configurationFile=${STATE}/log4j2.properties" -Djava.awt.headless=true)
    "${JAVA}" "${jvm_opts[@]}" -cp "${LIBS}/*" kafka.tools.StorageTool format \
        -t "${cluster_id}" -c "${STATE}/server.properties" >>"${STATE}/logs/format.log" 2>&1 \
        || { tail -n 30 "${STATE}/logs/format.log" >&2; die "storage format failed"; }

    log "starting broker on 127.0.0.1:${port} (controller ${cport}), state ${STATE}"
    setsid "${JAVA}" "-Xmx${HEAP}" "${jvm_opts[@]}" -cp "${LIBS}/*" \
        kafka.Kafka "${STATE}/server.properties" \
        </dev/null >>"${STATE}/logs/stdout.log" 2>&1 &
    pid=$!
    printf '%s\n' "${pid}" >"${STATE}/kafka.pid"

    local start=${SECONDS}
    while true; do
        waited=$((SECONDS - start))
        if ! kill -0 "${pid}" 2>/dev/null; then
            log "broker exited during start-up; last log lines:"
            tail -n 30 "${STATE}/logs/server.log" "${STATE}/logs/stdout.log" >&2 2>/dev/null || true
            return 2
        fi
        if probe "127.0.0.1:${port}"; then
            break
        fi
        if ((waited >= START_TIMEOUT)); then
            log "broker not answering after ${START_TIMEOUT} s; last log lines:"
            tail -n 40 "${STATE}/logs/server.log" "${STATE}/logs/stdout.log" >&2 2>/dev/null || true
            kill_broker
            return 1
        fi
        sleep 0.5
    done
    printf '127.0.0.1:%s\n' "${port}" >"${STATE}/bootstrap"
    log "broker ready after $((SECONDS - start)) s"
    printf '127.0.0.1:%s\n' "${port}"
}

cmd_start() {
    if running_pid >/dev/null && [[ -f "${STATE}/bootstrap" ]]; then
        log "already running"
        cat "${STATE}/bootstrap"
        return 0
    fi
    kill_broker
    command -v "${JAVA}" >/dev/null || die "java not found (JDK 17+ needed)"
    "${PY}" -c 'import aiokafka' 2>/dev/null \
        || die "${PY} cannot import aiokafka (set PYTHON to an interpreter that can)"
    ensure_jars
    local attempt rc
    for attempt in $(seq 1 "${START_ATTEMPTS}"); do
        rc=0
        start_once || rc=$?
        [[ ${rc} -eq 0 ]] && return 0
        [[ ${rc} -eq 2 && ${attempt} -lt ${START_ATTEMPTS} ]] || break
        log "retrying on new ports (attempt $((attempt + 1)) of ${START_ATTEMPTS})"
    done
    die "Kafka did not start (logs kept in ${STATE}/logs; 'scripts/kafka.sh stop' removes them)"
}

cmd_stop() {
    kill_broker
    remove_state
}

cmd_status() {
    if running_pid >/dev/null && [[ -f "${STATE}/bootstrap" ]]; then
        cat "${STATE}/bootstrap"
        return 0
    fi
    log "not running"
    return 1
}

case "${1:-}" in
    start) cmd_start ;;
    stop) cmd_stop ;;
    status) cmd_status ;;
    *)
        echo "usage: $0 {start|stop|status}" >&2
        exit 2
        ;;
esac
