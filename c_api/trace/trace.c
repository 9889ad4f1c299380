/*
 * trace.c — libleakcheck-trace.so, the allocation tracer of a plain glibc
 * process.  Loaded with LD_PRELOAD, it takes the place of malloc, calloc,
 * realloc, free, posix_memalign, aligned_alloc, memalign, valloc and
 * pvalloc, and forwards each to glibc's own (__libc_malloc, ...), so that
 * glibc's numbers (mallinfo2, which native_bytes reads) stay as they are.
 *
 * It records nothing until the engine asks: a scope or series that the
 * test macros open sets the table's state (sitetab.h), found through
 * lc_trace_table_v1() with dlsym, and while it records, every block
 * allocated gets a slot with its size and its call stack (glibc's
 * backtrace(), primed at load so that it does not allocate in malloc).  At
 * the report, lc_trace_describe_v1() names a frame through elfutils' libdw
 * (file:line and function), or dladdr without it.
 *
 * While it records, it also keeps the stack of each call that made a
 * descriptor (open, socket, pipe, dup, ... and the stdio and dirent calls
 * whose open glibc makes internally, past any interposition), by number,
 * and forgets it when the descriptor is closed: lc_trace_fds_v1() hands
 * the engine those slots (sitetab.h), and a leaked descriptor's report
 * names the line that opened it.  Each is forwarded to the next definition
 * (glibc's), found with dlsym(RTLD_NEXT).
 *
 * It refuses to record, and says why in the table, where its malloc is not
 * the one the process calls (valgrind's replacement, a sanitizer's, an
 * allocator linked into the program) rather than record nothing.
 */
#define _GNU_SOURCE
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif
/* The descriptor functions are defined here under their own names, not
 * the fortified or 64-bit-offset redirections of the headers. */
#undef _FORTIFY_SOURCE
#undef _FILE_OFFSET_BITS

#include "sitetab.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <execinfo.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/mman.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <unistd.h>

#ifdef HAVE_VALGRIND_MEMCHECK_H
#include <valgrind/valgrind.h>
#endif
#ifdef HAVE_LIBDW
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#endif

#define EXPORT __attribute__((visibility("default")))

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void __libc_free(void *);
extern void *__libc_memalign(size_t, size_t);
extern void *__libc_valloc(size_t);
extern void *__libc_pvalloc(size_t);

static lc__site_table table;
static int primed;                      /* backtrace() has loaded libgcc_s */

/* Set while this thread is inside the tracer: a malloc that the tracer
 * itself causes (or a signal handler's, meanwhile) is only forwarded. */
static __thread int busy __attribute__((tls_model("initial-exec")));

/* Frames of the tracer itself at the top of a backtrace: record() and the
 * allocation function that called it. */
#define OWN_FRAMES 2

static void __attribute__((noinline))
record(void *p, size_t size)
{
    void *frames[LC__SITE_FRAMES + OWN_FRAMES];
    lc__site_slot *s;
    int n, i;

    if (p == NULL || !primed || busy ||
        atomic_load_explicit(&table.state, memory_order_relaxed) !=
            LC__SITES_ALL)
        return;
    busy = 1;
    s = lc__sitetab_claim(&table, (uintptr_t)p);
    if (s != NULL) {
        n = backtrace(frames, (int)LC__SITE_FRAMES + OWN_FRAMES);
        for (i = 0; i < LC__SITE_FRAMES; i++)
            s->pc[i] = i + OWN_FRAMES < n ? frames[i + OWN_FRAMES] : NULL;
        s->size = size;
        lc__sitetab_publish(s, (uintptr_t)p);
    }
    busy = 0;
}

/* Not skipped when busy: removing is safe at any point (a signal handler
 * that frees a recorded block while this thread records must not leave it
 * in the table). */
static void
forget(void *p)
{
    lc__sitetab_freed(&table, p);
}

