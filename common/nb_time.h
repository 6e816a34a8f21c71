/* nb_time: monotonic and wall clocks in milliseconds.
 * Monotonic for every timed region; wall clock only for timestamps. */
#ifndef NB_TIME_H
#define NB_TIME_H

#include <stdint.h>
#include <time.h>

/* Clock c in milliseconds: CLOCK_MONOTONIC, or a CPU-time clock for benchmarks on a shared host
 * (CLOCK_PROCESS_CPUTIME_ID, CLOCK_THREAD_CPUTIME_ID), where other processes' turns do not count. */
static inline double nb_clock_ms(clockid_t c)
{
    struct timespec ts;
    clock_gettime(c, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static inline double nb_now_ms(void)
{
    return nb_clock_ms(CLOCK_MONOTONIC);
}

static inline int64_t nb_wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Sleeps ms milliseconds, the whole time: a signal's interruption resumes the rest. */
void nb_sleep_ms(double ms);
/* "YYYYMMDD-HHMMSS" (UTC) into buf of at least 16 bytes. */
void nb_time_stamp(char *buf, int64_t wall_ms);
/* ISO 8601 UTC "YYYY-MM-DDTHH:MM:SSZ" into buf of at least 21 bytes. */
void nb_time_iso(char *buf, int64_t wall_ms);
/* How long before now_ms then_ms was, in the unit people read an age in: seconds below
 * 2 minutes, minutes below 2 hours, hours below 2 days, then days; 0 when then_ms is later.
 * *unit gets 's', 'm', 'h' or 'd'. (`workers`, `jobs` and the dashboard say it alike.) */
int64_t nb_time_age(int64_t now_ms, int64_t then_ms, char *unit);

#endif
