/* nb_log: formats, escapes and writes log lines; a mutex and a single write(2) per line keep
 * lines of concurrent threads (and, up to PIPE_BUF, of processes sharing the fd) whole. */
#include "nb_log.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "nb_term.h"
#include "nb_time.h"

static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;
static int log_fd = 2;

int nb_log_set_fd(int fd)
{
    pthread_mutex_lock(&log_mu);
    int old = log_fd;
    log_fd = fd;
    pthread_mutex_unlock(&log_mu);
    return old;
}

/* The message with control bytes escaped (nb_term: one escaping for logs and terminals). */
static size_t escape(char *dst, size_t cap, const char *src)
{
    return nb_term_escape(dst, cap, src, strlen(src), 0, NULL);
}

/* line[0, len) and a newline, in one write. */
static void put(char *line, size_t len)
{
    line[len++] = '\n';
    pthread_mutex_lock(&log_mu);
    for (size_t off = 0; off < len;) {
        ssize_t w = write(log_fd, line + off, len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) /* nowhere to report a failing log; the line is lost */
            break;
        off += (size_t)w;
    }
    pthread_mutex_unlock(&log_mu);
}

size_t nb_log_vformat(char *line, size_t cap, const char *tag, const char *fmt, va_list ap)
{
    char iso[32], msg[NB_LOG_LINE_MAX];
    nb_time_iso(iso, nb_wall_ms());
    vsnprintf(msg, sizeof msg, fmt, ap);
    int head = snprintf(line, cap, "%s %s: ", iso, tag);
    if (head < 0 || (size_t)head >= cap)
        return head < 0 ? 0 : cap - 1;
    return (size_t)head + escape(line + head, cap - (size_t)head, msg);
}

void nb_logv(const char *tag, const char *fmt, va_list ap)
{
    char line[NB_LOG_LINE_MAX];
    put(line, nb_log_vformat(line, sizeof line - 1, tag, fmt, ap));
}

void nb_log(const char *tag, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    nb_logv(tag, fmt, ap);
    va_end(ap);
}

void nb_log_write(const char *text)
{
    char line[NB_LOG_LINE_MAX];
    put(line, escape(line, sizeof line - 1, text));
}
