/* nb_log: the log lines of the long-lived processes (coordinator, worker), one format for both:
 * "<ISO-8601 UTC time> <tag>: <message>", one line per event, whatever the message holds. */
#ifndef NB_LOG_H
#define NB_LOG_H

#include <stdarg.h>
#include <stddef.h>

/* Longest line written, newline included; a longer message is cut. */
#define NB_LOG_LINE_MAX 4096

/* Where lines go: stderr (fd 2) until set. Returns the previous fd. */
int nb_log_set_fd(int fd);

/* Logs one line. Control characters in the message (a newline, a carriage return, a terminal
 * escape, C1 controls) are written as \n, \r, \t or \xHH, so that a value from a job, a
 * worker or a file cannot start a line of its own or rewrite the terminal. */
void nb_log(const char *tag, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void nb_logv(const char *tag, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));

/* For callers that also hand the line elsewhere: the line nb_logv would write, without its
 * newline, into line[cap]; returns its length. */
size_t nb_log_vformat(char *line, size_t cap, const char *tag, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));
/* Writes text (escaped as above) and a newline as one write, never interleaved with another
 * thread's line. */
void nb_log_write(const char *text);

#endif
