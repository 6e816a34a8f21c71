/* nb_fault: NPUBENCH_FAULT lookups; read at every call so a test can switch a point on and off
 * in a running process with setenv. */
#include "nb_fault.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* The entry of NPUBENCH_FAULT naming point (followed by ',', ':' or the end), its length in
 * *len; NULL when absent. */
static const char *find_point(const char *point, size_t *len)
{
    const char *list = getenv("NPUBENCH_FAULT");
    size_t n = strlen(point);
    for (const char *p = list; p && *p;) {
        const char *end = strchr(p, ',');
        *len = end ? (size_t)(end - p) : strlen(p);
        if (*len >= n && !memcmp(p, point, n) && (*len == n || p[n] == ':'))
            return p;
        p = end ? end + 1 : NULL;
    }
    return NULL;
}

int nb_fault(const char *point)
{
    size_t len;
    const char *p = find_point(point, &len);
    return p && len == strlen(point);
}

int nb_fault_arg(const char *point, long *value)
{
    size_t len, n = strlen(point);
    const char *p = find_point(point, &len);
    if (!p)
        return 0;
    char num[24];
    if (len <= n + 1 || len - n - 1 >= sizeof num)
        return -1;
    memcpy(num, p + n + 1, len - n - 1);
    num[len - n - 1] = '\0';
    char *end;
    errno = 0;
    long v = strtol(num, &end, 10);
    if (errno || *end || end == num || v < 0 || v > 0x7fffffff)
        return -1;
    *value = v;
    return 1;
}
