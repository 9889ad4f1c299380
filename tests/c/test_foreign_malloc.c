/*
 * test_foreign_malloc.c — native_bytes when malloc is not glibc's and no
 * counter of its own can be read: this program brings its own malloc (a
 * bump allocator that never reuses memory, as an LD_PRELOAD'ed jemalloc or
 * tcmalloc would replace glibc's), so glibc's mallinfo2 stands still
 * whatever leaks.  The probe must then say "unavailable" and why, never
 * read a flat zero; a scope still judges the other probes.
 *
 * Prints one line per check and "N passed, N failed" last.
 */
#define _GNU_SOURCE
#include <leakcheck.h>

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* ---- the allocator: every block has its size in the 16 bytes before it */

#define ARENA_SIZE (256u << 20)
static char *arena;
static size_t used;                 /* atomically bumped */

static void *
bump(size_t size, size_t align)
{
    size_t start, need;

    if (arena == NULL) {
        void *p = mmap(NULL, ARENA_SIZE, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p == MAP_FAILED)
            return NULL;
        if (!__atomic_compare_exchange_n(&arena, &(char *){NULL}, p, 0,
                                         __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
            munmap(p, ARENA_SIZE);
    }
    if (align < 16)
        align = 16;
    need = size + align + 16;
    start = __atomic_fetch_add(&used, (need + 15) & ~(size_t)15,
                               __ATOMIC_SEQ_CST);
    if (start + need > ARENA_SIZE) {
        errno = ENOMEM;
        return NULL;
    }
    {
        uintptr_t p = (uintptr_t)arena + start + 16;
        p = (p + align - 1) & ~(uintptr_t)(align - 1);
        ((size_t *)p)[-1] = size;
        return (void *)p;
    }
}

void *malloc(size_t size) { return bump(size, 16); }
void free(void *p) { (void)p; }
void *calloc(size_t n, size_t size)
{
    /* Fresh mapped memory is zero, and nothing is ever reused. */
    return n && size > SIZE_MAX / n ? NULL : bump(n * size, 16);
}
void *realloc(void *old, size_t size)
{
    void *p = bump(size, 16);

    if (p != NULL && old != NULL) {
        size_t was = ((size_t *)old)[-1];
        memcpy(p, old, was < size ? was : size);
    }
    return p;
}
void *memalign(size_t align, size_t size) { return bump(size, align); }
void *aligned_alloc(size_t align, size_t size) { return bump(size, align); }
int posix_memalign(void **out, size_t align, size_t size)
{
    *out = bump(size, align);
    return *out ? 0 : ENOMEM;
}
void *valloc(size_t size) { return bump(size, 4096); }
size_t malloc_usable_size(void *p) { return p ? ((size_t *)p)[-1] : 0; }

/* ---- the checks --------------------------------------------------------- */

static int n_passed, n_failed;

static void
expect(int ok, const char *what, const char *detail)
{
    printf("%s %s%s%s\n", ok ? "ok  " : "FAIL", what, detail ? ": " : "",
           detail ? detail : "");
    if (ok)
        n_passed++;
    else
        n_failed++;
}

void *lc_test_kept;

static void
failed(const char *file, int line, const char *report, void *arg)
{
    (void)file;
    (void)line;
    snprintf(arg, LC_REPORT_MAX, "%s", report);
}

int
main(void)
{
    static char report[LC_REPORT_MAX];
    lc_probe_info info;
    int fd;

    lc_probe_get_info(LC_PROBE_NATIVE_BYTES, &info);
    expect(!info.available && info.reason != NULL &&
           strstr(info.reason, "malloc is neither glibc's") != NULL,
           "native_bytes is unavailable under a malloc of the program's own",
           info.reason ? info.reason : "(no reason)");
    expect(!(lc_probes_available() & LC_PROBE_BIT(LC_PROBE_NATIVE_BYTES)),
           "lc_probes_available() leaves native_bytes out", NULL);

    /* The scope still reads what it can: an fd leak fails it, and the
     * report names native_bytes as not read rather than +0. */
    lc_set_failure_handler(failed, report);
    {
        LEAK_SCOPE_BEGIN(s);
        lc_test_kept = malloc(4096);
        fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
        LEAK_SCOPE_END(s);
    }
    expect(strstr(report, "fds          grew by +1") != NULL &&
           strstr(report, "native_bytes") == NULL,
           "a scope judges the other probes (fds +1) and reports no "
           "native_bytes reading", report);
    close(fd);
    printf("%d passed, %d failed\n", n_passed, n_failed);
    return n_failed == 0 && n_passed > 0 ? 0 : 1;
}
