# Sourced by .ci/run. start_test_postgres starts a throwaway PostgreSQL server on 127.0.0.1 for the
# database tests (tests/test_database*.py):
#   - installs Debian's postgresql when no initdb/pg_ctl is found (as root; apt-get update only if needed),
#   - makes a cluster in a temporary directory with initdb, owned by a non-root user when run as root,
#   - starts it with pg_ctl on a free loopback port (unix socket in the same directory, no fsync: it is
#     thrown away), exports AUTOSCHED_TEST_POSTGRES_URL, and stops it and removes it at exit.
# On any failure it says why on stderr and returns 0 without the variable: the PostgreSQL tests then skip
# with "no PostgreSQL server could be started". An AUTOSCHED_TEST_POSTGRES_URL already set is used as is.

_pg_say() { echo "[ci/postgres] $*" >&2; }

_pg_bindir() {
  local d
  for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
    if [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ]; then echo "$d"; return 0; fi
  done
  if command -v initdb >/dev/null 2>&1 && command -v pg_ctl >/dev/null 2>&1; then
    dirname "$(command -v initdb)"; return 0
  fi
  return 1
}

_pg_install() {
  if [ "$(id -u)" != 0 ]; then _pg_say "PostgreSQL is not installed and this is not root"; return 1; fi
  if ! command -v apt-get >/dev/null 2>&1; then _pg_say "PostgreSQL is not installed and there is no apt-get"; return 1; fi
  # Debian's package would create and start a default cluster we do not use: say not to, unless the
  # machine already has a createcluster.conf of its own
  local conf=/etc/postgresql-common/createcluster.conf
  if [ ! -e "$conf" ]; then
    mkdir -p /etc/postgresql-common && echo "create_main_cluster = false" > "$conf"
  fi
  local apt=(env DEBIAN_FRONTEND=noninteractive apt-get -y -q --no-install-recommends
             -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold)
  _pg_say "installing postgresql (apt-get)"
  if ! "${apt[@]}" install postgresql </dev/null >/tmp/autosched-pg-apt.log 2>&1; then
    _pg_say "apt-get install failed; running apt-get update first"
    env DEBIAN_FRONTEND=noninteractive apt-get -q update </dev/null >>/tmp/autosched-pg-apt.log 2>&1 || true
    if ! "${apt[@]}" install postgresql </dev/null >>/tmp/autosched-pg-apt.log 2>&1; then
      _pg_say "apt-get install postgresql failed:"; tail -n 15 /tmp/autosched-pg-apt.log >&2; return 1
    fi
  fi
}

_PG_DIR=""
_PG_RUNAS=()
_PG_BIN=""

stop_test_postgres() {
  if [ -n "$_PG_DIR" ] && [ -d "$_PG_DIR" ]; then
    "${_PG_RUNAS[@]}" "$_PG_BIN/pg_ctl" -D "$_PG_DIR/data" -m immediate -w stop >/dev/null 2>&1 || true
    rm -rf "$_PG_DIR"
  fi
  _PG_DIR=""
}

start_test_postgres() {
  if [ -n "${AUTOSCHED_TEST_POSTGRES_URL:-}" ]; then
    _pg_say "using AUTOSCHED_TEST_POSTGRES_URL from the environment"; return 0
  fi
  local t0=$SECONDS
  if ! _PG_BIN=$(_pg_bindir); then
    _pg_install || return 0
    _PG_BIN=$(_pg_bindir) || { _pg_say "installed, but no initdb/pg_ctl found"; return 0; }
  fi
  local owner
  owner=$(id -un)
  _PG_RUNAS=()
  if [ "$(id -u)" = 0 ]; then  # initdb refuses root: run the server as postgres (or a user made for it)
    owner=postgres
    if ! id -u "$owner" >/dev/null 2>&1; then
      owner=autosched-pg
      id -u "$owner" >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin "$owner" \
        || { _pg_say "cannot create a user to run PostgreSQL"; return 0; }
    fi
    if command -v runuser >/dev/null 2>&1; then _PG_RUNAS=(runuser -u "$owner" --)
    else _PG_RUNAS=(su -s /bin/sh "$owner" -c '"$0" "$@"'); fi
  fi
  _PG_DIR=$(mktemp -d /tmp/autosched-pg.XXXXXX) || { _pg_say "mktemp failed"; return 0; }
  chmod 700 "$_PG_DIR"
  [ "$owner" = "$(id -un)" ] || chown "$owner" "$_PG_DIR"
  trap stop_test_postgres EXIT
  if ! "${_PG_RUNAS[@]}" "$_PG_BIN/initdb" -D "$_PG_DIR/data" -U autosched -A trust -E UTF8 --locale=C \
      --no-sync >"$_PG_DIR/initdb.log" 2>&1; then
    _pg_say "initdb failed:"; tail -n 15 "$_PG_DIR/initdb.log" >&2; stop_test_postgres; return 0
  fi
  local port tries=0
  while :; do
    port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    if "${_PG_RUNAS[@]}" "$_PG_BIN/pg_ctl" -D "$_PG_DIR/data" -l "$_PG_DIR/server.log" -w -t 60 \
        -o "-c listen_addresses=127.0.0.1 -p $port -k $_PG_DIR -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=40" \
        start >/dev/null 2>&1; then
      break
    fi
    tries=$((tries + 1))
    if [ "$tries" -ge 3 ]; then
      _pg_say "pg_ctl start failed:"; tail -n 15 "$_PG_DIR/server.log" >&2; stop_test_postgres; return 0
    fi
  done
  export AUTOSCHED_TEST_POSTGRES_URL="postgresql://autosched@127.0.0.1:$port/postgres"
  _pg_say "PostgreSQL $("$_PG_BIN/pg_ctl" --version | awk '{print $3}') on 127.0.0.1:$port ($((SECONDS - t0)) s)"
}
