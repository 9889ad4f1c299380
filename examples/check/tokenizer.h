/* tokenizer.h — splits a line into fields: the small library under test. */
#ifndef TOKENIZER_H
#define TOKENIZER_H

#include <stddef.h>

typedef struct tok_list {
    char **fields;   /* `count` NUL-terminated strings, owned by the list */
    size_t count;
} tok_list;

/* Splits `line` at `sep`; a field in double quotes may hold `sep`.
 * Returns 0, or -1 (list empty) on an unterminated quote or no memory. */
int tok_split(const char *line, char sep, tok_list *out);
void tok_free(tok_list *list);

#endif
