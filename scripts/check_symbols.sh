#!/usr/bin/env bash
# Every symbol tablesocket.so needs from the server must be exported by the installed mariadbd:
# a missing one would only show up as a load failure (or a crash on first use) at run time.
#
# Symbols with an OpenSSL version (SSL_read_ex@OPENSSL_3.0.0) come from the libssl/libcrypto the
# plugin links: each must be defined, with that version, by the library the plugin resolves to, and
# mariadbd must link the same libraries (same sonames, same files), so that the process holds one
# OpenSSL. Other versioned symbols (glibc, libstdc++) are the system's and not checked here.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
so=${1:-$here/build/tablesocket.so}
server=${MARIADBD:-$(command -v mariadbd || echo /usr/sbin/mariadbd)}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
nm -D --defined-only "$server" | awk '{print $3}' | sort -u > "$tmp/server"
nm -D --undefined-only "$so" | awk '{print $2}' > "$tmp/undef"
missing=0

# ---- server symbols ------------------------------------------------------------------------------
while read -r sym; do
  case "$sym" in *@*|_ITM_*|__gmon_start__) continue ;; esac
  if ! grep -qxF "$sym" "$tmp/server"; then echo "missing in $server: $(echo "$sym" | c++filt)"; missing=1; fi
done < "$tmp/undef"
n_server=$(grep -vc '@' "$tmp/undef" || true)

# ---- OpenSSL symbols -------------------------------------------------------------------------------
# The file a NEEDED soname resolves to, for the plugin and for mariadbd.
resolve() { ldd "$1" 2>/dev/null | awk -v lib="$2" '$1 == lib {print $3}'; }
n_ssl=0
if grep -q '@OPENSSL_' "$tmp/undef"; then
  libs=$(readelf -d "$so" | sed -n 's/.*(NEEDED).*\[\(lib\(ssl\|crypto\)\.so[^]]*\)\]/\1/p')
  [ -n "$libs" ] || { echo "$so uses OpenSSL symbols but links no libssl/libcrypto"; missing=1; }
  : > "$tmp/ssl"
  for lib in $libs; do
    ours=$(resolve "$so" "$lib")
    theirs=$(resolve "$server" "$lib")
    if [ -z "$ours" ] || [ ! -f "$ours" ]; then echo "$lib (needed by $so) does not resolve"; missing=1; continue; fi
    if [ -z "$theirs" ]; then
      echo "$server does not link $lib: the plugin would bring a second OpenSSL into the process"; missing=1
    elif [ "$(readlink -f "$ours")" != "$(readlink -f "$theirs")" ]; then
      echo "$lib resolves to $ours for the plugin but to $theirs for $server"; missing=1
    fi
    # "SSL_new@@OPENSSL_3.0.0" (default version) and "X@OPENSSL_x" both define X@OPENSSL_x.
    nm -D --defined-only "$ours" | awk '{print $3}' | sed 's/@@/@/' >> "$tmp/ssl"
  done
  sort -u -o "$tmp/ssl" "$tmp/ssl"
  while read -r sym; do
    case "$sym" in *@OPENSSL_*) ;; *) continue ;; esac
    n_ssl=$((n_ssl + 1))
    if ! grep -qxF "$sym" "$tmp/ssl"; then echo "missing in $libs: $sym"; missing=1; fi
  done < "$tmp/undef"
fi

[ $missing = 0 ] && echo "all $n_server server symbols resolve; all $n_ssl OpenSSL symbols resolve in the libraries mariadbd links"
exit $missing
