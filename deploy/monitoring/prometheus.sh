#!/usr/bin/env bash
# Prometheus for a local cluster of deploy/cluster.sh: scrapes tessera-server and every worker
# (over TLS with the cluster's CA, or plain text with TESSERA_PLAINTEXT=1), evaluates the alerts
# of deploy/monitoring/alerts.yml, and keeps its data in STATE/prometheus.
#
#   deploy/monitoring/prometheus.sh up       start it (or write its configuration again)
#   deploy/monitoring/prometheus.sh config   print the configuration it would use
#   deploy/monitoring/prometheus.sh down     stop it
#
# Ports: TESSERA_PROMETHEUS_PORT (9090); the cluster's as deploy/cluster.sh takes them
# (TESSERA_METRICS_PORT, 9464; each worker's port is in STATE/workers/NODE/metrics_port).
# TESSERA_PROMETHEUS_SCRAPE_INTERVAL (15s) sets how often it scrapes.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT="$PWD"
STATE="${TESSERA_STATE_DIR:-$ROOT/.state}"
METRICS_PORT="${TESSERA_METRICS_PORT:-9464}"
PORT="${TESSERA_PROMETHEUS_PORT:-9090}"
INTERVAL="${TESSERA_PROMETHEUS_SCRAPE_INTERVAL:-15s}"
PLAINTEXT="${TESSERA_PLAINTEXT:-0}"
DIR="$STATE/prometheus"
pid_file="$DIR/prometheus.pid"

die() { echo "prometheus: $*" >&2; exit 2; }
alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

# One job per process: each certificate names its own host (localhost for the services, the node
# name for a worker), and a scrape job checks one name.
job() {  # name, port, host its certificate names
  echo "  - job_name: $1"
  if [ "$PLAINTEXT" != 1 ]; then
    echo "    scheme: https"
    echo "    tls_config: {ca_file: $STATE/tls/ca.pem, server_name: $3}"
  fi
  # Every binary serves /metrics only to holders of the cluster's scrape token.
  echo "    authorization: {credentials_file: $STATE/metrics.token}"
  echo "    static_configs: [{targets: ['127.0.0.1:$2'], labels: {instance: $1}}]"
}

config() {
  [ -d "$STATE" ] || die "no cluster state in $STATE (deploy/cluster.sh up first)"
  [ "$PLAINTEXT" = 1 ] || [ -s "$STATE/tls/ca.pem" ] ||
    die "$STATE/tls/ca.pem is missing (a TLS cluster; TESSERA_PLAINTEXT=1 for a plain one)"
  [ -s "$STATE/metrics.token" ] ||
    die "$STATE/metrics.token is missing (deploy/cluster.sh up makes it: the binaries' scrape token)"
  cat <<YAML
# Written by deploy/monitoring/prometheus.sh for the cluster in $STATE.
global:
  scrape_interval: $INTERVAL
  evaluation_interval: $INTERVAL
rule_files:
  - $ROOT/deploy/monitoring/alerts.yml
scrape_configs:
YAML
  job tessera-server "$METRICS_PORT" localhost
  for w in "$STATE"/workers/*; do
    [ -s "$w/metrics_port" ] || continue
    local name; name="$(basename "$w")"
    job "$name" "$(cat "$w/metrics_port")" "$name"
  done
}

up() {
  command -v prometheus >/dev/null || die "prometheus is not installed (deploy/install-deps.sh)"
  mkdir -p "$DIR/data"
  config >"$DIR/prometheus.yml"
  promtool check config "$DIR/prometheus.yml" >/dev/null || die "bad configuration: $DIR/prometheus.yml"
  if alive "$pid_file"; then
    kill -HUP "$(cat "$pid_file")"  # reload: workers may have been added
    echo "prometheus: configuration reloaded (http://127.0.0.1:$PORT)"
    return
  fi
  nohup prometheus --config.file "$DIR/prometheus.yml" --storage.tsdb.path "$DIR/data" \
    --web.listen-address "127.0.0.1:$PORT" >"$DIR/prometheus.log" 2>&1 &
  echo $! >"$pid_file"
  for _ in $(seq 150); do
    if curl -fsS "http://127.0.0.1:$PORT/-/ready" >/dev/null 2>&1; then
      echo "prometheus: up on http://127.0.0.1:$PORT (alerts: /alerts, targets: /targets)"
      return
    fi
    alive "$pid_file" || { tail -20 "$DIR/prometheus.log" >&2; die "prometheus exited"; }
    sleep 0.1
  done
  die "prometheus did not become ready within 15 s (log: $DIR/prometheus.log)"
}

down() {
  if alive "$pid_file"; then
    kill -TERM "$(cat "$pid_file")"
    for _ in $(seq 100); do alive "$pid_file" || break; sleep 0.1; done
    if alive "$pid_file"; then kill -KILL "$(cat "$pid_file")"; fi
  fi
  rm -f "$pid_file"
  echo "prometheus: stopped"
}

case "${1:-}" in
  up) up ;;
  config) config ;;
  down) down ;;
  *) die "usage: deploy/monitoring/prometheus.sh up | config | down" ;;
esac
