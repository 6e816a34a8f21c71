/* nb_dash_page: what the dashboard's page files share and nothing outside dash/ uses: the
 * page frame (head with the navigation, footer) every page is drawn in. */
#ifndef NB_DASH_PAGE_H
#define NB_DASH_PAGE_H

#include <stdio.h>

#include "nb_dash.h"

/* The document's head, styles, navigation and <h1>title</h1>; refresh_s > 0: the page
 * reloads itself every refresh_s seconds. */
void nb_dash_head(FILE *f, const char *title, int refresh_s);
/* The footer and the end of the document. */
void nb_dash_foot(FILE *f, const nb_dash_opts *o);

#endif
