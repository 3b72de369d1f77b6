#!/usr/bin/env bash
# Start a local PostgreSQL for the record-store tests (S-33) and print its DSN.
#
# Idempotent: installs Debian's `postgresql` if missing (needs root), creates a cluster if
# none exists, starts it without systemd, creates the role and database the tests use, and
# prints the DSN on stdout (everything else goes to stderr). Safe to run again and again.
#
# Env: DISPATCH_PG_USER / DISPATCH_PG_PASSWORD / DISPATCH_PG_DB / DISPATCH_PG_PORT override
# the defaults (dispatch / dispatch / dispatch_test / 5432).
#
# The access-control tests (S-51, docs/record.md) also need, and get here, two ordinary
# login roles dispatch_alice and dispatch_bob (password = name), the group role
# dispatch_operator and a login role dispatch_sup that is a member of it.
set -euo pipefail

user="${DISPATCH_PG_USER:-dispatch}"
password="${DISPATCH_PG_PASSWORD:-dispatch}"
db="${DISPATCH_PG_DB:-dispatch_test}"
port="${DISPATCH_PG_PORT:-5432}"
log() { echo "start-postgres: $*" >&2; }

if [ "$(id -u)" -ne 0 ]; then
    log "must run as root (it may apt-get install postgresql and runs commands as user postgres)"
    exit 2
fi

if ! command -v pg_ctlcluster >/dev/null 2>&1 || ! ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1; then
    log "installing postgresql with apt-get"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2
    apt-get install -y -qq postgresql >&2
fi

version="$(ls /usr/lib/postgresql | sort -V | tail -n 1)"
if ! pg_lsclusters -h | awk -v v="$version" '$1 == v && $2 == "main"' | grep -q .; then
    log "creating cluster $version/main on port $port"
    pg_createcluster --port "$port" "$version" main >&2
fi

cluster_port="$(pg_lsclusters -h | awk -v v="$version" '$1 == v && $2 == "main" {print $3}')"
status="$(pg_lsclusters -h | awk -v v="$version" '$1 == v && $2 == "main" {print $4}')"
if [ "$status" != "online" ]; then
    log "starting cluster $version/main"
    # A stale pid file from a machine that was stopped hard keeps pg_ctl from starting.
    pidfile="/var/lib/postgresql/$version/main/postmaster.pid"
    if [ -f "$pidfile" ] && ! kill -0 "$(head -n 1 "$pidfile")" 2>/dev/null; then
        log "removing stale $pidfile"
        rm -f "$pidfile"
    fi
    pg_ctlcluster "$version" main start >&2
fi

for _ in $(seq 1 60); do
    if pg_isready -q -h 127.0.0.1 -p "$cluster_port"; then
        break
    fi
    sleep 0.5
done
if ! pg_isready -q -h 127.0.0.1 -p "$cluster_port"; then
    log "PostgreSQL $version/main did not become ready on 127.0.0.1:$cluster_port;" \
        "see /var/log/postgresql/postgresql-$version-main.log"
    exit 1
fi

psql_admin() { (cd / && runuser -u postgres -- psql -p "$cluster_port" -v ON_ERROR_STOP=1 -qAt "$@"); }

if [ "$(psql_admin -c "SELECT 1 FROM pg_roles WHERE rolname = '$user'")" != "1" ]; then
    log "creating role $user"
    psql_admin -c "CREATE ROLE \"$user\" LOGIN PASSWORD '$password'" >&2
else
    psql_admin -c "ALTER ROLE \"$user\" LOGIN PASSWORD '$password'" >&2
fi
if [ "$(psql_admin -c "SELECT 1 FROM pg_database WHERE datname = '$db'")" != "1" ]; then
    log "creating database $db"
    psql_admin -c "CREATE DATABASE \"$db\" OWNER \"$user\"" >&2
fi

# Roles of the access-control tests: two users and a supervisor (operator) role.
for role in dispatch_alice dispatch_bob dispatch_sup; do
    if [ "$(psql_admin -c "SELECT 1 FROM pg_roles WHERE rolname = '$role'")" != "1" ]; then
        log "creating role $role"
        psql_admin -c "CREATE ROLE \"$role\" LOGIN PASSWORD '$role'" >&2
    fi
done
if [ "$(psql_admin -c "SELECT 1 FROM pg_roles WHERE rolname = 'dispatch_operator'")" != "1" ]; then
    log "creating role dispatch_operator"
    psql_admin -c "CREATE ROLE dispatch_operator NOLOGIN" >&2
fi
psql_admin -c "GRANT dispatch_operator TO dispatch_sup" >&2

echo "postgresql://$user:$password@127.0.0.1:$cluster_port/$db"
