#!/usr/bin/env bash
# deploy/monitoring as an operator uses it: the alert rules pass their promtool tests; a local
# cluster (deploy/cluster.sh, over TLS) is scraped by a real Prometheus
# (deploy/monitoring/prometheus.sh); a job runs; Prometheus' HTTP API then has the series an
# operator watches; every metric the dashboard and the alerts name is one the binaries export.
set -euo pipefail
source "$(dirname "$0")/script_env.sh"
MON="$ROOT/deploy/monitoring"
export TESSERA_PROMETHEUS_PORT="$(free_port)" TESSERA_PROMETHEUS_SCRAPE_INTERVAL=1s

# The rules and their tests, the dashboard's JSON.
promtool check rules "$MON/alerts.yml" >/dev/null || fail "promtool check rules"
(cd "$MON" && promtool test rules alerts_test.yml) || fail "promtool test rules"
python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); assert d["panels"]' \
  "$MON/grafana-dashboard.json" || fail "the dashboard is not JSON with panels"

"$ROOT/deploy/cluster.sh" up --workers 2 --gpus-per-worker 2 >"$state/up.log" 2>&1 ||
  { cat "$state/up.log"; fail "cluster.sh up"; }
"$MON/prometheus.sh" up >"$state/prometheus-up.log" 2>&1 ||
  { cat "$state/prometheus-up.log"; fail "prometheus.sh up"; }
promtool check config "$state/prometheus/prometheus.yml" >/dev/null || fail "generated config"

# Every metric the dashboard and the alerts name is exported (# TYPE lines name every family,
# series or not; a histogram's series add _bucket, _sum and _count).
exported="$state/exported.txt"
scrape() {  # port, host its certificate names
  curl -fsS --cacert "$state/tls/ca.pem" --resolve "$2:$1:127.0.0.1" \
    -H "Authorization: Bearer $(cat "$state/metrics.token")" "https://$2:$1/metrics"
}
# Without the token, /metrics answers 401 and none of its series.
code="$(curl -sS -o "$state/refused.txt" -w '%{http_code}' --cacert "$state/tls/ca.pem" \
          --resolve "localhost:$TESSERA_METRICS_PORT:127.0.0.1" \
          "https://localhost:$TESSERA_METRICS_PORT/metrics")"
[ "$code" = 401 ] || fail "/metrics without the scrape token answered $code"
if grep -q tessera_ "$state/refused.txt"; then fail "/metrics without the token showed series"; fi
{
  scrape "$TESSERA_METRICS_PORT" localhost
  for w in "$state"/workers/*; do scrape "$(cat "$w/metrics_port")" "$(basename "$w")"; done
} | awk '$1 == "#" && $2 == "TYPE" {
           print $3
           if ($4 == "histogram") { print $3 "_bucket"; print $3 "_sum"; print $3 "_count" }
         }' | sort -u >"$exported"
named="$(grep -ho 'tessera_[a-z_]*' "$MON/grafana-dashboard.json" "$MON/alerts.yml" | sort -u)"
[ "$(echo "$named" | wc -l)" -ge 20 ] || fail "too few metrics named: $named"
for m in $named; do
  grep -qx "$m" "$exported" || fail "$m is named by deploy/monitoring but no binary exports it"
done

out="$("$BIN/mcli" run -f "$ROOT/deploy/samples/hello.yaml" --follow 2>&1)" ||
  { echo "$out"; fail "the sample run did not complete"; }

# Prometheus has the series (scraped every second; give it a few).
query() {  # PromQL; prints the API's JSON
  curl -fsS "http://127.0.0.1:$TESSERA_PROMETHEUS_PORT/api/v1/query" --data-urlencode "query=$1"
}
has_series() {  # PromQL: true once the result is not empty
  for _ in $(seq 100); do
    if query "$1" | grep -q '"result":\[{'; then return 0; fi
    sleep 0.2
  done
  return 1
}
for q in 'up{job="tessera-server"} == 1' 'up{job="node-0"} == 1' 'up{job="node-1"} == 1' \
         'tessera_runs_ended_total{status="COMPLETED"} >= 1' \
         'tessera_scheduler_placements_total >= 1' 'tessera_queue_wait_seconds_count >= 1' \
         'tessera_gpus{state="free"}' 'tessera_nodes_by_state{state="ready"} == 2' \
         'tessera_node_lease_expiries_total' 'tessera_logs_lines_ingested_total >= 1' \
         'tessera_worker_running_ranks' 'tessera_worker_log_backlog_bytes' \
         'tessera_grpc_server_handled_total{grpc_method="SubmitRun"} >= 1'; do
  has_series "$q" || fail "Prometheus has no series for: $q ($(query "$q"))"
done
# The alerts are loaded, and none fires on a healthy cluster.
rules="$(curl -fsS "http://127.0.0.1:$TESSERA_PROMETHEUS_PORT/api/v1/rules")"
for a in TesseraNodeLost TesseraRunPendingOverAnHour TesseraRecoveryLoop \
         TesseraSweepCondemnedSeveralNodes TesseraLogBacklogGrowing; do
  echo "$rules" | grep -q "\"name\":\"$a\"" || fail "alert $a is not loaded"
done
alerts="$(curl -fsS "http://127.0.0.1:$TESSERA_PROMETHEUS_PORT/api/v1/alerts")"
echo "$alerts" | grep -q '"alerts":\[\]' || fail "alerts on a healthy cluster: $alerts"

prometheus_pid="$(cat "$state/prometheus/prometheus.pid")"
"$ROOT/deploy/cluster.sh" down >/dev/null
if kill -0 "$prometheus_pid" 2>/dev/null; then fail "prometheus still runs after cluster.sh down"; fi
echo "monitoring_test: ok"
