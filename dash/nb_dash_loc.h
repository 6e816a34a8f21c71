/* nb_dash_loc: a failing gate check's localization, as the history stores it
 * (gate_checks.localization, docs/localization.md), rendered for a run's page. */
#ifndef NB_DASH_LOC_H
#define NB_DASH_LOC_H

#include <stdio.h>

/* The verdict as people read it, into buf: "KV cache / decode path", "layer 7 mlp",
 * "near tie", "not localized"; json and verdict as stored (gate_checks.localization and
 * localization_verdict; the column wins, the JSON names the layer). Returns buf. */
const char *nb_dash_loc_label(const char *json, const char *verdict, char *buf, size_t cap);

/* The decode-path check as people read it, from gate_checks.decode_check: its stored summary
 * ("decode path clean (...)", "decode-path defect: decode step 1 differs ..."), or "unreadable
 * decode-path check" when the text is not one. Returns buf. */
const char *nb_dash_loc_decode_label(const char *json, char *buf, size_t cap);

/* One <div class="localization" id="loc-PROMPT">: the verdict, the summary, the key numbers
 * (reference margin and near-tie band, the KV cache / decode path check, the first layer and
 * sub-block below the cosine threshold, the final norm) and the per-layer cosines. json is the
 * stored text; one that does not parse is said so, escaped, and the page still renders. */
void nb_dash_loc_write(FILE *f, int prompt, const char *json, const char *verdict);

#endif
