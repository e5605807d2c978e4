#!/usr/bin/env bash
# Client libraries' own test suites against `locksim serve` (or redis-server, to compare).
#
#   bash scripts/client-suites.sh setup              # what CI needs: redis-py and its tests,
#                                                    # portalocker and its tests, the node checks'
#                                                    # packages (sim/tests/client_suites.rs), the
#                                                    # conformance suite's libraries
#                                                    # (sim/tests/conformance_libraries.rs),
#                                                    # the live adapters' pottery (sim/tests/live.rs)
#   bash scripts/client-suites.sh redis-py [server]  # redis-py tests/test_lock.py (+ asyncio)
#   bash scripts/client-suites.sh python-redis-lock [server]
#   bash scripts/client-suites.sh pottery [server]
#   bash scripts/client-suites.sh portalocker [server]  # portalocker's RedisLock (pub/sub lock)
#   bash scripts/client-suites.sh node [server]      # node redlock 5 + ioredis 6, node-redis 6,
#                                                    # redis-semaphore 5
#
# `server` is `locksim` (default: target/release/locksim serve) or `redis` (redis-server 7.0).
# Everything goes under target/client-suites/ (PyPI and npm, no GitHub).
set -euo pipefail
cd "$(dirname "$0")/.."
unset RUSTFLAGS
root=$PWD
dir=$root/target/client-suites
venv=$dir/venv
py=$venv/bin/python
REDIS_PY=8.1.0
mkdir -p "$dir"

setup_venv() {
  [ -x "$py" ] && return
  python3 -m venv "$venv"
  "$py" -m pip install -q --upgrade pip
}

