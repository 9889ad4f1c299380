#!/bin/sh
# CMake consumers of the installed library: examples/check built with its
# CMakeLists.txt against a scratch `make install` alone, once with
# find_package(leakcheck CONFIG) and once with pkg_check_modules(...
# IMPORTED_TARGET leakcheck).  The fixed twin must pass and the leaky one
# fail through Check with leakcheck's report; both run from the build tree
# without LD_LIBRARY_PATH (CMake links them with an rpath there).
set -eu
: "${CMAKE:=cmake}"
command -v "$CMAKE" >/dev/null 2>&1 ||
    { echo "SKIP: no cmake (scripts/setup installs it)"; exit 77; }
. "$top_srcdir/tests/c/consumer-install.sh"

# pkg-config's sysroot (how the autotools consumer reaches the DESTDIR copy)
# would also move Check's own directories, which CMake then refuses to
# import.  Check comes from the system here, and leakcheck not through
# pkg-config at all until the second project.
unset PKG_CONFIG_SYSROOT_DIR
PKG_CONFIG_PATH=
cfgdir="$root$libdir/cmake/leakcheck"
for f in leakcheckConfig.cmake leakcheckConfigVersion.cmake leakcheckTargets.cmake; do
    [ -f "$cfgdir/$f" ] || fail "no $f in $libdir/cmake/leakcheck"
done

# lc_cmake NAME ARGS...: configures and builds the example in $tmp/NAME.
lc_cmake() {
    name=$1
    shift
    "$CMAKE" -S "$tmp/ex" -B "$tmp/$name" -DCMAKE_C_COMPILER="${CC%% *}" \
        -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF "$@" >"$tmp/$name.log" 2>&1 ||
        { cat "$tmp/$name.log"; fail "cmake ($name)"; }
    "$CMAKE" --build "$tmp/$name" >>"$tmp/$name.log" 2>&1 ||
        { cat "$tmp/$name.log"; fail "cmake --build ($name)"; }
}

lc_cmake config -DCMAKE_PREFIX_PATH="$root$prefix"
grep -qx "leakcheck_DIR:PATH=$cfgdir" "$tmp/config/CMakeCache.txt" ||
    { grep leakcheck_DIR "$tmp/config/CMakeCache.txt"; fail "find_package did not take $cfgdir"; }
echo "ok   find_package(leakcheck 0.1 CONFIG) found $libdir/cmake/leakcheck"
lc_check_example "$tmp/config"
# The example's own CTest: fixed passes, leaky is expected to fail.
(cd "$tmp/config" && "${CMAKE%cmake}ctest" --output-on-failure) >"$tmp/ctest.log" 2>&1 ||
    { cat "$tmp/ctest.log"; fail "ctest in the example"; }
grep -q "100% tests passed.* out of 2$" "$tmp/ctest.log" ||
    { cat "$tmp/ctest.log"; fail "ctest did not run the example's two tests"; }
echo "ok   ctest: fixed passes, leaky fails as expected"

# The version file refuses what this build cannot answer.
mkdir "$tmp/ver"
cat >"$tmp/ver/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.14)
project(ver NONE)
find_package(leakcheck ${WANT} CONFIG)
message(STATUS "leakcheck ${WANT}: found=${leakcheck_FOUND}")
CMAKE
for want in 0.1 0.0 0.2 1.0; do
    "$CMAKE" -S "$tmp/ver" -B "$tmp/ver/b-$want" -DWANT="$want" \
        -DCMAKE_PREFIX_PATH="$root$prefix" >"$tmp/ver.log" 2>&1 ||
        { cat "$tmp/ver.log"; fail "cmake (version $want)"; }
    case "$want" in 0.1) expect=1 ;; *) expect=0 ;; esac
    grep -q "leakcheck $want: found=$expect" "$tmp/ver.log" ||
        { cat "$tmp/ver.log"; fail "find_package(leakcheck $want): expected found=$expect"; }
done
echo "ok   version 0.1 accepted; 0.0, 0.2 and 1.0 refused"

# Without a sysroot, this consumer reads the installed leakcheck.pc with its
# prefix set to where the DESTDIR put it, as configure --prefix would have
# written it; its other directories follow ${prefix}.
mkdir "$tmp/pc"
sed "s|^prefix=.*|prefix=$root$prefix|" "$root$libdir/pkgconfig/leakcheck.pc" \
    >"$tmp/pc/leakcheck.pc"
PKG_CONFIG_PATH="$tmp/pc"
[ "$("$PKG_CONFIG" --variable=libdir leakcheck)" = "$root$libdir" ] ||
    fail "leakcheck.pc's libdir does not follow its prefix"
lc_cmake pkgconfig -DLEAKCHECK_PKG_CONFIG=ON
grep -q "^LEAKCHECK_INCLUDEDIR:INTERNAL=$root$includedir\$" "$tmp/pkgconfig/CMakeCache.txt" ||
    { grep '^LEAKCHECK_' "$tmp/pkgconfig/CMakeCache.txt"; fail "pkg_check_modules did not take the installed copy"; }
echo "ok   pkg_check_modules(LEAKCHECK IMPORTED_TARGET leakcheck) found the installed copy"
lc_check_example "$tmp/pkgconfig"
