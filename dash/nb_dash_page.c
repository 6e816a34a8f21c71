/* nb_dash_page: the frame every dashboard page is drawn in (the document head with its styles
 * and navigation, the footer), apart from the pages so that they share it without a circle. */
#include "nb_dash_page.h"

#include "nb_svg.h"
#include "nb_time.h"

#define esc nb_svg_escape

void nb_dash_head(FILE *f, const char *title, int refresh_s)
{
    fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n", f);
    if (refresh_s > 0)
        fprintf(f, "<meta http-equiv=\"refresh\" content=\"%d\">\n", refresh_s);
    fputs("<title>", f);
    esc(f, title);
    fputs(" - npubench</title>\n<style>\n"
          "body{font-family:sans-serif;margin:1.5em;color:#222}\n"
          "nav a{margin-right:1.2em}\n"
          "table{border-collapse:collapse;margin:.8em 0}\n"
          "th,td{border:1px solid #ccc;padding:.25em .6em;text-align:left;font-size:90%}\n"
          "th{background:#f0f0f0}\n"
          ".pass{background:#d9f2d9}.fail{background:#f8d0d0}.error{background:#fde9c4}\n"
          ".warn{background:#fff3b0}.decode-fault{font-weight:bold}\n"
          ".alive{color:#070}.stale{color:#a60}.gone{color:#a00}.unknown{color:#888}\n"
          ".checking{background:#e4ecf8}.drained{background:#fde9c4}\n"
          ".regression{color:#c00;font-weight:bold}\n"
          ".localization{border-left:4px solid #c00;padding-left:.8em;margin:1em 0}\n"
          ".loc-verdict{font-weight:bold}.loc-drop{background:#f8d0d0;font-weight:bold}\n"
          "pre{background:#f7f7f7;padding:.6em;overflow:auto;max-height:40em}\n"
          "footer{margin-top:2em;color:#888;font-size:80%}\n"
          "</style></head><body>\n"
          "<nav><a href=\"index.html\">Overview</a><a href=\"boards.html\">Boards</a>"
          "<a href=\"queue.html\">Queue</a><a href=\"matrix.html\">Gate matrix</a>"
          "<a href=\"regressions.html\">Regressions</a></nav>\n<h1>",
          f);
    esc(f, title);
    fputs("</h1>\n", f);
}

void nb_dash_foot(FILE *f, const nb_dash_opts *o)
{
    char when[32];
    nb_time_iso(when, o->now_ms);
    fprintf(f, "<footer>npubench dashboard, generated %s", when);
    if (o->generated_by && *o->generated_by) {
        fputs(" by ", f);
        esc(f, o->generated_by);
    }
    fputs("</footer>\n</body></html>\n", f);
}
