#!/usr/bin/env bash
# Run a command in a network namespace of its own (loopback up, no other interface), so that
# two checkouts can run their Mininet tests and experiments at the same time on one machine:
# the fixed names (switch s1, its s1-ethN interfaces, gRPC and API ports, nftables tables)
# then live in separate namespaces. A mount namespace of its own remounts /sys, so that
# /sys/class/net shows this namespace's interfaces. The namespace has no route out:
# install first.
#   make setup && scripts/netns.sh make pytest PYTEST_ARGS="-m mininet"
set -euo pipefail
[ "$(id -u)" = 0 ] || { echo "netns.sh: needs root (unshare --net --mount)" >&2; exit 1; }
[ $# -gt 0 ] || { echo "usage: scripts/netns.sh COMMAND [ARG...]" >&2; exit 2; }
exec unshare --net --mount --propagation private -- bash -c \
  'mount -t sysfs sysfs /sys && ip link set lo up && exec "$@"' netns.sh "$@"
