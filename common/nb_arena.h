/* nb_arena: a bump allocator for building many small objects freed together
 * (protobuf-c messages assembled for one reply, rows converted for one insert). */
#ifndef NB_ARENA_H
#define NB_ARENA_H

#include <stddef.h>

typedef struct nb_arena_chunk nb_arena_chunk;
typedef struct nb_arena_defer nb_arena_defer;

/* Zero-initialise (`nb_arena a = {0};`); release with nb_arena_free.
 * `failed` becomes 1 after any allocation failed, so a builder may allocate
 * freely and check once at the end. */
typedef struct nb_arena {
    nb_arena_chunk *head;
    nb_arena_defer *defers;
    int failed;
} nb_arena;

/* n bytes, zeroed, aligned for any type; NULL (and a->failed = 1) when out
 * of memory or n overflows. n == 0 gives a valid unique pointer. */
void *nb_arena_alloc(nb_arena *a, size_t n);
/* count * size bytes with an overflow check. */
void *nb_arena_calloc(nb_arena *a, size_t count, size_t size);
/* Copies of s (NULL -> ""), of the first n bytes of s, of a printf result. */
char *nb_arena_strdup(nb_arena *a, const char *s);
char *nb_arena_strndup(nb_arena *a, const char *s, size_t n);
char *nb_arena_printf(nb_arena *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void *nb_arena_memdup(nb_arena *a, const void *p, size_t n);

/* Calls fn(p) when the arena is freed (for objects owned elsewhere, e.g. a
 * message from nb_wire_unpack plugged into a reply). p NULL is ignored.
 * Returns 0, or -1 when out of memory (fn(p) is then called at once). */
int nb_arena_defer_free(nb_arena *a, void (*fn)(void *), void *p);

/* Runs the deferred frees (last registered first) and frees every chunk;
 * the arena is empty and reusable afterwards. */
void nb_arena_free(nb_arena *a);

#endif
