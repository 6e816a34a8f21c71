/* test_lru: nb_lru's order of eviction under a count and a cost budget, pins, the kept new
 * entry, cost changes, removal and the drop callback, and lookups across table growth. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "testutil.h"

#include <stdlib.h>
#include <string.h>

#include "nb_lru.h"

typedef struct item {
    int key;
} item;

typedef struct dropped {
    int keys[256];
    int n;
} dropped;

static int match(const void *value, const void *key)
{
    return ((const item *)value)->key == *(const int *)key;
}

static void drop(void *user, void *value)
{
    dropped *d = user;
    if (d->n < 256)
        d->keys[d->n++] = ((item *)value)->key;
    free(value);
}

/* Hashes every key to one of two buckets' worth of values, so lookups must compare keys. */
static uint64_t hash_of(int key)
{
    return (uint64_t)(key % 2);
}

static nb_lru *make(size_t max_count, size_t max_cost, dropped *d)
{
    nb_lru_opts o = {.max_count = max_count, .max_cost = max_cost, .match = match,
                     .drop = drop, .user = d};
    nb_lru *l = NULL;
    nb_err err = {0};
    assert_int_equal(nb_lru_new(&o, &l, &err), NB_OK);
    return l;
}

static nb_lru_node *put(nb_lru *l, int key, size_t cost)
{
    item *it = malloc(sizeof *it);
    it->key = key;
    nb_lru_node *n = NULL;
    nb_err err = {0};
    assert_int_equal(nb_lru_put(l, hash_of(key), it, cost, &n, &err), NB_OK);
    return n;
}

static nb_lru_node *find(nb_lru *l, int key)
{
    return nb_lru_find(l, hash_of(key), &key);
}

static void test_count_budget_evicts_oldest(void **state)
{
    (void)state;
    dropped d = {0};
    nb_lru *l = make(3, 0, &d);
    put(l, 1, 0);
    put(l, 2, 0);
    put(l, 3, 0);
    nb_lru_touch(l, find(l, 1)); /* 2 is now the oldest */
    put(l, 4, 0);
    assert_int_equal(d.n, 1);
    assert_int_equal(d.keys[0], 2);
    assert_null(find(l, 2));
    assert_non_null(find(l, 1));
    assert_int_equal(((item *)nb_lru_value(find(l, 4)))->key, 4);
    nb_lru_stats st;
    nb_lru_get_stats(l, &st);
    assert_int_equal(st.count, 3);
    assert_int_equal(st.evicted, 1);
    nb_lru_free(l);
    assert_int_equal(d.n, 4); /* freeing drops the rest */
}

static void test_cost_budget_keeps_new_entry(void **state)
{
    (void)state;
    dropped d = {0};
    nb_lru *l = make(0, 100, &d);
    put(l, 1, 40);
    put(l, 2, 40);
    put(l, 3, 40); /* 120 > 100: 1 goes */
    assert_int_equal(d.n, 1);
    assert_int_equal(d.keys[0], 1);
    put(l, 4, 500); /* alone over the budget: everything else goes, 4 stays */
    assert_int_equal(d.n, 3);
    assert_non_null(find(l, 4));
    nb_lru_stats st;
    nb_lru_get_stats(l, &st);
    assert_int_equal(st.count, 1);
    assert_int_equal(st.cost, 500);
    nb_lru_free(l);
}

static void test_pinned_never_evicted(void **state)
{
    (void)state;
    dropped d = {0};
    nb_lru *l = make(2, 0, &d);
    nb_lru_node *a = put(l, 1, 0);
    nb_lru_pin(a, 1);
    put(l, 2, 0);
    put(l, 3, 0); /* 1 is oldest but pinned: 2 goes */
    assert_int_equal(d.n, 1);
    assert_int_equal(d.keys[0], 2);
    assert_true(nb_lru_pinned(a));
    nb_lru_pin(a, -1);
    assert_false(nb_lru_pinned(a));
    put(l, 4, 0); /* now 1 goes */
    assert_int_equal(d.n, 2);
    assert_int_equal(d.keys[1], 1);
    nb_lru_free(l);
}

static void test_set_cost_and_remove(void **state)
{
    (void)state;
    dropped d = {0};
    nb_lru *l = make(0, 100, &d);
    put(l, 1, 10);
    nb_lru_node *b = put(l, 2, 10);
    nb_lru_set_cost(l, b, 95); /* 105: 1 goes, never b */
    assert_int_equal(d.n, 1);
    assert_int_equal(d.keys[0], 1);
    nb_lru_remove(l, b);
    assert_int_equal(d.n, 2);
    nb_lru_stats st;
    nb_lru_get_stats(l, &st);
    assert_int_equal(st.count, 0);
    assert_int_equal(st.cost, 0);
    assert_int_equal(st.evicted, 1); /* removal is no eviction */
    nb_lru_free(l);
}

static void test_many_entries_grow(void **state)
{
    (void)state;
    dropped d = {0};
    nb_lru *l = make(0, 0, &d);
    for (int k = 0; k < 200; k++)
        put(l, k, 1);
    for (int k = 0; k < 200; k++) {
        nb_lru_node *n = find(l, k);
        assert_non_null(n);
        assert_int_equal(((item *)nb_lru_value(n))->key, k);
    }
    assert_null(find(l, 200));
    assert_int_equal(d.n, 0);
    nb_lru_free(l);
    assert_int_equal(d.n, 200);
}

static void test_needs_match(void **state)
{
    (void)state;
    nb_lru_opts o = {0};
    nb_lru *l = NULL;
    nb_err err = {0};
    assert_int_equal(nb_lru_new(&o, &l, &err), NB_EINVAL);
    assert_null(l);
    assert_non_null(strstr(err.msg, "match"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_count_budget_evicts_oldest),
        cmocka_unit_test(test_cost_budget_keeps_new_entry),
        cmocka_unit_test(test_pinned_never_evicted),
        cmocka_unit_test(test_set_cost_and_remove),
        cmocka_unit_test(test_many_entries_grow),
        cmocka_unit_test(test_needs_match),
    };
    return tu_run_group(tests, NULL, NULL);
}
