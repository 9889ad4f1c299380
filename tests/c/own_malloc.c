/*
 * own_malloc.c — a malloc of the program's own (it forwards to glibc's), for
 * test_sites_own: where the program's malloc is not the tracer's, the
 * preloaded tracer must refuse to record and the report must say why.
 */
#include <stddef.h>

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void __libc_free(void *);

void *malloc(size_t size) { return __libc_malloc(size); }
void *calloc(size_t n, size_t size) { return __libc_calloc(n, size); }
void *realloc(void *p, size_t size) { return __libc_realloc(p, size); }
void free(void *p) { __libc_free(p); }
