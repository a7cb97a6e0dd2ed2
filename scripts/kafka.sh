#!/usr/bin/env bash
# A throwaway single-node Apache Kafka (KRaft) for tests and local runs, without Docker:
# the broker jars come from Maven Central (deploy/kafka/pom.xml) and run on the local JDK.
#
#   scripts/kafka.sh start    fetch jars (once), start a fresh broker, print 127.0.0.1:PORT
#   scripts/kafka.sh status   print the bootstrap address if running, exit 1 otherwise
#   scripts/kafka.sh stop     stop the broker and remove its state (safe to repeat)
#   scripts/kafka.sh restart  stop the broker (SIGTERM, controlled shutdown) and start it
#                             again on the same ports with the same data; print as start
#   scripts/kafka.sh kill     SIGKILL the broker (a crash), keeping its data for 'restart'
#
# Only the bootstrap address goes to stdout; progress goes to stderr.
# Environment: STREAMPROC_KAFKA_CACHE (jar cache root, default ~/.cache/streamproc),
# STREAMPROC_KAFKA_STATE (state dir, default <repo>/.kafka), PYTHON (with aiokafka, for the
# readiness probe; default <repo>/.venv/bin/python), STREAMPROC_KAFKA_START_TIMEOUT (s, 90),
# STREAMPROC_KAFKA_HEAP (default 512m), JAVA_HOME.
#
# Security mode (for tests; read by 'start' only, 'restart' keeps what start chose):
# STREAMPROC_KAFKA_SECURITY=sasl_ssl adds two listeners next to the PLAINTEXT one (which
# the readiness probe and the broker itself keep using): SASL_SSL and SASL_PLAINTEXT, both
# with the mechanisms PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 and one user,
# STREAMPROC_KAFKA_SASL_USER / STREAMPROC_KAFKA_SASL_PASSWORD (default alice / alice-secret;
# letters, digits, '.', '_', '-'). TLS uses a throwaway CA made with openssl; the broker's
# certificate is for 127.0.0.1 and localhost. start, restart and status then print, after
# the bootstrap line, one 'NAME VALUE' line each (also kept in <state>/listeners):
#   SASL_SSL 127.0.0.1:PORT
#   SASL_PLAINTEXT 127.0.0.1:PORT
#   CA_FILE <state>/tls/ca.pem
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
readonly SECURITY=${STREAMPROC_KAFKA_SECURITY:-plaintext}
readonly SASL_USER=${STREAMPROC_KAFKA_SASL_USER:-alice}
readonly SASL_PASSWORD=${STREAMPROC_KAFKA_SASL_PASSWORD:-alice-secret}

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

# N (default 2) distinct free ports on 127.0.0.1 (all bound at once so they differ).
free_ports() {
    "${PY}" - "${1:-2}" <<'EOF'
import socket
import sys

socks = [socket.socket() for _ in range(int(sys.argv[1]))]
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

# SIGKILL the broker's process group at once, as a crash would; its state stays.
crash_broker() {
    local pid pgid
    pid=$(running_pid) || { log "not running"; return 0; }
    pgid=$(ps -o pgid= -p "${pid}" | tr -d ' ')
    log "killing broker (pid ${pid})"
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
    if [[ "${SECURITY}" == sasl_ssl ]]; then
        write_security_config "$@"
    fi
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

# --- security mode ----------------------------------------------------------------------

check_security_mode() {
    case "${SECURITY}" in
        plaintext) ;;
        sasl_ssl)
            command -v openssl >/dev/null || die "openssl not found (needed for sasl_ssl)"
            [[ "${SASL_USER}" =~ ^[A-Za-z0-9._-]+$ ]] \
                || die "STREAMPROC_KAFKA_SASL_USER: use letters, digits, '.', '_', '-'"
            [[ "${SASL_PASSWORD}" =~ ^[A-Za-z0-9._-]+$ ]] \
                || die "STREAMPROC_KAFKA_SASL_PASSWORD: use letters, digits, '.', '_', '-'"
            ;;
        *) die "STREAMPROC_KAFKA_SECURITY must be plaintext or sasl_ssl, not '${SECURITY}'" ;;
    esac
}

