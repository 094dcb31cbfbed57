#!/bin/sh
# build.sh OUT [CTR_OUT] — build containerd 2.x (and optionally its ctr) from
# this nested module; lab/build-containerd.sh does the cached, locked build.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
exec "$here/../build-containerd.sh" "$here" "$@"
