/* png_read.h: a small PNG reader for the tests that look at screenshots — 8-bit RGB or RGBA,
 * not interlaced (what headless Chromium writes), inflated with zlib, every filter undone. */
#ifndef NB_PNG_READ_H
#define NB_PNG_READ_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

typedef struct png_image {
    uint32_t w, h;
    uint8_t *rgb; /* w * h * 3, row after row */
} png_image;

static inline uint32_t png_be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static inline int png_paeth(int a, int b, int c)
{
    int p = a + b - c, pa = abs(p - a), pb = abs(p - b), pc = abs(p - c);
    return pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
}

/* Reads path into *img (free img->rgb); 0 on success, else -1 with why in msg. */
static inline int png_read(const char *path, png_image *img, char *msg, size_t msz)
{
    memset(img, 0, sizeof *img);
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(msg, msz, "cannot open %s", path);
        return -1;
    }
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *buf = len > 0 ? malloc((size_t)len) : NULL;
    int ok = buf && fread(buf, 1, (size_t)len, f) == (size_t)len;
    fclose(f);
    static const uint8_t sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    uint8_t *idat = NULL, *raw = NULL;
    size_t nidat = 0;
    int bpp = 0;
    const char *why = NULL;
    if (!ok || len < 8 || memcmp(buf, sig, 8))
        why = "not a PNG";
    for (size_t o = 8; !why && o + 12 <= (size_t)len;) {
        uint32_t n = png_be32(buf + o);
        const uint8_t *type = buf + o + 4, *data = buf + o + 8;
        if (n > (size_t)len - o - 12) {
            why = "a chunk runs past the end";
            break;
        }
        if (!memcmp(type, "IHDR", 4)) {
            img->w = png_be32(data);
            img->h = png_be32(data + 4);
            if (data[8] != 8 || (data[9] != 2 && data[9] != 6) || data[12] != 0)
                why = "not 8-bit RGB/RGBA, non-interlaced";
            bpp = data[9] == 6 ? 4 : 3;
        } else if (!memcmp(type, "IDAT", 4)) {
            uint8_t *t = realloc(idat, nidat + n);
            if (!t) {
                why = "out of memory";
                break;
            }
            idat = t;
            memcpy(idat + nidat, data, n);
            nidat += n;
        } else if (!memcmp(type, "IEND", 4))
            break;
        o += 12 + n;
    }
    size_t stride = (size_t)img->w * (size_t)bpp;
    uLongf rawlen = (uLongf)((stride + 1) * img->h);
    if (!why && (!bpp || !img->w || !img->h || img->w > 16384 || img->h > 16384))
        why = "no image header";
    if (!why && !(raw = malloc(rawlen)))
        why = "out of memory";
    if (!why && uncompress(raw, &rawlen, idat, nidat) != Z_OK)
        why = "the image data does not inflate";
    if (!why && rawlen != (stride + 1) * img->h)
        why = "the image data is short";
    if (!why && !(img->rgb = malloc((size_t)img->w * img->h * 3)))
        why = "out of memory";
    for (uint32_t y = 0; !why && y < img->h; y++) {
        uint8_t *row = raw + y * (stride + 1) + 1, *up = y ? row - stride - 1 : NULL;
        int ft = row[-1];
        for (size_t x = 0; x < stride; x++) {
            int a = x >= (size_t)bpp ? row[x - bpp] : 0, b = up ? up[x] : 0,
                c = up && x >= (size_t)bpp ? up[x - bpp] : 0;
            int pred = ft == 0 ? 0 : ft == 1 ? a : ft == 2 ? b : ft == 3 ? (a + b) / 2
                       : ft == 4 ? png_paeth(a, b, c) : -1;
            if (pred < 0) {
                why = "an unknown row filter";
                break;
            }
            row[x] = (uint8_t)(row[x] + pred);
        }
        for (uint32_t x = 0; !why && x < img->w; x++)
            memcpy(img->rgb + ((size_t)y * img->w + x) * 3, row + (size_t)x * bpp, 3);
    }
    free(buf);
    free(idat);
    free(raw);
    if (why) {
        snprintf(msg, msz, "%s: %s", path, why);
        free(img->rgb);
        img->rgb = NULL;
        return -1;
    }
    return 0;
}

/* The pixel at (x, y) as 0xrrggbb; -1 outside the image. */
static inline long png_at(const png_image *img, long x, long y)
{
    if (x < 0 || y < 0 || x >= (long)img->w || y >= (long)img->h)
        return -1;
    const uint8_t *p = img->rgb + ((size_t)y * img->w + (size_t)x) * 3;
    return (long)p[0] << 16 | (long)p[1] << 8 | p[2];
}

/* Whether two colours differ by at most tol in each channel. */
static inline int png_near(long a, long b, int tol)
{
    if (a < 0 || b < 0)
        return 0;
    for (int s = 0; s < 24; s += 8)
        if (abs((int)((a >> s) & 255) - (int)((b >> s) & 255)) > tol)
            return 0;
    return 1;
}

#endif