# A throwaway CA (PEM, for clients) and a broker certificate for 127.0.0.1 / localhost
# signed by it, in the PKCS12 keystore the broker reads. EC keys: fast to make.
make_tls() {
    local tls=${STATE}/tls password=$1
    mkdir -p "${tls}"
    local ec=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes)
    {
        openssl req -x509 "${ec[@]}" -days 30 -subj "/CN=streamproc test CA" \
            -keyout "${tls}/ca.key" -out "${tls}/ca.pem" \
            -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign \
            && openssl req -new "${ec[@]}" -subj "/CN=localhost" \
                -keyout "${tls}/broker.key" -out "${tls}/broker.csr" \
            && printf '%s\n' basicConstraints=CA:FALSE keyUsage=digitalSignature \
                extendedKeyUsage=serverAuth subjectAltName=IP:127.0.0.1,DNS:localhost \
                subjectKeyIdentifier=hash authorityKeyIdentifier=keyid >"${tls}/broker.ext" \
            && openssl x509 -req -in "${tls}/broker.csr" -CA "${tls}/ca.pem" \
                -CAkey "${tls}/ca.key" -set_serial 2 -days 30 -extfile "${tls}/broker.ext" \
                -out "${tls}/broker.pem" \
            && openssl pkcs12 -export -in "${tls}/broker.pem" -inkey "${tls}/broker.key" \
                -certfile "${tls}/ca.pem" -name broker -out "${tls}/broker.p12" \
                -passout "pass:${password}"
    } >>"${STATE}/logs/tls.log" 2>&1 || { tail -n 20 "${STATE}/logs/tls.log" >&2; die "openssl failed"; }
}

# The SASL listeners, appended to server.properties. PLAIN users live in the JAAS line;
# SCRAM users live in the cluster metadata (added when the storage is formatted).
write_security_config() {
    local port=$1 cport=$2 sasl_ssl_port=$3 sasl_plain_port=$4 password
    password=$(openssl rand -hex 16)
    make_tls "${password}"
    local plain="org.apache.kafka.common.security.plain.PlainLoginModule required user_${SASL_USER}=\"${SASL_PASSWORD}\";"
    local scram="org.apache.kafka.common.security.scram.ScramLoginModule required;"
    local listeners="PLAINTEXT://127.0.0.1:${port},SASL_SSL://127.0.0.1:${sasl_ssl_port},SASL_PLAINTEXT://127.0.0.1:${sasl_plain_port}"
    cat >>"${STATE}/server.properties" <<EOF
# Security mode (STREAMPROC_KAFKA_SECURITY=sasl_ssl); later keys override the ones above.
listeners=${listeners},CONTROLLER://127.0.0.1:${cport}
advertised.listeners=${listeners}
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SASL_SSL:SASL_SSL,SASL_PLAINTEXT:SASL_PLAINTEXT
sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512
ssl.keystore.type=PKCS12
ssl.keystore.location=${STATE}/tls/broker.p12
ssl.keystore.password=${password}
EOF
    local name mech
    for name in sasl_ssl sasl_plaintext; do
        printf 'listener.name.%s.plain.sasl.jaas.config=%s\n' "${name}" "${plain}"
        for mech in scram-sha-256 scram-sha-512; do
            printf 'listener.name.%s.%s.sasl.jaas.config=%s\n' "${name}" "${mech}" "${scram}"
        done
    done >>"${STATE}/server.properties"
    printf 'SASL_SSL 127.0.0.1:%s\nSASL_PLAINTEXT 127.0.0.1:%s\nCA_FILE %s\n' \
        "${sasl_ssl_port}" "${sasl_plain_port}" "${STATE}/tls/ca.pem" >"${STATE}/listeners.new"
}

# The addresses start, restart and status print: the bootstrap line, then any extras.
print_addresses() {
    cat "${STATE}/bootstrap"
    if [[ -f "${STATE}/listeners" ]]; then
        cat "${STATE}/listeners"
    fi
}

# --- subcommands ------------------------------------------------------------------------

jvm_flags() {
    printf '%s\n' "-Dlog4j2.configurationFile=${STATE}/log4j2.properties" -Djava.awt.headless=true
}

