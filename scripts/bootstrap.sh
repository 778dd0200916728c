#!/usr/bin/env bash
# Make this checkout ready to run: Debian packages, .venv, the project with its dev extras.
# Quick when everything is already there. Used by `make run`, `make test` and friends.
#
#   scripts/bootstrap.sh          what `make run` needs
#   scripts/bootstrap.sh --test   that, plus what only the test suite needs (`make test`):
#                                 the Debian packages in TEST_NEED and the pyproject extra
#                                 "test". Heavy test-only things go there, not in NEED.
set -euo pipefail
cd "$(dirname "$0")/.."

for_tests=0
for arg in "$@"; do
  case "$arg" in
    --test) for_tests=1 ;;
    *) echo "bootstrap: unknown argument $arg (known: --test)" >&2; exit 2 ;;
  esac
done

# Debian packages: command we need -> package that provides it.
declare -A NEED=(
  [mnexec]=mininet [ip]=iproute2 [ping]=iputils-ping [ethtool]=ethtool
  [tcpdump]=tcpdump [nft]=nftables [tc]=iproute2 [gcc]=gcc
)
# Only for the test suite: headless Chromium loads the dashboard (tests/test_dashboard.py);
# Java runs PySpark for ASK's Spark tests (tests/test_mininet_ask.py).
declare -A TEST_NEED=(
  [chromium]=chromium
  [java]=openjdk-17-jre-headless
)
extras=dev
if [ "$for_tests" = 1 ]; then
  for cmd in "${!TEST_NEED[@]}"; do NEED[$cmd]=${TEST_NEED[$cmd]}; done
  extras=dev,test
fi

missing=()
for cmd in "${!NEED[@]}"; do
  command -v "$cmd" >/dev/null 2>&1 || missing+=("${NEED[$cmd]}")
done
python_ok=1
python3 -c 'import sys, venv, ensurepip; sys.exit(sys.version_info < (3, 11))' 2>/dev/null || python_ok=0
[ "$python_ok" = 1 ] || missing+=(python3 python3-venv)
# p4sim's native back end compiles C with gcc (the default back end of `make run`'s switch):
# Debian's gcc only recommends the C library headers, which --no-install-recommends skips.
printf '#include <stdint.h>\n#include <poll.h>\n' | gcc -E -x c - >/dev/null 2>&1 \
  || missing+=(gcc libc6-dev)
# ptf's dependency netifaces ships no wheel for current Pythons: pip builds it (gcc, headers).
python3 -c 'import os, sys, sysconfig
sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))' \
  2>/dev/null || missing+=(python3-dev)

if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "bootstrap: needs root to apt-get install: $(printf '%s\n' "${missing[@]}" | sort -u | tr '\n' ' ')" >&2
    exit 1
  fi
  pkgs=$(printf '%s\n' "${missing[@]}" | sort -u | tr '\n' ' ')
  echo "bootstrap: installing Debian packages: $pkgs"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  # shellcheck disable=SC2086
  apt-get install -y -qq --no-install-recommends $pkgs >/dev/null
fi

if ! python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
  echo "bootstrap: needs Python 3.11 or newer; this python3 is $(python3 -V 2>&1)" \
       "(Debian 12 and Ubuntu 24.04 ship it)" >&2
  exit 1
fi

# The virtual environment, reinstalled only when pyproject.toml changes or more extras are
# asked for. The stamp names the extras installed; "dev,test" also serves a plain run.
hash=$(sha1sum pyproject.toml | cut -c1-12)
stamp=.venv/.installed-$hash-$extras
if [ ! -f "$stamp" ] && [ ! -f ".venv/.installed-$hash-dev,test" ]; then
  [ -x .venv/bin/python ] || python3 -m venv .venv
  echo "bootstrap: installing the project and its extras ($extras) into .venv"
  log=.venv/pip-install.log
  if ! { .venv/bin/python -m pip install -q --upgrade pip \
         && .venv/bin/python -m pip install -q -e ".[$extras]"; } >"$log" 2>&1; then
    tail -n 30 "$log" >&2
    echo "bootstrap: pip install failed (full log: $log)" >&2
    exit 1
  fi
  rm -f .venv/.installed-*
  touch "$stamp"
fi
