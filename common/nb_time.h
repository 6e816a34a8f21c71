/* nb_time: monotonic and wall clocks in milliseconds.
 * Monotonic for every timed region; wall clock only for timestamps. */
#ifndef NB_TIME_H
#define NB_TIME_H

#include <stdint.h>
#include <time.h>

static inline double nb_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static inline int64_t nb_wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* "YYYYMMDD-HHMMSS" (UTC) into buf of at least 16 bytes. */
void nb_time_stamp(char *buf, int64_t wall_ms);
/* ISO 8601 UTC "YYYY-MM-DDTHH:MM:SSZ" into buf of at least 21 bytes. */
void nb_time_iso(char *buf, int64_t wall_ms);

#endif
