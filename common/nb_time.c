/* nb_time: timestamp formatting for report names and history rows.
 * Always UTC so reports from different labs sort together. */
#include "nb_time.h"

#include <stdio.h>

void nb_time_stamp(char *buf, int64_t wall_ms)
{
    time_t t = (time_t)(wall_ms / 1000);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, 16, "%Y%m%d-%H%M%S", &tm);
}

void nb_time_iso(char *buf, int64_t wall_ms)
{
    time_t t = (time_t)(wall_ms / 1000);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, 21, "%Y-%m-%dT%H:%M:%SZ", &tm);
}