EXPORT void *
malloc(size_t size)
{
    void *p = __libc_malloc(size);

    record(p, size);
    return p;
}

EXPORT void *
calloc(size_t n, size_t size)
{
    void *p = __libc_calloc(n, size);

    record(p, n * size);
    return p;
}

EXPORT void *
realloc(void *old, size_t size)
{
    void *p;

    /* Forgotten first: once glibc has it back it may hand it out again. */
    if (old != NULL)
        forget(old);
    p = __libc_realloc(old, size);
    if (p == NULL && size != 0 && old != NULL) {
        /* The old block is still there, and no longer known: it was
         * allocated while recording or before, and neither is a site. */
        return NULL;
    }
    record(p, size);
    return p;
}

EXPORT void
free(void *p)
{
    forget(p);
    __libc_free(p);
}

EXPORT void *
memalign(size_t align, size_t size)
{
    void *p = __libc_memalign(align, size);

    record(p, size);
    return p;
}

EXPORT void *
aligned_alloc(size_t align, size_t size)
{
    void *p = __libc_memalign(align, size);

    record(p, size);
    return p;
}

EXPORT int
posix_memalign(void **out, size_t align, size_t size)
{
    void *p;

    if (align % sizeof(void *) != 0 || (align & (align - 1)) != 0)
        return EINVAL;
    p = __libc_memalign(align, size);
    if (p == NULL)
        return ENOMEM;
    record(p, size);
    *out = p;
    return 0;
}

EXPORT void *
valloc(size_t size)
{
    void *p = __libc_valloc(size);

    record(p, size);
    return p;
}

EXPORT void *
pvalloc(size_t size)
{
    void *p = __libc_pvalloc(size);

    record(p, size);
    return p;
}

/* ---- descriptors ------------------------------------------------------ */

static lc__fd_slot *fd_slots;

/* glibc's fortified opens, declared by its headers only under
 * _FORTIFY_SOURCE. */
extern int __open_2(const char *, int);
extern int __open64_2(const char *, int);
extern int __openat_2(int, const char *, int);
extern int __openat64_2(int, const char *, int);

/* Each function's next definition, resolved at load (or at the first call,
 * for a call made before the tracer's constructor ran). */
#define NEXT_FUNCTIONS(X)                                                    \
    X(open) X(open64) X(openat) X(openat64) X(__open_2) X(__open64_2)        \
    X(__openat_2) X(__openat64_2) X(creat) X(creat64) X(socket)              \
    X(socketpair) X(accept) X(accept4) X(pipe) X(pipe2) X(dup) X(dup2)       \
    X(dup3) X(fcntl) X(fcntl64) X(eventfd) X(timerfd_create) X(signalfd)     \
    X(epoll_create) X(epoll_create1) X(memfd_create) X(inotify_init)         \
    X(inotify_init1) X(fopen) X(fopen64) X(freopen) X(freopen64)            \
    X(tmpfile) X(tmpfile64) X(mkstemp) X(mkostemp) X(popen) X(opendir)       \
    X(close) X(close_range) X(closefrom) X(fclose) X(pclose) X(closedir)

#define DECLARE_NEXT(name) static __typeof__(name) *next_##name;
NEXT_FUNCTIONS(DECLARE_NEXT)

static void *
next_symbol(void **slot, const char *name)
{
    void *p = __atomic_load_n(slot, __ATOMIC_RELAXED);

    if (p == NULL) {
        busy++;
        p = dlsym(RTLD_NEXT, name);
        busy--;
        __atomic_store_n(slot, p, __ATOMIC_RELAXED);
    }
    return p;
}

