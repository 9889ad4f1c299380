/* fixed.c — the tokenizer, releasing what it built on every error path. */
#define _GNU_SOURCE
#include "tokenizer.h"

#include <stdlib.h>
#include <string.h>

static int
push(tok_list *list, const char *start, size_t len)
{
    char **grown = realloc(list->fields, (list->count + 1) * sizeof *grown);

    if (grown == NULL)
        return -1;
    list->fields = grown;
    if ((grown[list->count] = strndup(start, len)) == NULL)
        return -1;
    list->count++;
    return 0;
}

int
tok_split(const char *line, char sep, tok_list *out)
{
    const char *p = line, *start, *end;

    out->fields = NULL;
    out->count = 0;
    for (;;) {
        if (*p == '"') {
            start = p + 1;
            end = strchr(start, '"');
            if (end == NULL) {
                tok_free(out);
                return -1;
            }
            p = end + 1;
        } else {
            start = p;
            end = strchrnul(p, sep);
            p = end;
        }
        if (push(out, start, (size_t)(end - start)) != 0) {
            tok_free(out);
            return -1;
        }
        if (*p != sep)
            return 0;
        p++;
    }
}

void
tok_free(tok_list *list)
{
    while (list->count > 0)
        free(list->fields[--list->count]);
    free(list->fields);
    list->fields = NULL;
}
