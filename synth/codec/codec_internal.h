/*
 * codec_internal.h - helpers shared by the codec's files (private to
 * synth/codec/).
 */
#ifndef CS_CODEC_INTERNAL_H
#define CS_CODEC_INTERNAL_H

#include <stddef.h>

/* A growable byte buffer; zero-initialize before use. */
typedef struct bytebuf {
    unsigned char *data;
    size_t len, cap;
} bytebuf;

int bytebuf_reserve(bytebuf *b, size_t more);
int bytebuf_put(bytebuf *b, const void *p, size_t n);
void bytebuf_free(bytebuf *b);

#endif