setup_redis_py() {
  setup_venv
  "$py" -m pip install -q "redis==$REDIS_PY" pytest pytest-asyncio
  if [ ! -d "$dir/redis-$REDIS_PY/tests" ]; then
    # redis-py's sdist on PyPI carries its tests/ (conftest.py, test_lock.py, test_asyncio/).
    "$py" -m pip download -q --no-deps --no-binary :all: "redis==$REDIS_PY" -d "$dir/sdist"
    tar -xzf "$dir/sdist/redis-$REDIS_PY.tar.gz" -C "$dir"
  fi
}

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# start_server KIND [extra args]: sets $port and $server_pid.
start_server() {
  local kind=$1
  shift
  port=$(free_port)
  if [ "$kind" = redis ]; then
    redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no "$@" >/dev/null 2>&1 &
  else
    [ -x target/release/locksim ] || cargo build --release --quiet
    target/release/locksim serve --port "$port" "$@" 2>/dev/null &
  fi
  server_pid=$!
  trap 'kill "$server_pid" 2>/dev/null || true' EXIT
  for _ in $(seq 1 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && return; sleep 0.05; done
  echo "no server on port $port" >&2
  exit 1
}

run_redis_py() {
  setup_redis_py
  start_server "${1:-locksim}"
  cd "$dir/redis-$REDIS_PY"
  "$py" -m pytest tests/test_lock.py tests/test_asyncio/test_lock.py -q -p no:cacheprovider \
    --redis-url="redis://127.0.0.1:$port/0"
}

# python-redis-lock's suite starts `redis-server --unixsocket ...` itself: a `redis-server` earlier
# on PATH runs locksim serve with that socket instead.
run_python_redis_lock() {
  # Its own environment, as its tox.ini has it (its pytest.ini turns warnings into errors).
  local env=$dir/venv-python-redis-lock
  [ -x "$env/bin/python" ] || python3 -m venv "$env"
  "$env/bin/python" -m pip install -q "python-redis-lock==4.0.1" pytest Django django-redis \
    process-tests redis gevent eventlet
  if [ ! -d "$dir/python_redis_lock-4.0.1/tests" ]; then
    "$env/bin/python" -m pip download -q --no-deps --no-binary :all: "python-redis-lock==4.0.1" -d "$dir/sdist"
    tar -xzf "$dir/sdist/python_redis_lock-4.0.1.tar.gz" -C "$dir"
  fi
  local bin=$dir/shim-bin
  mkdir -p "$bin"
  if [ "${1:-locksim}" = locksim ]; then
    [ -x target/release/locksim ] || cargo build --release --quiet
    cat > "$bin/redis-server" <<EOF
#!/usr/bin/env bash
# redis-server --port 0 ... --unixsocket PATH  ->  locksim serve on that socket
sock=""
while [ \$# -gt 0 ]; do [ "\$1" = --unixsocket ] && sock=\$2; shift; done
exec "$root/target/release/locksim" serve --port 0 --unixsocket "\$sock"
EOF
  else
    printf '#!/bin/sh\nexec /usr/bin/redis-server "$@"\n' > "$bin/redis-server"
  fi
  chmod +x "$bin/redis-server"
  cd "$dir/python_redis_lock-4.0.1"
  PATH="$bin:$PATH" PYTHONPATH=tests DJANGO_SETTINGS_MODULE=test_project.settings \
    "$env/bin/python" -m pytest -q -p no:cacheprovider --ignore=src
}

# pottery's lock tests (Redlock, AIORedlock, NextID, AIONextID). Its sdist has no conftest.py:
# the one written here does what the project's does (a random database 1-15 on localhost:6379,
# FLUSHDB around each test), so the server must listen on 6379 (stop anything else there).
run_pottery() {
  local env=$dir/venv-pottery
  [ -x "$env/bin/python" ] || python3 -m venv "$env"
  "$env/bin/python" -m pip install -q "pottery==3.0.1" pytest pytest-asyncio uvloop
  if [ ! -d "$dir/pottery-3.0.1/tests" ]; then
    "$env/bin/python" -m pip download -q --no-deps --no-binary :all: "pottery==3.0.1" -d "$dir/sdist"
    tar -xzf "$dir/sdist/pottery-3.0.1.tar.gz" -C "$dir"
  fi
  cat > "$dir/pottery-3.0.1/tests/conftest.py" <<'EOF'
import random
import warnings

import pytest
import uvloop
from redis import Redis
from redis.asyncio import Redis as AIORedis

from pottery import PotteryWarning


@pytest.fixture(autouse=True, scope='session')
def install_uvloop():
    uvloop.install()


@pytest.fixture(autouse=True, scope='session')
def filter_warnings():
    warnings.filterwarnings('ignore', category=PotteryWarning)


@pytest.fixture(scope='session')
def redis_url():
    return f'redis://localhost:6379/{random.randint(1, 15)}'


@pytest.fixture
def redis(redis_url):
    client = Redis.from_url(redis_url, socket_timeout=1)
    client.flushdb()
    yield client
    client.flushdb()


@pytest.fixture
async def aioredis(redis_url):
    client = AIORedis.from_url(redis_url, socket_timeout=1)
    await client.flushdb()
    yield client
    await client.flushdb()
EOF
  if [ "${1:-locksim}" = redis ]; then
    redis-server --port 6379 --bind 127.0.0.1 --save '' --appendonly no >/dev/null 2>&1 &
  else
    [ -x target/release/locksim ] || cargo build --release --quiet
    target/release/locksim serve --port 6379 2>/dev/null &
  fi
  server_pid=$!
  trap 'kill "$server_pid" 2>/dev/null || true' EXIT
  for _ in $(seq 1 100); do redis-cli -p 6379 ping >/dev/null 2>&1 && break; sleep 0.05; done
  cd "$dir/pottery-3.0.1"
  "$env/bin/python" -m pytest tests/test_redlock.py tests/test_aioredlock.py tests/test_nextid.py \
    tests/test_aionextid.py -q -p no:cacheprovider -o asyncio_mode=auto
}

# portalocker's RedisLock tests: a lock held by a pub/sub subscription, not by a key (SUBSCRIBE,
# PUBLISH, PUBSUB NUMSUB, CLIENT LIST TYPE pubsub, CLIENT KILL ID). Each test runs against
# fakeredis and against the server on REDIS_PORT (`[live]`): only the live half runs here.
PORTALOCKER=4.4.2
setup_portalocker() {
  local env=$dir/venv-portalocker
  [ -x "$env/bin/python" ] || python3 -m venv "$env"
  [ -x "$env/bin/pytest" ] || "$env/bin/python" -m pip install -q "portalocker[redis]==$PORTALOCKER" \
    pytest pytest-timeout pytest-rerunfailures fakeredis typing_extensions
  if [ ! -d "$dir/portalocker-$PORTALOCKER/portalocker_tests" ]; then
    # Only portalocker from source: its build dependencies' sdists need another Rust toolchain.
    "$env/bin/python" -m pip download -q --no-deps --no-binary portalocker \
      "portalocker==$PORTALOCKER" -d "$dir/sdist"
    tar -xzf "$dir/sdist/portalocker-$PORTALOCKER.tar.gz" -C "$dir"
  fi
}

run_portalocker() {
  local env=$dir/venv-portalocker
  setup_portalocker
  start_server "${1:-locksim}"
  cd "$dir/portalocker-$PORTALOCKER"
  # Its pyproject's addopts want coverage at 100 %: not ours to measure.
  PORTALOCKER_REDIS_TESTS_REQUIRED=1 REDIS_HOST=127.0.0.1 REDIS_PORT=$port \
    "$env/bin/python" -m pytest portalocker_tests/test_redis.py \
    portalocker_tests/test_redis_random_sleep.py portalocker_tests/test_redis_reply_deadline.py \
    -k live -q -p no:cacheprovider -o addopts="--timeout=20"
}

# node-redlock 5 (beta), redis-semaphore and node-redis ship no tests in their npm packages:
# scripts/node-client-checks.mjs runs the operations their READMEs show as named checks.
# The checks import their packages from target/client-suites/node/node_modules, so they run from
# a copy there (ES modules resolve imports next to the importing file).
setup_node() {
  local work=$dir/node
  mkdir -p "$work"
  [ -f "$work/package.json" ] || echo '{"name": "locksim-client-checks", "private": true, "type": "module"}' > "$work/package.json"
  [ -d "$work/node_modules/redlock-4.2.0" ] || (cd "$work" && npm install --silent --no-audit --no-fund \
    redlock@5.0.0-beta.2 ioredis@6.0.0 redis@6.3.1 redis-semaphore@5.8.0 \
    redlock-4.2.0@npm:redlock@4.2.0)
}

# The conformance suite's Python libraries (conformance/libraries/*.json name the venvs), each
# in its own venv under target/client-suites/, the versions pinned. redbeat 1.0.0 needs celery
# 4, whose vine 1.3 imports inspect.formatargspec (gone in Python 3.11): its venv takes the
# newest Python below 3.11 that pyenv has (the image ships 3.10).
older_python() {
  local candidate
  for candidate in "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.10.*/bin/python3.10 \
                   "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.9.*/bin/python3.9 \
                   "$(command -v python3.10 || true)" "$(command -v python3.9 || true)"; do
    [ -n "$candidate" ] && [ -x "$candidate" ] && { echo "$candidate"; return; }
  done
  echo "no Python 3.9 or 3.10 for redbeat 1.0.0's celery 4" >&2
  return 1
}

# The live adapters' libraries beyond redis-py and node's (examples/live/, sim/tests/live.rs).
setup_live_adapters() {
  conformance_venv venv-pottery python3 "pottery==3.0.1"
}

conformance_venv() {
  local name=$1 python=$2
  shift 2
  local env=$dir/$name
  [ -x "$env/bin/python" ] || "$python" -m venv "$env"
  "$env/bin/python" -c 'import sys; sys.exit(0)' && [ -f "$env/.locksim-installed" ] && return
  "$env/bin/python" -m pip install -q "$@"
  touch "$env/.locksim-installed"
}

setup_conformance() {
  setup_redis_py
  conformance_venv venv-redis-py-2.10.1 python3 "redis==2.10.1"
  conformance_venv venv-redbeat-2.0.0 python3 "celery-redbeat==2.0.0" "celery==5.2.7" "redis==$REDIS_PY"
  conformance_venv venv-redbeat-1.0.0 "$(older_python)" "celery-redbeat==1.0.0" "celery==4.4.7" \
    "redis==$REDIS_PY"
  setup_conformance_py
  setup_node
}

# The conformance venvs of pottery, python-redis-lock, aioredlock and sherlock, their redis-py
# pinned.
setup_conformance_py() {
  conformance_venv venv-pottery-3.0.1 python3 "pottery==3.0.1" "redis==$REDIS_PY"
  conformance_venv venv-python-redis-lock-4.0.1 python3 "python-redis-lock==4.0.1" "redis==$REDIS_PY"
  # aioredlock/redis.py:5 imports distutils, which setuptools provides from Python 3.12 on.
  conformance_venv venv-aioredlock-0.7.3 python3 "aioredlock==0.7.3" "aioredis==1.3.1" \
    "setuptools==65.5.0"
  # sherlock 0.4.x asks for redis>=4.3.4,<5 (its `redis` extra): the last 4.x, one venv per
  # version (0.4.1 differs in one line of sherlock/lock.py).
  conformance_venv venv-sherlock-0.4.0 python3 "sherlock==0.4.0" "redis==4.6.0"
  conformance_venv venv-sherlock-0.4.1 python3 "sherlock==0.4.1" "redis==4.6.0"
}

run_node() {
  local work=$dir/node
  setup_node
  start_server "${1:-locksim}"
  cp "$root/scripts/node-client-checks.mjs" "$work/checks.mjs"
  (cd "$work" && node checks.mjs "$port")
}

case "${1:-}" in
  setup) setup_redis_py && setup_portalocker && setup_node && setup_conformance && setup_live_adapters ;;
  redis-py) run_redis_py "${2:-locksim}" ;;
  python-redis-lock) run_python_redis_lock "${2:-locksim}" ;;
  pottery) run_pottery "${2:-locksim}" ;;
  portalocker) run_portalocker "${2:-locksim}" ;;
  node) run_node "${2:-locksim}" ;;
  *) sed -n 2,15p "$0"; exit 2 ;;
esac