#define NEXT(name) \
    ((__typeof__(next_##name))next_symbol((void **)&next_##name, #name))

static void
resolve_all(void)
{
#define RESOLVE_NEXT(name) (void)NEXT(name);
    NEXT_FUNCTIONS(RESOLVE_NEXT)
}

/* Keeps the stack of the call that made descriptor fd. */
static void __attribute__((noinline))
record_fd(int fd)
{
    void *frames[LC__SITE_FRAMES + OWN_FRAMES];
    lc__fd_slot *s;
    int n, i, saved;

    if (fd < 0 || fd_slots == NULL || !primed || busy ||
        atomic_load_explicit(&table.state, memory_order_relaxed) !=
            LC__SITES_ALL)
        return;
    saved = errno;
    busy = 1;
    s = lc__fdtab_claim(fd_slots, fd);
    if (s != NULL) {
        n = backtrace(frames, (int)LC__SITE_FRAMES + OWN_FRAMES);
        for (i = 0; i < LC__SITE_FRAMES; i++)
            s->pc[i] = i + OWN_FRAMES < n ? frames[i + OWN_FRAMES] : NULL;
        lc__fdtab_publish(s);
    }
    busy = 0;
    errno = saved;
}

static int
recorded(int fd)
{
    record_fd(fd);
    return fd;
}

static void
forget_fd(int fd)
{
    lc__fdtab_closed(fd_slots, fd);
}

/* The descriptor of a stream or directory, -1 for none (errno kept). */
static int
stream_fd(FILE *f)
{
    int saved = errno, fd = f != NULL ? fileno(f) : -1;

    errno = saved;
    return fd;
}

static FILE *
recorded_stream(FILE *f)
{
    record_fd(stream_fd(f));
    return f;
}

/* The mode argument of an open that creates. */
#ifdef __OPEN_NEEDS_MODE
#define NEEDS_MODE(flags) __OPEN_NEEDS_MODE(flags)
#else
#define NEEDS_MODE(flags) (((flags) & O_CREAT) != 0)
#endif
#define OPEN_MODE(flags, mode)                                               \
    do {                                                                     \
        if (NEEDS_MODE(flags)) {                                             \
            va_list ap;                                                      \
            va_start(ap, flags);                                             \
            mode = (mode_t)va_arg(ap, int);                                  \
            va_end(ap);                                                      \
        }                                                                    \
    } while (0)

EXPORT int
open(const char *path, int flags, ...)
{
    mode_t mode = 0;

    OPEN_MODE(flags, mode);
    return recorded(NEXT(open)(path, flags, mode));
}

EXPORT int
open64(const char *path, int flags, ...)
{
    mode_t mode = 0;

    OPEN_MODE(flags, mode);
    return recorded(NEXT(open64)(path, flags, mode));
}

EXPORT int
openat(int dir, const char *path, int flags, ...)
{
    mode_t mode = 0;

    OPEN_MODE(flags, mode);
    return recorded(NEXT(openat)(dir, path, flags, mode));
}

EXPORT int
openat64(int dir, const char *path, int flags, ...)
{
    mode_t mode = 0;

    OPEN_MODE(flags, mode);
    return recorded(NEXT(openat64)(dir, path, flags, mode));
}

/* The fortified opens (-D_FORTIFY_SOURCE, flags not known at compile
 * time). */
EXPORT int
__open_2(const char *path, int flags)
{
    return recorded(NEXT(__open_2)(path, flags));
}

EXPORT int
__open64_2(const char *path, int flags)
{
    return recorded(NEXT(__open64_2)(path, flags));
}

EXPORT int
__openat_2(int dir, const char *path, int flags)
{
    return recorded(NEXT(__openat_2)(dir, path, flags));
}

EXPORT int
__openat64_2(int dir, const char *path, int flags)
{
    return recorded(NEXT(__openat64_2)(dir, path, flags));
}

EXPORT int
creat(const char *path, mode_t mode)
{
    return recorded(NEXT(creat)(path, mode));
}

EXPORT int
creat64(const char *path, mode_t mode)
{
    return recorded(NEXT(creat64)(path, mode));
}

EXPORT int
socket(int domain, int type, int protocol)
{
    return recorded(NEXT(socket)(domain, type, protocol));
}

EXPORT int
socketpair(int domain, int type, int protocol, int sv[2])
{
    int rc = NEXT(socketpair)(domain, type, protocol, sv);

    if (rc == 0) {
        record_fd(sv[0]);
        record_fd(sv[1]);
    }
    return rc;
}

EXPORT int
accept(int fd, __SOCKADDR_ARG addr, socklen_t *__restrict len)
{
    return recorded(NEXT(accept)(fd, addr, len));
}

EXPORT int
accept4(int fd, __SOCKADDR_ARG addr, socklen_t *__restrict len, int flags)
{
    return recorded(NEXT(accept4)(fd, addr, len, flags));
}

EXPORT int
pipe(int fds[2])
{
    int rc = NEXT(pipe)(fds);

    if (rc == 0) {
        record_fd(fds[0]);
        record_fd(fds[1]);
    }
    return rc;
}

EXPORT int
pipe2(int fds[2], int flags)
{
    int rc = NEXT(pipe2)(fds, flags);

    if (rc == 0) {
        record_fd(fds[0]);
        record_fd(fds[1]);
    }
    return rc;
}

EXPORT int
dup(int fd)
{
    return recorded(NEXT(dup)(fd));
}

/* A dup2 or dup3 over an open descriptor closes it first. */
EXPORT int
dup2(int fd, int to)
{
    if (fd == to)
        return NEXT(dup2)(fd, to);
    forget_fd(to);
    return recorded(NEXT(dup2)(fd, to));
}

EXPORT int
dup3(int fd, int to, int flags)
{
    if (fd != to)
        forget_fd(to);
    return recorded(NEXT(dup3)(fd, to, flags));
}

/* fcntl's third argument is an int or a pointer: forwarded as a pointer,
 * as glibc reads it. */
/* What fcntl returned: a new descriptor when `cmd` duplicates. */
static int
fcntl_done(int cmd, int rc)
{
    if (cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC)
        record_fd(rc);
    return rc;
}

EXPORT int
fcntl(int fd, int cmd, ...)
{
    va_list ap;
    void *arg;

    va_start(ap, cmd);
    arg = va_arg(ap, void *);
    va_end(ap);
    return fcntl_done(cmd, NEXT(fcntl)(fd, cmd, arg));
}

EXPORT int
fcntl64(int fd, int cmd, ...)
{
    va_list ap;
    void *arg;

    va_start(ap, cmd);
    arg = va_arg(ap, void *);
    va_end(ap);
    return fcntl_done(cmd, NEXT(fcntl64)(fd, cmd, arg));
}

EXPORT int
eventfd(unsigned int count, int flags)
{
    return recorded(NEXT(eventfd)(count, flags));
}

EXPORT int
timerfd_create(int clock, int flags)
{
    return recorded(NEXT(timerfd_create)(clock, flags));
}

/* Makes a descriptor only when fd is -1 (else changes fd's mask). */
EXPORT int
signalfd(int fd, const sigset_t *mask, int flags)
{
    int rc = NEXT(signalfd)(fd, mask, flags);

    if (fd == -1)
        record_fd(rc);
    return rc;
}

EXPORT int
epoll_create(int size)
{
    return recorded(NEXT(epoll_create)(size));
}

EXPORT int
epoll_create1(int flags)
{
    return recorded(NEXT(epoll_create1)(flags));
}

EXPORT int
memfd_create(const char *name, unsigned int flags)
{
    return recorded(NEXT(memfd_create)(name, flags));
}

EXPORT int
inotify_init(void)
{
    return recorded(NEXT(inotify_init)());
}

EXPORT int
inotify_init1(int flags)
{
    return recorded(NEXT(inotify_init1)(flags));
}

EXPORT int
mkstemp(char *template)
{
    return recorded(NEXT(mkstemp)(template));
}

EXPORT int
mkostemp(char *template, int flags)
{
    return recorded(NEXT(mkostemp)(template, flags));
}

/* glibc's stdio and dirent open and close through its internal entry
 * points, which no interposition sees: their own wrappers. */
EXPORT FILE *
fopen(const char *path, const char *mode)
{
    return recorded_stream(NEXT(fopen)(path, mode));
}

EXPORT FILE *
fopen64(const char *path, const char *mode)
{
    return recorded_stream(NEXT(fopen64)(path, mode));
}

EXPORT FILE *
freopen(const char *path, const char *mode, FILE *f)
{
    forget_fd(stream_fd(f));
    return recorded_stream(NEXT(freopen)(path, mode, f));
}

EXPORT FILE *
freopen64(const char *path, const char *mode, FILE *f)
{
    forget_fd(stream_fd(f));
    return recorded_stream(NEXT(freopen64)(path, mode, f));
}

EXPORT FILE *
tmpfile(void)
{
    return recorded_stream(NEXT(tmpfile)());
}

EXPORT FILE *
tmpfile64(void)
{
    return recorded_stream(NEXT(tmpfile64)());
}

EXPORT FILE *
popen(const char *command, const char *mode)
{
    return recorded_stream(NEXT(popen)(command, mode));
}

EXPORT DIR *
opendir(const char *path)
{
    DIR *d = NEXT(opendir)(path);

    if (d != NULL) {
        int saved = errno;
        record_fd(dirfd(d));
        errno = saved;
    }
    return d;
}

/* Forgotten before the number is given back, as free() forgets a block. */
EXPORT int
close(int fd)
{
    forget_fd(fd);
    return NEXT(close)(fd);
}

EXPORT int
close_range(unsigned int first, unsigned int last, int flags)
{
    unsigned int fd;

    if (!(flags & CLOSE_RANGE_CLOEXEC))
        for (fd = first; fd <= last && fd < LC__FD_SLOTS; fd++)
            forget_fd((int)fd);
    return NEXT(close_range)(first, last, flags);
}

EXPORT void
closefrom(int first)
{
    int fd;

    for (fd = first < 0 ? 0 : first; fd < (int)LC__FD_SLOTS; fd++)
        forget_fd(fd);
    NEXT(closefrom)(first);
}

EXPORT int
fclose(FILE *f)
{
    forget_fd(stream_fd(f));
    return NEXT(fclose)(f);
}

EXPORT int
pclose(FILE *f)
{
    forget_fd(stream_fd(f));
    return NEXT(pclose)(f);
}

EXPORT int
closedir(DIR *d)
{
    int saved = errno;

    forget_fd(dirfd(d));
    errno = saved;
    return NEXT(closedir)(d);
}

/* Why this process's malloc is not the tracer's, or NULL when it is. */
static const char *
refusal(void)
{
    const char *preload = getenv("LD_PRELOAD");
    void *found = dlsym(RTLD_DEFAULT, "malloc");
    Dl_info theirs, ours;

#ifdef HAVE_VALGRIND_MEMCHECK_H
    if (RUNNING_ON_VALGRIND)
        preload = "vgpreload";
#endif
    if (preload != NULL && strstr(preload, "vgpreload") != NULL)
        return "the process runs under valgrind, whose malloc replaces "
               "the tracer's: memcheck's loss records (valgrind's output) "
               "name the allocating lines";
    if (dlsym(RTLD_DEFAULT, "__asan_init") != NULL ||
        dlsym(RTLD_DEFAULT, "__sanitizer_install_malloc_and_free_hooks"))
        return "a sanitizer's malloc serves this process; leakcheck reads "
               "the allocating lines from the sanitizer itself";
    if (found == NULL || dladdr(found, &theirs) == 0 ||
        dladdr((void *)refusal, &ours) == 0 ||
        theirs.dli_fbase != ours.dli_fbase)
        return "another malloc than the tracer's serves this process (one "
               "linked into the program, or preloaded before it)";
    return NULL;
}

__attribute__((constructor)) static void
trace_init(void)
{
    void *frames[4];

    table.unavailable = refusal();
    if (table.unavailable != NULL)
        return;
    /* The first backtrace() loads the unwinder with dlopen, which
     * allocates: done here, once, not inside a malloc. */
    busy = 1;
    backtrace(frames, 4);
    busy = 0;
    if (lc__sitetab_map(&table) != 0) {
        table.unavailable = "the tracer could not map its table of blocks";
        return;
    }
    resolve_all();
    fd_slots = lc__fdtab_map();
    primed = 1;
}

/* The engine's entry point: the table, whose state it sets and whose
 * slots it reads.  Versioned: a tracer and engine of different layouts do
 * not find each other. */
EXPORT lc__site_table *
lc_trace_table_v1(void)
{
    return &table;
}

/* The slots of the descriptors opened while recording (sitetab.h), or NULL
 * where the tracer records nothing. */
EXPORT lc__fd_slot *
lc_trace_fds_v1(void)
{
    return table.unavailable == NULL ? fd_slots : NULL;
}

static const char *
base_name(const char *path)
{
    const char *slash = path ? strrchr(path, '/') : NULL;

    return slash ? slash + 1 : path;
}

#ifdef HAVE_LIBDW
/* The function the code at addr belongs to, the innermost inlined one
 * first (a helper inlined into its caller is still named), else the
 * symbol table's. */
static const char *
innermost_function(Dwfl_Module *mod, uintptr_t addr)
{
    Dwarf_Addr bias = 0;
    Dwarf_Die *cu = dwfl_module_addrdie(mod, addr, &bias);
    Dwarf_Die *scopes = NULL;
    const char *name = NULL;
    int n, i;

    if (cu != NULL && (n = dwarf_getscopes(cu, addr - bias, &scopes)) > 0) {
        for (i = 0; i < n && name == NULL; i++) {
            int tag = dwarf_tag(&scopes[i]);
            if (tag == DW_TAG_subprogram || tag == DW_TAG_inlined_subroutine)
                name = dwarf_diename(&scopes[i]);
        }
        free(scopes);
    }
    return name ? name : dwfl_module_addrname(mod, addr);
}
#endif

#ifdef HAVE_LIBDW
/* The modules of this process as libdw reads them, for one report: made by
 * the first lc_trace_describe_v1() call after the last release. */
static Dwfl *session;

static Dwfl *
session_open(void)
{
    static const Dwfl_Callbacks callbacks = {
        .find_elf = dwfl_linux_proc_find_elf,
        .find_debuginfo = dwfl_standard_find_debuginfo,
    };

    if (session == NULL) {
        session = dwfl_begin(&callbacks);
        if (session != NULL &&
            (dwfl_linux_proc_report(session, getpid()) != 0 ||
             dwfl_report_end(session, NULL, NULL) != 0)) {
            dwfl_end(session);
            session = NULL;
        }
    }
    return session;
}

static int
system_header(const char *file)
{
    return file != NULL && strncmp(file, "/usr/include/", 13) == 0;
}

/* Where code inlined from a system header's wrapper (glibc's fortified
 * open, read, ...) was called: moves *file, *line and *func out to the
 * call of the outermost such wrapper, in the code that called it. */
static void
past_header_wrappers(Dwfl_Module *mod, uintptr_t addr, const char **file,
                     int *line, const char **func)
{
    Dwarf_Addr bias = 0;
    Dwarf_Die *cu = dwfl_module_addrdie(mod, addr, &bias);
    Dwarf_Die *scopes = NULL, *outer = NULL;
    Dwarf_Files *files;
    size_t nfiles;
    int n, m, i, j;

    if (cu == NULL || dwarf_getsrcfiles(cu, &files, &nfiles) != 0 ||
        (n = dwarf_getscopes(cu, addr - bias, &scopes)) <= 0)
        return;
    for (i = 0; i < n && system_header(*file); i++) {
        Dwarf_Attribute at;
        Dwarf_Word index, call_line;
        const char *call_file;

        if (dwarf_tag(&scopes[i]) != DW_TAG_inlined_subroutine)
            continue;
        if (dwarf_formudata(dwarf_attr(&scopes[i], DW_AT_call_file, &at),
                            &index) != 0 ||
            dwarf_formudata(dwarf_attr(&scopes[i], DW_AT_call_line, &at),
                            &call_line) != 0 ||
            (call_file = dwarf_filesrc(files, index, NULL, NULL)) == NULL)
            break;
        *file = call_file;
        *line = (int)call_line;
        /* The function it was inlined into: in the scopes that contain
         * this instance (the ones after it in `scopes` are those of the
         * wrapper's own definition). */
        m = dwarf_getscopes_die(&scopes[i], &outer);
        for (j = 1; j < m; j++) {
            int tag = dwarf_tag(&outer[j]);
            if ((tag == DW_TAG_subprogram ||
                 tag == DW_TAG_inlined_subroutine) &&
                dwarf_diename(&outer[j]) != NULL) {
                *func = dwarf_diename(&outer[j]);
                break;
            }
        }
        free(outer);
        outer = NULL;
    }
    free(scopes);
}

/* "file.c:LINE function()" or "function() in object" from the debug
 * information and symbol table; 1, 0, or -1 when libdw knows nothing. */
static int
describe_dwfl(uintptr_t addr, char *buf, size_t size)
{
    Dwfl *dwfl = session_open();
    Dwfl_Module *mod = dwfl ? dwfl_addrmodule(dwfl, addr) : NULL;
    Dwfl_Line *line;
    const char *file = NULL, *func;
    int lineno = 0;

    if (mod == NULL)
        return -1;
    func = innermost_function(mod, addr);
    line = dwfl_module_getsrc(mod, addr);
    if (line != NULL)
        file = dwfl_lineinfo(line, NULL, &lineno, NULL, NULL, NULL);
    if (system_header(file))
        past_header_wrappers(mod, addr, &file, &lineno, &func);
    if (file != NULL && lineno > 0) {
        snprintf(buf, size, "%s:%d %s()", base_name(file), lineno,
                 func ? func : "?");
        return 1;
    }
    if (func != NULL) {
        const char *mname = dwfl_module_info(mod, NULL, NULL, NULL, NULL,
                                             NULL, NULL, NULL);
        snprintf(buf, size, "%s() in %s", func, base_name(mname));
        return 0;
    }
    return -1;
}
#endif

/*
 * Names the call at return address `pc` into buf: "file.c:LINE function()"
 * when the debug information has its line, else "function() in object".
 * Returns 1 with a line, 0 without (no debug information), 2 without
 * because this tracer was built without libdw, -1 when nothing is known.
 * Called at
 * report time only, with recording off; a NULL pc ends the report (frees
 * what the calls before read about the process's modules).
 */
EXPORT int
lc_trace_describe_v1(const void *pc, char *buf, size_t size)
{
    uintptr_t addr = (uintptr_t)pc - 1;     /* inside the call instruction */
    Dl_info info;
    int found = -1;

    busy++;
    if (pc == NULL) {
#ifdef HAVE_LIBDW
        if (session != NULL)
            dwfl_end(session);
        session = NULL;
#endif
        busy--;
        return -1;
    }
#ifdef HAVE_LIBDW
    found = describe_dwfl(addr, buf, size);
#endif
    if (found < 0 && dladdr((void *)addr, &info) != 0) {
        const char *object = base_name(info.dli_fname);
        if (info.dli_sname != NULL)
            snprintf(buf, size, "%s() in %s", info.dli_sname, object);
        else
            snprintf(buf, size, "%s+%#lx", object,
                     (unsigned long)(addr - (uintptr_t)info.dli_fbase));
#ifdef HAVE_LIBDW
        found = 0;
#else
        found = 2;
#endif
    }
    busy--;
    return found;
}
