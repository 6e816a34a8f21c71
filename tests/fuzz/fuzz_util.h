/* fuzz_util: what the libFuzzer harnesses share — an input handed to a path-taking parser
 * as a file, rewritten in place for every input (one per process, in $TMPDIR). */
#ifndef FUZZ_UTIL_H
#define FUZZ_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* Writes data to "<TMPDIR>/nbfuzz-<pid><suffix>" and returns that path (static buffer);
 * NULL when the file cannot be written (the input is then skipped). */
static inline const char *fuzz_file(const uint8_t *data, size_t size, const char *suffix)
{
    static char path[512];
    const char *dir = getenv("TMPDIR");
    snprintf(path, sizeof path, "%s/nbfuzz-%ld%s", dir && *dir ? dir : "/tmp", (long)getpid(),
             suffix);
    FILE *f = fopen(path, "wb");
    if (!f)
        return NULL;
    size_t put = size ? fwrite(data, 1, size, f) : 0;
    return fclose(f) == 0 && put == size ? path : NULL;
}

/* A NUL-terminated heap copy of the input (text parsers). */
static inline char *fuzz_text(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    if (!s)
        abort();
    for (size_t i = 0; i < size; i++)
        s[i] = (char)data[i];
    s[size] = '\0';
    return s;
}

#endif
