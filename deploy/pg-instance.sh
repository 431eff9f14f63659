#!/usr/bin/env bash
# Manages a private PostgreSQL instance in a folder of its own, for the quick start, the local
# cluster and the test harness. PostgreSQL refuses to run as root, so as root the server runs as
# the `postgres` user on a data folder that user owns.
#
#   deploy/pg-instance.sh start DIR [PORT] [--ephemeral] [--password-auth]
#       initdb on first use, start on 127.0.0.1:PORT (a free port when omitted), create the
#       database "tessera", print its URL. --ephemeral trades durability for speed (tests only).
#       --password-auth (chosen at initdb, kept after): every connection needs a password
#       (SCRAM); the superuser is tessera_admin, whose password only this script uses
#       (DIR/admin.pgpass), and the services connect as "tessera", which owns the database and
#       nothing else (no superuser, no roles, no databases, no replication). The URL names its
#       password file (DIR/tessera.pgpass, mode 600), so no password is on a command line.
#       Without it, anyone on this machine may connect as the superuser: the test harness's way.
#   deploy/pg-instance.sh standby DIR PRIMARY_PORT [PORT]
#       a streaming standby of the instance on 127.0.0.1:PRIMARY_PORT (pg_basebackup on first
#       use), started on 127.0.0.1:PORT; it serves reads until promoted (instances without
#       --password-auth only)
#   deploy/pg-instance.sh promote DIR    make a standby the primary
#   deploy/pg-instance.sh sync DIR on|off
#       on: a commit on this primary waits until a standby has it (synchronous replication)
#   deploy/pg-instance.sh stop DIR [fast|immediate]
#   deploy/pg-instance.sh url DIR        the URL of a running instance
#   deploy/pg-instance.sh status DIR     exit 0 when it runs
#   deploy/pg-instance.sh destroy DIR    stop it and remove its data
set -euo pipefail

die() { echo "pg-instance: $*" >&2; exit 1; }

PGBIN=""
for candidate in /usr/lib/postgresql/*/bin; do
  [ -x "$candidate/initdb" ] && PGBIN="$candidate"
done
[ -n "$PGBIN" ] || die "PostgreSQL server binaries not found under /usr/lib/postgresql (run deploy/install-deps.sh)"

as_server_user() {
  if [ "$(id -u)" -eq 0 ]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

# The server's malloc: jemalloc where it is installed (deploy/install-deps.sh installs it), unless
# TESSERA_PG_MALLOC=system. A backend storing a batch of log lines allocates and frees buffers of
# a few hundred KiB in every statement; glibc's malloc maps and unmaps each one, and faulting
# their pages in again was about 40% of PostgreSQL's time in bench/logs. jemalloc keeps them:
# 1.1-1.9 times the lines per second end to end in bench/logs (bench/README.md).
server_env() {
  [ "${TESSERA_PG_MALLOC:-jemalloc}" = system ] && return
  local lib
  for lib in /usr/lib/*/libjemalloc.so.2 /usr/lib/libjemalloc.so.2; do
    if [ -f "$lib" ]; then
      echo "LD_PRELOAD=$lib"
      return
    fi
  done
}

# The data folder: DIR/pgdata, unless the server user cannot reach DIR (root's home, say); then a
# folder under /var/tmp named after DIR, recorded in DIR/pgdata-location.
data_dir_for() {
  local dir="$1"
  if [ -f "$dir/pgdata-location" ]; then
    cat "$dir/pgdata-location"
    return
  fi
  if [ "$(id -u)" -ne 0 ] || runuser -u postgres -- test -x "$dir" 2>/dev/null; then
    echo "$dir/pgdata"
  else
    echo "/var/tmp/tessera-pg-$(echo -n "$(realpath "$dir")" | sha1sum | cut -c1-16)"
  fi
}

free_port() {
  python3 - <<'PY' 2>/dev/null || echo $(( 20000 + RANDOM % 20000 ))
import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])
PY
}

prepare_data_dir() {
  mkdir -p "$data"
  [ "$data" = "$dir/pgdata" ] || echo "$data" > "$dir/pgdata-location"
  [ "$(id -u)" -eq 0 ] && chown postgres:postgres "$data"
  chmod 700 "$data"
}

