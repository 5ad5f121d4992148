# Shared helpers of scripts/serve and scripts/test (sourced, not run).
# Everything installs itself: Debian packages, the virtualenv, PostgreSQL and Redis
# on 127.0.0.1 under .run/ (stopped again by stop_services).

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
RUN_DIR="${HASHEE_RUN_DIR:-$ROOT/.run}"
VENV="${HASHEE_VENV:-$ROOT/.venv}"
PY="$VENV/bin/python"
PG_BIN="${PG_BIN:-/usr/lib/postgresql/15/bin}"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
# Free ports by default, so a second checkout (or CI beside a developer) never collides.
PG_PORT="${HASHEE_PG_PORT:-$(free_port)}"
REDIS_PORT="${HASHEE_REDIS_PORT:-$(free_port)}"

log() { printf '\n== %s\n' "$*" >&2; }

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

ensure_apt_packages() {
  # $@: "command:package" pairs; installs the packages whose command is missing.
  local missing=() pair
  for pair in "$@"; do
    command -v "${pair%%:*}" >/dev/null 2>&1 || [ -e "${pair%%:*}" ] || missing+=("${pair##*:}")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  log "installing Debian packages: ${missing[*]}"
  as_root apt-get update -qq
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

ensure_venv() {
  # $1: requirements file. Reinstalls only when the file changed.
  local req="$1" stamp
  [ -x "$PY" ] || python3 -m venv "$VENV"
  stamp="$VENV/.installed-$(basename "$req")-$(cat "$ROOT"/requirements*.txt "$ROOT"/sdk/pyproject.toml | sha256sum | cut -c1-16)"
  if [ ! -f "$stamp" ]; then
    log "installing Python packages from $req"
    "$PY" -m pip install -q --disable-pip-version-check --upgrade pip
    "$PY" -m pip install -q --disable-pip-version-check -r "$ROOT/$req"
    touch "$stamp"
  fi
}

pg_run() {
  # initdb refuses to run as root: run PostgreSQL as the postgres user when we are root.
  if [ "$(id -u)" = 0 ]; then (cd / && runuser -u postgres -- "$@"); else "$@"; fi
}

pg_data_dir() {
  # As root, PostgreSQL runs as the postgres user, which must reach its data directory: a
  # checkout inside a private directory (mktemp -d, a home directory) is out of its reach,
  # so the cluster then lives in a directory of its own under /tmp (removed on stop).
  mkdir -p "$RUN_DIR"
  [ "$(id -u)" = 0 ] || { echo "$RUN_DIR/pg"; return; }
  chown postgres "$RUN_DIR" 2>/dev/null || true
  if (cd / && runuser -u postgres -- test -w "$RUN_DIR"); then echo "$RUN_DIR/pg"; return; fi
  local dir
  dir=$(mktemp -d /tmp/hashee-pg.XXXXXX)
  chown postgres "$dir"
  echo "$dir/pg"
}

start_postgres() {
  PG_DATA="$(pg_data_dir)"
  local data="$PG_DATA"
  if [ ! -f "$data/PG_VERSION" ]; then
    log "initdb $data"
    pg_run "$PG_BIN/initdb" -D "$data" -U hashee --auth=trust -E UTF8 --locale=C.UTF-8 >/dev/null
  fi
  log "starting PostgreSQL on 127.0.0.1:$PG_PORT"
  pg_run "$PG_BIN/pg_ctl" -D "$data" -l "$data/server.log" -w -t 60 \
    -o "-c listen_addresses=127.0.0.1 -p $PG_PORT -k $data -c max_connections=300 -c fsync=off -c synchronous_commit=off -c full_page_writes=off" start >/dev/null
  export DATABASE_URL="postgres://hashee@127.0.0.1:$PG_PORT/hashee"
  pg_run "$PG_BIN/psql" -h 127.0.0.1 -p "$PG_PORT" -U hashee -d postgres -tAc \
    "SELECT 1 FROM pg_database WHERE datname='hashee'" | grep -q 1 ||
    pg_run "$PG_BIN/createdb" -h 127.0.0.1 -p "$PG_PORT" -U hashee hashee
}

stop_postgres() {
  local data="${PG_DATA:-$RUN_DIR/pg}"
  [ -f "$data/postmaster.pid" ] && pg_run "$PG_BIN/pg_ctl" -D "$data" -m fast -w stop >/dev/null || true
  case "$data" in /tmp/hashee-pg.*) rm -rf "$(dirname "$data")" ;; esac
}

start_redis() {
  mkdir -p "$RUN_DIR/redis"
  log "starting Redis on 127.0.0.1:$REDIS_PORT"
  redis-server --bind 127.0.0.1 --port "$REDIS_PORT" --daemonize yes --save "" --appendonly no \
    --dir "$RUN_DIR/redis" --pidfile "$RUN_DIR/redis/redis.pid" --logfile "$RUN_DIR/redis/redis.log"
  for _ in $(seq 50); do redis-cli -p "$REDIS_PORT" ping >/dev/null 2>&1 && break; sleep 0.1; done
  export REDIS_URL="redis://127.0.0.1:$REDIS_PORT/0"
}

stop_redis() {
  local pidfile="$RUN_DIR/redis/redis.pid"
  [ -f "$pidfile" ] && kill "$(cat "$pidfile")" 2>/dev/null || true
  rm -f "$pidfile"
}

stop_services() { stop_redis; stop_postgres; }
