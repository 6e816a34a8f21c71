/* nb_term: text from jobs, workers and files made safe for a terminal — control bytes
 * (ESC, CR, BEL, DEL, ...) and the C1 controls (UTF-8 C2 80..C2 9F; U+009B is CSI) written as
 * \xHH, so a value cannot retitle the window, clear the screen or rewrite a line. The one
 * escaping function of the log lines (nb_log) and the CLI's terminal output. */
#ifndef NB_TERM_H
#define NB_TERM_H

#include <stddef.h>

#define NB_TERM_KEEP_LINES 1u /* \n and \t pass as themselves (else \n, \t) */

/* Escapes src[0, len) into dst[cap] (NUL-terminated), cutting before an escape that would
 * not fit whole; *used (may be NULL) gets the source bytes consumed (a C2 at the very end is
 * left unconsumed: its next byte may make it a C1 control). Returns the length written.
 * Output holds no control byte but what flags keep, so a second pass leaves it as it is. */
size_t nb_term_escape(char *dst, size_t cap, const char *src, size_t len, unsigned flags,
                      size_t *used);

/* From here on stdout goes through nb_term_escape (NB_TERM_KEEP_LINES): for commands that
 * print job, worker and result text (jobs, job, history). 0, or -1 when it cannot. */
int nb_term_guard_stdout(void);

#endif