# psql as the instance's superuser: tessera_admin with its password file, or tessera under trust.
admin_psql() {  # port, psql arguments...
  local port="$1"; shift
  if [ -f "$dir/admin.pgpass" ]; then
    PGPASSFILE="$dir/admin.pgpass" "$PGBIN/psql" -h 127.0.0.1 -p "$port" -U tessera_admin "$@"
  else
    "$PGBIN/psql" -h 127.0.0.1 -p "$port" -U tessera "$@"
  fi
}

# A new password of 48 hex digits in FILE (mode 600), unless FILE has one.
make_password() {  # file
  [ -s "$1" ] || (umask 077; openssl rand -hex 24 >"$1")
}

# Writes a libpq password file (mode 600, as libpq insists) for USER with the password in FILE.
write_pgpass() {  # pgpass, user, password file
  (umask 077; printf '127.0.0.1:*:*:%s:%s\n' "$2" "$(cat "$3")" >"$1")
}

# initdb with password authentication only: tessera_admin is the superuser.
initdb_with_passwords() {
  make_password "$dir/admin.password"
  write_pgpass "$dir/admin.pgpass" tessera_admin "$dir/admin.password"
  # initdb runs as the server's user, which may not read DIR: it reads a copy of its own (mode
  # 600), gone once initdb is.
  local pwfile ok=0; pwfile="$(mktemp)"
  cat "$dir/admin.password" >"$pwfile"
  [ "$(id -u)" -eq 0 ] && chown postgres:postgres "$pwfile"
  as_server_user "$PGBIN/initdb" -D "$data" -U tessera_admin --pwfile "$pwfile" \
    --auth-host=scram-sha-256 --auth-local=scram-sha-256 -E UTF8 --no-locale \
    >"$dir/initdb.log" 2>&1 || ok=$?
  rm -f "$pwfile"
  [ "$ok" -eq 0 ] || die "initdb failed; see $dir/initdb.log"
  echo password >"$dir/auth"
}

# The services' role "tessera": it owns the database tessera and may do nothing else. Nobody
# else may connect to the databases (PUBLIC's CONNECT revoked).
create_service_role() {  # port
  make_password "$dir/tessera.password"
  write_pgpass "$dir/tessera.pgpass" tessera "$dir/tessera.password"
  if ! admin_psql "$1" -d postgres -tAc "SELECT 1 FROM pg_roles WHERE rolname = 'tessera'" | grep -q 1; then
    # The password goes on psql's stdin, not its command line (which others here may read).
    admin_psql "$1" -d postgres -q >/dev/null <<SQL
CREATE ROLE tessera LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS
  PASSWORD '$(cat "$dir/tessera.password")';
SQL
  fi
  if ! admin_psql "$1" -d postgres -tAc "SELECT 1 FROM pg_database WHERE datname = 'tessera'" | grep -q 1; then
    admin_psql "$1" -d postgres -qc "CREATE DATABASE tessera OWNER tessera" >/dev/null
    admin_psql "$1" -d postgres -qc "REVOKE CONNECT, TEMPORARY ON DATABASE tessera, postgres, template1 FROM PUBLIC; GRANT CONNECT, TEMPORARY ON DATABASE tessera TO tessera" >/dev/null
  fi
}

# Starts the server on 127.0.0.1:$1 (the recorded or a free port when empty); $2 = 1 trades
# durability for speed. Prints the URL of its database "tessera" (created on a primary).
start_server() {
  local port="$1" ephemeral="$2"
  if as_server_user "$PGBIN/pg_ctl" -D "$data" status >/dev/null 2>&1; then
    cat "$dir/url"
    return
  fi
  [ -n "$port" ] || { [ -f "$dir/port" ] && port="$(cat "$dir/port")"; } || true
  [ -n "$port" ] || port="$(free_port)"
  local opts="-p $port -c listen_addresses=127.0.0.1 -c unix_socket_directories='' -c max_connections=200"
  if [ "$ephemeral" -eq 1 ]; then
    opts="$opts -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
  fi
  as_server_user env $(server_env) "$PGBIN/pg_ctl" -D "$data" -l "$data/server.log" -w -t 60 -o "$opts" start >/dev/null \
    || die "PostgreSQL did not start on port $port; see $data/server.log"
  echo "$port" > "$dir/port"
  if [ "$(cat "$dir/auth" 2>/dev/null)" = password ]; then
    create_service_role "$port"
    echo "postgresql://tessera@127.0.0.1:$port/tessera?passfile=$dir/tessera.pgpass" | tee "$dir/url"
    return
  fi
  if [ ! -f "$data/standby.signal" ] && ! admin_psql "$port" -d postgres -tAc \
      "SELECT 1 FROM pg_database WHERE datname = 'tessera'" | grep -q 1; then
    admin_psql "$port" -d postgres -qc "CREATE DATABASE tessera" >/dev/null
  fi
  echo "postgresql://tessera@127.0.0.1:$port/tessera" | tee "$dir/url"
}

