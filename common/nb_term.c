/* nb_term: one byte (or one C1 pair) at a time; the guarded stdout is a fopencookie stream
 * whose writer escapes and writes to descriptor 1, holding back a trailing C2 byte. */
#include "nb_term.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

size_t nb_term_escape(char *dst, size_t cap, const char *src, size_t len, unsigned flags,
                      size_t *used)
{
    size_t n = 0, i = 0;
    const unsigned char *s = (const unsigned char *)src;
    int keep = (flags & NB_TERM_KEEP_LINES) != 0;
    while (i < len) {
        char e[9];
        int el, take = 1;
        if (keep && (s[i] == '\n' || s[i] == '\t')) {
            e[0] = (char)s[i];
            el = 1;
        } else if (s[i] == '\n' || s[i] == '\r' || s[i] == '\t')
            el = snprintf(e, sizeof e, "\\%c", s[i] == '\n' ? 'n' : s[i] == '\r' ? 'r' : 't');
        else if (s[i] < 0x20 || s[i] == 0x7f)
            el = snprintf(e, sizeof e, "\\x%02x", s[i]);
        else if (s[i] == 0xc2 && i + 1 == len && used)
            break; /* maybe the first half of a C1 control: wait for the next byte */
        else if (s[i] == 0xc2 && i + 1 < len && s[i + 1] >= 0x80 && s[i + 1] <= 0x9f) {
            el = snprintf(e, sizeof e, "\\x%02x\\x%02x", s[i], s[i + 1]);
            take = 2;
        } else {
            e[0] = (char)s[i];
            el = 1;
        }
        if (n + (size_t)el >= cap)
            break;
        memcpy(dst + n, e, (size_t)el);
        n += (size_t)el;
        i += (size_t)take;
    }
    if (cap)
        dst[n] = '\0';
    if (used)
        *used = i;
    return n;
}

static void write_fd(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return;
        p += w;
        n -= (size_t)w;
    }
}

static char held; /* a C2 byte the last write ended with (0: none) */

static ssize_t guarded_write(void *cookie, const char *buf, size_t size)
{
    (void)cookie;
    char in[4096 + 1], out[4 * 4096 + 16];
    size_t done = 0;
    while (done < size) {
        size_t k = 0;
        if (held)
            in[k++] = held;
        held = 0;
        size_t take = size - done < 4096 ? size - done : 4096;
        memcpy(in + k, buf + done, take);
        k += take;
        done += take;
        size_t used = 0;
        size_t n = nb_term_escape(out, sizeof out, in, k, NB_TERM_KEEP_LINES,
                                  done == size ? &used : NULL);
        if (done == size && used < k)
            held = in[used]; /* the one C2 left unconsumed */
        write_fd(1, out, n);
    }
    return (ssize_t)size;
}

static int guarded_close(void *cookie)
{
    (void)cookie;
    if (held) { /* a C2 that ended the output is plain text */
        char c = held;
        held = 0;
        write_fd(1, &c, 1);
    }
    return 0;
}

int nb_term_guard_stdout(void)
{
    cookie_io_functions_t io = {.write = guarded_write, .close = guarded_close};
    fflush(stdout);
    FILE *f = fopencookie(NULL, "w", io);
    if (!f)
        return -1;
    setvbuf(f, NULL, _IOFBF, 1 << 16);
    stdout = f;
    return 0;
}