# One attempt on fresh ports; returns 2 when the JVM died early (e.g. a port got taken).
start_once() {
    local ports port cport sasl_ssl_port="" sasl_plain_port="" cluster_id
    remove_state
    mkdir -p "${STATE}/logs"
    : >"${STATE_MARKER}"
    if [[ "${SECURITY}" == sasl_ssl ]]; then
        ports=$(free_ports 4)
    else
        ports=$(free_ports)
    fi
    read -r port cport sasl_ssl_port sasl_plain_port <<<"${ports}"
    write_config "${port}" "${cport}" "${sasl_ssl_port}" "${sasl_plain_port}"
    # A random Kafka cluster id (url-safe base64 of 16 bytes). One starting with "-" reads
    # as an option to kafka-storage ("--cluster-id: expected one argument", one start in
    # 64 failed in CI), so such ids are drawn again, as Kafka's own Uuid.randomUuid does.
    cluster_id=$("${PY}" -c 'import base64, uuid
while (cid := base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")).startswith("-"):
    pass
print(cid)')
    local jvm_opts scram=()
    mapfile -t jvm_opts < <(jvm_flags)
    if [[ "${SECURITY}" == sasl_ssl ]]; then
        scram=(--add-scram "SCRAM-SHA-256=[name=${SASL_USER},password=${SASL_PASSWORD}]"
            --add-scram "SCRAM-SHA-512=[name=${SASL_USER},password=${SASL_PASSWORD}]")
    fi
    "${JAVA}" "${jvm_opts[@]}" -cp "${LIBS}/*" kafka.tools.StorageTool format \
        -t "${cluster_id}" -c "${STATE}/server.properties" "${scram[@]}" \
        >>"${STATE}/logs/format.log" 2>&1 \
        || { tail -n 30 "${STATE}/logs/format.log" >&2; die "storage format failed"; }

    log "starting broker on 127.0.0.1:${port} (controller ${cport}), state ${STATE}"
    launch "${port}" || return $?
    printf '127.0.0.1:%s\n' "${port}" >"${STATE}/bootstrap"
    if [[ -f "${STATE}/listeners.new" ]]; then
        mv "${STATE}/listeners.new" "${STATE}/listeners"
    fi
    print_addresses
}

# The PLAINTEXT port start chose (the readiness probe's), from the bootstrap file.
configured_port() {
    sed -n 's|^127\.0\.0\.1:\([0-9][0-9]*\)$|\1|p' "${STATE}/bootstrap"
}

# Run the broker configured in the state dir and wait until it answers on ${port};
# returns 2 when the JVM died early (e.g. a port got taken), 1 when it never answered.
launch() {
    local port=$1 pid waited jvm_opts
    mapfile -t jvm_opts < <(jvm_flags)
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
    log "broker ready after $((SECONDS - start)) s"
}

cmd_start() {
    if running_pid >/dev/null && [[ -f "${STATE}/bootstrap" ]]; then
        log "already running"
        print_addresses
        return 0
    fi
    kill_broker
    check_security_mode
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
        print_addresses
        return 0
    fi
    log "not running"
    return 1
}

# Same ports, same data: only the process is new. No retry on other ports, since keeping
# the address is the point; a port taken meanwhile is an error.
cmd_restart() {
    [[ -f "${STATE_MARKER}" && -f "${STATE}/server.properties" && -f "${STATE}/bootstrap" ]] \
        || die "no broker state in ${STATE} to restart ('start' makes one)"
    kill_broker
    local port rc=0
    port=$(configured_port)
    [[ -n "${port}" ]] || die "cannot read the broker port from ${STATE}/bootstrap"
    log "restarting broker on 127.0.0.1:${port}, state ${STATE}"
    launch "${port}" || rc=$?
    ((rc == 0)) || die "Kafka did not restart (logs in ${STATE}/logs)"
    print_addresses
}

case "${1:-}" in
    start) cmd_start ;;
    stop) cmd_stop ;;
    status) cmd_status ;;
    restart) cmd_restart ;;
    kill) crash_broker ;;
    *)
        echo "usage: $0 {start|stop|status|restart|kill}" >&2
        exit 2
        ;;
esac
