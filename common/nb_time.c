/* nb_time: timestamp and age formatting for report names, history rows and listings, and the
 * one sleep every poll loop uses.  Always UTC so reports from different labs sort together. */
#include "nb_time.h"

#include <errno.h>
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

int64_t nb_time_age(int64_t now_ms, int64_t then_ms, char *unit)
{
    int64_t s = (now_ms - then_ms) / 1000;
    if (s < 0)
        s = 0;
    static const struct {
        int64_t below, per; /* seconds */
        char unit;
    } steps[] = {{120, 1, 's'}, {7200, 60, 'm'}, {172800, 3600, 'h'}, {INT64_MAX, 86400, 'd'}};
    size_t i = 0;
    while (s >= steps[i].below)
        i++;
    *unit = steps[i].unit;
    return s / steps[i].per;
}

void nb_sleep_ms(double ms)
{
    if (!(ms > 0))
        return;
    struct timespec ts = {(time_t)(ms / 1000), (long)((ms - (double)(time_t)(ms / 1000) * 1000) * 1e6)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}
