#!/usr/bin/env bash
# A cluster CA and the certificates Tessera's processes need, made with openssl (EC P-256).
#
#   deploy/tls-certs.sh ca DIR                    DIR/ca.pem and DIR/ca.key (kept if they exist)
#   deploy/tls-certs.sh services DIR [HOST...]    DIR/services.pem/.key: CN tessera-services, for
#                                                 every service, the gateway and their listeners
#   deploy/tls-certs.sh node DIR NAME              DIR/node-NAME.pem/.key: CN node:NAME, the
#                                                 client certificate of the worker of node NAME
#                                                 (a worker that joins with a token gets its own)
#   deploy/tls-certs.sh metrics DIR NAME [HOST...] DIR/metrics-NAME.pem/.key: the server
#                                                 certificate the worker of node NAME serves
#                                                 /metrics with (--metrics-tls-cert)
#
# The services' certificate names localhost, 127.0.0.1 and ::1 plus the HOSTs given (names or
# IPs), and is for both server and client use (mutual TLS). A node's is a client certificate
# only: whoever takes a node cannot pose as a server with it. A node's metrics certificate
# serves only, and names only the node and the HOSTs given, never localhost. Keys are written
# mode 600. To renew a certificate, run the same command again: the processes load the new files
# within seconds.
# The CA key signs every credential of the cluster: keep it off the nodes.
set -euo pipefail

die() { echo "tls-certs: $*" >&2; exit 2; }
[ $# -ge 2 ] || die "usage: tls-certs.sh ca DIR | services DIR [HOST...] | node DIR NAME | metrics DIR NAME [HOST...]"
command -v openssl >/dev/null || die "openssl is missing (apt-get install openssl)"
kind="$1" dir="$2"
shift 2
mkdir -p "$dir"

make_ca() {
  [ -s "$dir/ca.pem" ] && [ -s "$dir/ca.key" ] && return 0
  (umask 077
   openssl req -x509 -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
     -keyout "$dir/ca.key" -out "$dir/ca.pem" -days 3650 -subj "/CN=Tessera cluster CA" \
     -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
     2>/dev/null) || die "openssl could not make the CA in $dir"
  chmod 644 "$dir/ca.pem"
}

# leaf FILE-STEM COMMON-NAME USAGE SAN HOST...: USAGE is the extended key usage (serverAuth,
# clientAuth or both), SAN the names every such certificate carries, HOSTs added to them.
leaf() {
  local stem="$1" cn="$2" usage="$3" san="$4"
  shift 4
  [ -s "$dir/ca.pem" ] && [ -s "$dir/ca.key" ] || die "no CA in $dir: run tls-certs.sh ca $dir first"
  local host
  for host in "$@"; do
    if [[ "$host" =~ ^[0-9.]+$ || "$host" == *:* ]]; then san="$san,IP:$host"; else san="$san,DNS:$host"; fi
  done
  local ext csr
  ext="$(mktemp)" csr="$(mktemp)"
  trap 'rm -f "$ext" "$csr"' RETURN
  printf 'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=%s\nsubjectAltName=%s\n' "$usage" "${san#,}" >"$ext"
  # Written next to the old pair and moved over it, so that a process reloading never reads a
  # half-written file.
  (umask 077
   openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
     -keyout "$dir/.$stem.key.new" -subj "/CN=$cn" -out "$csr" 2>/dev/null &&
   openssl x509 -req -in "$csr" -CA "$dir/ca.pem" -CAkey "$dir/ca.key" -CAcreateserial \
     -days 825 -extfile "$ext" -out "$dir/.$stem.pem.new" 2>/dev/null) ||
    die "openssl could not make the certificate $stem"
  chmod 644 "$dir/.$stem.pem.new"
  mv -f "$dir/.$stem.key.new" "$dir/$stem.key"
  mv -f "$dir/.$stem.pem.new" "$dir/$stem.pem"
}

node_name() {
  [ $# -ge 1 ] || die "$kind needs the node's name"
  [[ "$1" =~ ^[A-Za-z0-9._-]+$ ]] || die "node name \"$1\": letters, digits, '.', '_' and '-' only"
}

case "$kind" in
  ca) make_ca ;;
  services) leaf services tessera-services serverAuth,clientAuth "DNS:localhost,IP:127.0.0.1,IP:::1" "$@" ;;
  node)
    node_name "$@"
    [ $# -eq 1 ] || die "node takes only the node's name: a node's certificate is a client's, for no host"
    leaf "node-$1" "node:$1" clientAuth "DNS:$1"
    ;;
  metrics)
    node_name "$@"
    name="$1"
    shift
    leaf "metrics-$name" "metrics:$name" serverAuth "DNS:$name" "$@"
    ;;
  *) die "unknown kind \"$kind\" (ca, services, node or metrics)" ;;
esac
