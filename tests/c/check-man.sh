#!/bin/sh
# leakcheck(3): `make install` puts it in share/man/man3, man(1) finds it
# there by name and renders it without a warning, and every function
# libleakcheck exports (c_api/leakcheck.sym) is declared in it and opens it
# by its own name (man lc_scope_new), as the test macros do.
set -eu
: "${top_srcdir:?run through make check}" "${top_builddir:?}" "${MAKE:?}"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/leakcheck-man.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM
fail() { echo "FAIL: $*"; exit 1; }
unset MAKEFLAGS MFLAGS MAKELEVEL

(cd "$top_builddir" && $MAKE install DESTDIR="$tmp/root") \
    >"$tmp/install.log" 2>&1 || { cat "$tmp/install.log"; fail "make install"; }
page=$(find "$tmp/root" -path '*/share/man/man3/leakcheck.3' | head -n 1)
[ -n "$page" ] || fail "no share/man/man3/leakcheck.3 installed"

MANPATH="${page%/man3/leakcheck.3}" MANWIDTH=80 MANPAGER=cat PAGER=cat
export MANPATH MANWIDTH MANPAGER PAGER
if command -v man >/dev/null 2>&1; then
    man 3 leakcheck >"$tmp/page.txt" 2>"$tmp/man.err" ||
        { cat "$tmp/man.err"; fail "man 3 leakcheck"; }
    how="man 3 leakcheck"
elif command -v nroff >/dev/null 2>&1; then
    nroff -man "$page" | col -b >"$tmp/page.txt" 2>"$tmp/man.err" ||
        { cat "$tmp/man.err"; fail "nroff -man"; }
    how="nroff -man"
else
    echo "SKIP: neither man nor nroff (scripts/setup installs man-db)"
    exit 77
fi
if command -v groff >/dev/null 2>&1; then
    groff -man -ww -z "$page" >"$tmp/groff.err" 2>&1 || true
    [ ! -s "$tmp/groff.err" ] || { cat "$tmp/groff.err"; fail "groff warns about leakcheck.3"; }
fi
grep -q '^LEAKCHECK(3)' "$tmp/page.txt" || { head "$tmp/page.txt"; fail "$how: no LEAKCHECK(3) header"; }

missing=
while read -r sym; do
    grep -q "[ *]$sym(" "$tmp/page.txt" || missing="$missing $sym"
done <"$top_srcdir/c_api/leakcheck.sym"
[ -z "$missing" ] || fail "exported but not in leakcheck(3):$missing"

echo "ok   $how renders leakcheck(3); it declares all $(wc -l <"$top_srcdir/c_api/leakcheck.sym") exported functions"

# A page per name, each a link to leakcheck(3); man follows two of them.
missing=
for name in $(cat "$top_srcdir/c_api/leakcheck.sym") LEAK_SCOPE_BEGIN \
        LEAK_SCOPE_END LEAK_REPEAT LEAK_SCOPE_BEGIN_WITH LEAK_REPEAT_WITH; do
    [ "$(cat "${page%/leakcheck.3}/$name.3" 2>/dev/null)" = ".so man3/leakcheck.3" ] ||
        missing="$missing $name"
done
[ -z "$missing" ] || fail "no man3 link page to leakcheck(3) for:$missing"
if [ "$how" = "man 3 leakcheck" ]; then
    for name in lc_scope_new LEAK_REPEAT; do
        man 3 "$name" 2>&1 | head -n 1 | grep -q '^LEAKCHECK(3)' ||
            fail "man 3 $name does not open leakcheck(3)"
    done
fi
echo "ok   man 3 NAME opens leakcheck(3) for every exported function and test macro"
