#!/usr/bin/env bash
# Every symbol tablesocket.so needs from the server must be exported by the installed mariadbd:
# a missing one would only show up as a load failure (or a crash on first use) at run time.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
so=${1:-$here/build/tablesocket.so}
server=${MARIADBD:-$(command -v mariadbd || echo /usr/sbin/mariadbd)}
have=$(mktemp); trap 'rm -f "$have"' EXIT
nm -D --defined-only "$server" | awk '{print $3}' | sort -u > "$have"
missing=0
while read -r sym; do
  case "$sym" in *@*|_ITM_*|__gmon_start__) continue ;; esac
  if ! grep -qxF "$sym" "$have"; then echo "missing in $server: $(echo "$sym" | c++filt)"; missing=1; fi
done < <(nm -D --undefined-only "$so" | awk '{print $2}')
[ $missing = 0 ] && echo "all $(nm -D --undefined-only "$so" | grep -vc '@') server symbols resolve"
exit $missing
