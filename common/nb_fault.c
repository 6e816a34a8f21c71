/* nb_fault: NPUBENCH_FAULT lookups; read at every call so a test can switch a point on and off
 * in a running process with setenv. */
#include "nb_fault.h"

#include <stdlib.h>
#include <string.h>

int nb_fault(const char *point)
{
    const char *list = getenv("NPUBENCH_FAULT");
    size_t n = strlen(point);
    for (const char *p = list; p && *p;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len == n && !memcmp(p, point, n))
            return 1;
        p = end ? end + 1 : NULL;
    }
    return 0;
}
