/* nb_junit: finished jobs as a JUnit XML file for CI (the subset Jenkins and GitLab read,
 * tests/junit.xsd): one testsuite per job, one testcase per verify prompt, per regression
 * check of a run or profile, or for the job itself when it has no result. */
#ifndef NB_JUNIT_H
#define NB_JUNIT_H

#include <stddef.h>
#include <stdio.h>

#include "nb_err.h"
#include "nb_wire.h"

/* Writes the jobs to path (replaced whole: written to path.tmp, then renamed); an error names
 * the path. A job's log (GetJob include_log) goes to its testsuite's system-out. */
nb_code nb_junit_write(const char *path, const Npubench__Job *const *jobs, size_t n,
                       nb_err *err);
/* The same XML on f. */
void nb_junit_print(FILE *f, const Npubench__Job *const *jobs, size_t n);
/* s as XML character data (attr 0) or an attribute value (attr 1: line breaks and tabs as
 * character references): &<>"' escaped, so "]]>" never appears; what XML 1.0 cannot carry
 * (control characters, bytes that are not UTF-8, U+FFFE/U+FFFF) replaced by '?'. */
void nb_junit_escape(FILE *f, const char *s, int attr);

#endif
