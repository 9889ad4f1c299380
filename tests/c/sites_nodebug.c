/*
 * sites_nodebug.c — built without debug information (-g0) into
 * test_sites: a block allocated here is named by its function and object
 * file, and the message says that -g gives lines.
 */
#include <stdlib.h>
#include <string.h>

void *lc_test_nodebug_alloc(size_t size);

/* Not a tail call (which would leave this function off the stack). */
void *
lc_test_nodebug_alloc(size_t size)
{
    char *p = malloc(size);

    if (p != NULL)
        memset(p, 0x5a, size);
    return p;
}
