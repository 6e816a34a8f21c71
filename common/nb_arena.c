/* nb_arena: chunked bump allocation plus a list of deferred frees.
 * Chunks grow geometrically; a large request gets a chunk of its own. */
#include "nb_arena.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ARENA_ALIGN 16
#define ARENA_MIN_CHUNK 4096

struct nb_arena_chunk {
    nb_arena_chunk *next;
    size_t used, cap;
    _Alignas(ARENA_ALIGN) unsigned char data[];
};

struct nb_arena_defer {
    nb_arena_defer *next;
    void (*fn)(void *);
    void *p;
};

void *nb_arena_alloc(nb_arena *a, size_t n)
{
    if (n > SIZE_MAX / 2) {
        a->failed = 1;
        return NULL;
    }
    size_t need = (n + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1);
    if (!need)
        need = ARENA_ALIGN;
    nb_arena_chunk *c = a->head;
    if (!c || c->cap - c->used < need) {
        size_t cap = c ? c->cap * 2 : ARENA_MIN_CHUNK;
        if (cap > ((size_t)1 << 20))
            cap = (size_t)1 << 20;
        if (cap < need)
            cap = need;
        nb_arena_chunk *nc = malloc(sizeof *nc + cap);
        if (!nc) {
            a->failed = 1;
            return NULL;
        }
        nc->used = 0;
        nc->cap = cap;
        /* A chunk made for one big request goes behind the current one, so
         * the current chunk's free space stays usable. */
        if (c && cap == need && c->cap - c->used >= ARENA_ALIGN) {
            nc->next = c->next;
            c->next = nc;
            nc->used = need;
            memset(nc->data, 0, n);
            return nc->data;
        }
        nc->next = c;
        a->head = c = nc;
    }
    void *p = c->data + c->used;
    c->used += need;
    memset(p, 0, n);
    return p;
}

void *nb_arena_calloc(nb_arena *a, size_t count, size_t size)
{
    if (size && count > SIZE_MAX / size) {
        a->failed = 1;
        return NULL;
    }
    return nb_arena_alloc(a, count * size);
}

char *nb_arena_strndup(nb_arena *a, const char *s, size_t n)
{
    if (!s)
        s = "";
    size_t len = strnlen(s, n);
    char *d = nb_arena_alloc(a, len + 1);
    if (d)
        memcpy(d, s, len); /* already zeroed: terminated */
    return d;
}

char *nb_arena_strdup(nb_arena *a, const char *s)
{
    return nb_arena_strndup(a, s, s ? strlen(s) : 0);
}

void *nb_arena_memdup(nb_arena *a, const void *p, size_t n)
{
    void *d = nb_arena_alloc(a, n);
    if (d && n)
        memcpy(d, p, n);
    return d;
}

char *nb_arena_printf(nb_arena *a, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) {
        a->failed = 1;
        return NULL;
    }
    char *d = nb_arena_alloc(a, (size_t)n + 1);
    if (!d)
        return NULL;
    va_start(ap, fmt);
    vsnprintf(d, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return d;
}

int nb_arena_defer_free(nb_arena *a, void (*fn)(void *), void *p)
{
    if (!p)
        return 0;
    nb_arena_defer *d = malloc(sizeof *d);
    if (!d) {
        a->failed = 1;
        fn(p);
        return -1;
    }
    d->fn = fn;
    d->p = p;
    d->next = a->defers;
    a->defers = d;
    return 0;
}

void nb_arena_free(nb_arena *a)
{
    while (a->defers) {
        nb_arena_defer *d = a->defers;
        a->defers = d->next;
        d->fn(d->p);
        free(d);
    }
    while (a->head) {
        nb_arena_chunk *c = a->head;
        a->head = c->next;
        free(c);
    }
    a->failed = 0;
}
