#!/usr/bin/env bash
# Run the test suite from a fresh clone: make .venv (Python 3.11) if missing, install the
# package with its dev extras, then run pytest - unit and integration tests alike (the
# integration fixtures start Kafka and Tansu themselves), installing kcat first where it
# can. Arguments go to pytest.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=scripts/venv.sh
source scripts/venv.sh

# kcat (librdkafka) is the outside producer of tests/integration/test_outside_producers.py.
# Installed here only where we may (root with apt-get, as on the CI machine); otherwise
# that test skips, or fails when CI is set.
if ! command -v kcat >/dev/null; then
    if [[ ${EUID} -eq 0 ]] && command -v apt-get >/dev/null; then
        log "installing kcat with apt-get"
        { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq kcat; } \
            >/dev/null || log "could not install kcat: the outside-producer tests will not pass"
    else
        log "kcat not found (apt-get install kcat): the outside-producer tests will skip"
    fi
fi

# promtool (Debian's prometheus) and amtool (prometheus-alertmanager) check the Prometheus
# rules and their unit tests, the dashboard's PromQL and the Alertmanager route. Installed
# only where we may; otherwise those tests skip, or fail when CI is set.
if ! command -v promtool >/dev/null || ! command -v amtool >/dev/null; then
    if [[ ${EUID} -eq 0 ]] && command -v apt-get >/dev/null; then
        log "installing promtool and amtool with apt-get"
        { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
            --no-install-recommends prometheus prometheus-alertmanager; } \
            >/dev/null || log "could not install promtool/amtool: the Prometheus rule tests will not pass"
    else
        log "promtool/amtool not found (apt-get install prometheus prometheus-alertmanager): those tests will skip"
    fi
fi

# Debian's chromium and chromium-driver are the browser of tests/integration/test_review_page.py
# (Selenium drives them; nothing downloads a browser). Installed only where we may;
# otherwise that test skips, or fails when CI is set.
if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then
    if [[ ${EUID} -eq 0 ]] && command -v apt-get >/dev/null; then
        log "installing chromium and chromium-driver with apt-get"
        { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
            chromium chromium-driver; } \
            >/dev/null || log "could not install chromium: the review page's browser test will not pass"
    else
        log "chromium not found (apt-get install chromium chromium-driver): the review page's browser test will skip"
    fi
fi

rc=0
.venv/bin/python -m pytest "$@" || rc=$?
if [[ ${rc} -eq 5 ]]; then
    log "pytest collected no tests: treating that as a failure"
fi
exit "${rc}"