cmd="${1:-}"; dir="${2:-}"
[ -n "$cmd" ] && [ -n "$dir" ] || die "usage: pg-instance.sh start|standby|promote|sync|stop|url|status|destroy DIR ..."
mkdir -p "$dir"
dir="$(realpath "$dir")"
data="$(data_dir_for "$dir")"

case "$cmd" in
  start)
    port="${3:-}"
    ephemeral=0 passwords=0
    for a in "${@:3}"; do
      case "$a" in
        --ephemeral) ephemeral=1 ;;
        --password-auth) passwords=1 ;;
        --*) die "start: unknown option '$a' (--ephemeral, --password-auth)" ;;
      esac
    done
    case "$port" in --*) port="" ;; esac
    if [ ! -f "$data/PG_VERSION" ]; then
      prepare_data_dir
      if [ "$passwords" -eq 1 ]; then
        initdb_with_passwords
      else
        as_server_user "$PGBIN/initdb" -D "$data" -A trust -U tessera -E UTF8 --no-locale >"$dir/initdb.log" 2>&1 \
          || die "initdb failed; see $dir/initdb.log"
      fi
    elif [ "$passwords" -eq 1 ] && [ "$(cat "$dir/auth" 2>/dev/null)" != password ]; then
      echo "pg-instance: WARNING: $dir was made without --password-auth and keeps trust" \
           "authentication (anyone here may connect as its superuser); to remake it, losing its" \
           "data: deploy/pg-instance.sh destroy $dir" >&2
    fi
    start_server "$port" "$ephemeral"
    ;;
  standby)
    primary_port="${3:-}"; port="${4:-}"
    [ -n "$primary_port" ] || die "usage: pg-instance.sh standby DIR PRIMARY_PORT [PORT]"
    if [ ! -f "$data/PG_VERSION" ]; then
      prepare_data_dir
      # -R writes standby.signal and the primary's connection: the copy follows the primary.
      as_server_user "$PGBIN/pg_basebackup" -h 127.0.0.1 -p "$primary_port" -U tessera -D "$data" \
        -R -X stream -c fast >"$dir/basebackup.log" 2>&1 \
        || die "pg_basebackup from port $primary_port failed; see $dir/basebackup.log"
    fi
    start_server "$port" 0
    ;;
  promote)
    as_server_user "$PGBIN/pg_ctl" -D "$data" -w -t 60 promote >/dev/null \
      || die "promoting the standby in $dir failed; see $data/server.log"
    ;;
  sync)
    case "${3:-}" in
      on) names="*" ;;
      off) names="" ;;
      *) die "usage: pg-instance.sh sync DIR on|off" ;;
    esac
    port="$(cat "$dir/port")"
    admin_psql "$port" -d postgres -qc "ALTER SYSTEM SET synchronous_standby_names = '$names'" >/dev/null
    admin_psql "$port" -d postgres -qtAc "SELECT pg_reload_conf()" >/dev/null
    ;;
  stop)
    mode="${3:-fast}"
    if as_server_user "$PGBIN/pg_ctl" -D "$data" status >/dev/null 2>&1; then
      as_server_user "$PGBIN/pg_ctl" -D "$data" -m "$mode" -w -t 60 stop >/dev/null
    fi
    ;;
  url)
    [ -f "$dir/url" ] || die "no instance in $dir"
    cat "$dir/url"
    ;;
  status)
    as_server_user "$PGBIN/pg_ctl" -D "$data" status >/dev/null 2>&1
    ;;
  destroy)
    if as_server_user "$PGBIN/pg_ctl" -D "$data" status >/dev/null 2>&1; then
      as_server_user "$PGBIN/pg_ctl" -D "$data" -m immediate -w -t 60 stop >/dev/null || true
    fi
    rm -rf "$data" "$dir/pgdata-location" "$dir/url" "$dir/port" "$dir/initdb.log" "$dir/basebackup.log" \
      "$dir/auth" "$dir/admin.password" "$dir/admin.pgpass" "$dir/tessera.password" "$dir/tessera.pgpass"
    ;;
  *) die "unknown command '$cmd' (start|standby|promote|sync|stop|url|status|destroy)" ;;
esac
