#!/bin/sh
# leakcheck(3): `make install-man` puts it in share/man/man3, man(1) finds
# it there by name and renders it without a warning, and every function
# libleakcheck exports (c_api/leakcheck.sym) is declared in it.
set -eu
: "${top_srcdir:?run through make check}" "${top_builddir:?}" "${MAKE:?}"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/leakcheck-man.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM
fail() { echo "FAIL: $*"; exit 1; }
unset MAKEFLAGS MFLAGS MAKELEVEL

(cd "$top_builddir" && $MAKE install-man DESTDIR="$tmp/root") \
    >"$tmp/install.log" 2>&1 || { cat "$tmp/install.log"; fail "make install-man"; }
page=$(find "$tmp/root" -path '*/share/man/man3/leakcheck.3' | head -n 1)
[ -n "$page" ] || fail "no share/man/man3/leakcheck.3 installed"

if command -v man >/dev/null 2>&1; then
    MANPATH="${page%/man3/leakcheck.3}" MANWIDTH=80 MANPAGER=cat PAGER=cat \
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
