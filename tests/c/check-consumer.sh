#!/bin/sh
# A consumer of the installed library: `make install` into a scratch
# DESTDIR, then examples/check built through pkg-config against that copy
# alone (its Makefile, with pkg-config pointed into the DESTDIR) and run.
# The fixed twin must pass; the leaky one must fail through Check, with
# leakcheck's report naming native_bytes at the line of its LEAK_SCOPE_END.
set -eu
: "${top_srcdir:?run through make check}" "${top_builddir:?}" "${MAKE:?}"
: "${PKG_CONFIG:=pkg-config}" "${CC:=cc}"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/leakcheck-consumer.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM
fail() { echo "FAIL: $*"; exit 1; }

# The project's own make flags (jobserver, -j) do not belong to the example.
unset MAKEFLAGS MFLAGS MAKELEVEL

(cd "$top_builddir" && $MAKE install DESTDIR="$tmp/root") \
    >"$tmp/install.log" 2>&1 || { cat "$tmp/install.log"; fail "make install"; }

pc=$(find "$tmp/root" -name leakcheck.pc | head -n 1)
[ -n "$pc" ] || fail "no leakcheck.pc installed"
# libdir as installed, without the DESTDIR: the .pc's own answer.
libdir=$(PKG_CONFIG_PATH=$(dirname "$pc") "$PKG_CONFIG" --variable=libdir leakcheck)
[ "$(dirname "$pc")" = "$tmp/root$libdir/pkgconfig" ] ||
    fail "leakcheck.pc is at $pc, not under libdir $libdir"
[ -e "$tmp/root$libdir/libleakcheck.so" ] || fail "no libleakcheck.so in $libdir"

PKG_CONFIG_SYSROOT_DIR="$tmp/root"
PKG_CONFIG_PATH="$tmp/root$libdir/pkgconfig"
export PKG_CONFIG_SYSROOT_DIR PKG_CONFIG_PATH
flags=$("$PKG_CONFIG" --cflags --libs leakcheck check) || fail "pkg-config"
echo "pkg-config --cflags --libs leakcheck check: $flags"
case "$flags" in
*"-I$tmp/root"*"-L$tmp/root$libdir"*) ;;
*) fail "the flags do not point into the installed copy" ;;
esac

mkdir "$tmp/ex"
cp "$top_srcdir"/examples/check/*.[ch] "$top_srcdir"/examples/check/Makefile \
    "$tmp/ex/"
$MAKE -C "$tmp/ex" CC="$CC" PKG_CONFIG="$PKG_CONFIG" test_leaky test_fixed ||
    fail "building examples/check"

LD_LIBRARY_PATH="$tmp/root$libdir"
export LD_LIBRARY_PATH
cd "$tmp/ex"

if ./test_fixed >fixed.out 2>&1; then
    echo "ok   test_fixed passes"
else
    cat fixed.out
    fail "test_fixed failed"
fi

if ./test_leaky >leaky.out 2>&1; then
    cat leaky.out
    fail "test_leaky passed: the leak went unseen"
fi
cat leaky.out
line=$(grep -n 'LEAK_SCOPE_END' test_tokenizer.c | head -n 1 | cut -d: -f1)
grep -q "test_tokenizer\.c:$line:F:[^:]*:test_unterminated_quote:[0-9]*: leakcheck: scope 'bad_quote' leaked" leaky.out ||
    fail "no Check failure with leakcheck's report at test_tokenizer.c:$line (LEAK_SCOPE_END)"
grep -A3 "test_tokenizer\.c:$line:F:" leaky.out | grep -q '^ *native_bytes *grew by' ||
    fail "the report at test_tokenizer.c:$line does not say that native_bytes grew"
echo "ok   test_leaky fails at test_tokenizer.c:$line (LEAK_SCOPE_END), native_bytes"
