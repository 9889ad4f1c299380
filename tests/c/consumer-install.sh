# Sourced by the consumer tests (tests/c/check-consumer*.sh): `make install`
# into a scratch DESTDIR, checked, with pkg-config pointed at that copy
# alone.  Sets tmp (removed on exit), root (the DESTDIR), prefix, libdir
# and includedir (as configured, without the DESTDIR), and exports
# PKG_CONFIG_SYSROOT_DIR and PKG_CONFIG_PATH.  LD_LIBRARY_PATH is unset: a
# consumer must find the installed copy by its own means.
: "${top_srcdir:?run through make check}" "${top_builddir:?}" "${MAKE:?}"
: "${PKG_CONFIG:=pkg-config}" "${CC:=cc}"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/leakcheck-consumer.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM
fail() { echo "FAIL: $*"; exit 1; }

# The project's own make flags (jobserver, -j) do not belong to consumers.
unset MAKEFLAGS MFLAGS MAKELEVEL LD_LIBRARY_PATH

root="$tmp/root"
(cd "$top_builddir" && $MAKE install DESTDIR="$root") \
    >"$tmp/install.log" 2>&1 || { cat "$tmp/install.log"; fail "make install"; }

pc=$(find "$root" -name leakcheck.pc | head -n 1)
[ -n "$pc" ] || fail "no leakcheck.pc installed"
# The directories as installed, without the DESTDIR: the .pc's own answer
# (asked before the sysroot is set: pkgconf would prefix them with it).
PKG_CONFIG_PATH=$(dirname "$pc")
export PKG_CONFIG_PATH
unset PKG_CONFIG_SYSROOT_DIR
prefix=$("$PKG_CONFIG" --variable=prefix leakcheck)
libdir=$("$PKG_CONFIG" --variable=libdir leakcheck)
includedir=$("$PKG_CONFIG" --variable=includedir leakcheck)
PKG_CONFIG_SYSROOT_DIR="$root"
export PKG_CONFIG_SYSROOT_DIR
[ "$(dirname "$pc")" = "$root$libdir/pkgconfig" ] ||
    fail "leakcheck.pc is at $pc, not under libdir $libdir"
[ -e "$root$libdir/libleakcheck.so" ] || fail "no libleakcheck.so in $libdir"
[ -e "$root$includedir/leakcheck.h" ] || fail "no leakcheck.h in $includedir"

# A copy of examples/check to build.
mkdir "$tmp/ex"
cp "$top_srcdir"/examples/check/*.[ch] "$top_srcdir"/examples/check/Makefile \
    "$top_srcdir"/examples/check/CMakeLists.txt "$tmp/ex/"

# lc_check_example DIR: DIR's test_fixed passes and test_leaky fails through
# Check with leakcheck's report naming native_bytes at the line of its
# LEAK_SCOPE_END; both load libleakcheck from the DESTDIR copy.
lc_check_example() {
    for t in test_fixed test_leaky; do
        ldd "$1/$t" >"$tmp/ldd.out" 2>&1 || { cat "$tmp/ldd.out"; fail "ldd $t"; }
        grep -q "libleakcheck\.so.* => $root$libdir/" "$tmp/ldd.out" ||
            { cat "$tmp/ldd.out"; fail "$t does not load libleakcheck from $root$libdir"; }
    done
    if "$1/test_fixed" >"$tmp/fixed.out" 2>&1; then
        echo "ok   test_fixed passes"
    else
        cat "$tmp/fixed.out"
        fail "test_fixed failed"
    fi
    if "$1/test_leaky" >"$tmp/leaky.out" 2>&1; then
        cat "$tmp/leaky.out"
        fail "test_leaky passed: the leak went unseen"
    fi
    cat "$tmp/leaky.out"
    line=$(grep -n 'LEAK_SCOPE_END' "$tmp/ex/test_tokenizer.c" | head -n 1 | cut -d: -f1)
    grep -q "test_tokenizer\.c:$line:F:[^:]*:test_unterminated_quote:[0-9]*: leakcheck: scope 'bad_quote' leaked" "$tmp/leaky.out" ||
        fail "no Check failure with leakcheck's report at test_tokenizer.c:$line (LEAK_SCOPE_END)"
    grep -A3 "test_tokenizer\.c:$line:F:" "$tmp/leaky.out" | grep -q '^ *native_bytes *grew by' ||
        fail "the report at test_tokenizer.c:$line does not say that native_bytes grew"
    echo "ok   test_leaky fails at test_tokenizer.c:$line (LEAK_SCOPE_END), native_bytes"
}
