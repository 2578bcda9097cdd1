#!/usr/bin/env bash
# layout.sh: the source keeps the shape fs/README.md promises. No C file of
# fs/, fetch/, cache/ or pacing/ is over 800 lines and no function there
# over 100 (counted as fs/README.md counts them: from the first line of
# the signature to the closing brace at column 0); no file includes
# another room's private header (a *_int.h of another folder). Needs no
# mount.
set -euo pipefail
# shellcheck source=tests/lib.sh
source "$(dirname "$0")/../lib.sh"

cd "$T_ROOT"
mapfile -t srcs < <(git ls-files 'fs/*.c' 'fs/*.h' 'fetch/*.c' 'fetch/*.h' \
	'cache/*.c' 'cache/*.h' 'pacing/*.c' 'pacing/*.h' 2>/dev/null ||
	find fs fetch cache pacing -name '*.[ch]')
if [ "${#srcs[@]}" -eq 0 ]; then
	t_fail "sources found" "none under fs/, fetch/, cache/, pacing/"
	t_done
fi

long=$(wc -l "${srcs[@]}" | awk '$2 != "total" && $1 > 800 { print $2 " " $1 }')
t_eq "no source file over 800 lines" "$long" ""

long=$(awk '/^[A-Za-z_]/ && !/^[a-z_]+:/ { sig = FNR; name = $0 }
	/^\{$/ { s = sig }
	/^\}$/ && s { n = FNR - s + 1; if (n > 100) print FILENAME ":" s " " n; s = 0 }' \
	"${srcs[@]}")
t_eq "no function over 100 lines" "$long" ""

# A private header is included by its own folder only: "room/x_int.h"
# from a file of room/, or "x_int.h" found beside the includer.
bad=""
for f in "${srcs[@]}"; do
	while read -r h; do
		case $h in
		*/*) [ "$(dirname "$h")" = "$(dirname "$f")" ] || bad+="$f -> $h; " ;;
		*) [ -e "$(dirname "$f")/$h" ] || bad+="$f -> $h; " ;;
		esac
	done < <(sed -n 's/^#include "\([^"]*_int\.h\)".*/\1/p' "$f")
done
t_eq "no file includes another room's private header" "$bad" ""

t_done
