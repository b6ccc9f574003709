/*
 * xml_reader.h - INTERNAL to codegen/: a small, strict XML reader for the
 * subset MSCCL documents use, turning text into a tree of elements.
 *
 * Accepted: elements with attributes (single or double quotes), self-closing
 * tags, the five predefined entities and numeric character references in
 * attribute values, comments, one leading <?xml ...?> declaration, and
 * whitespace between elements.  Rejected with the line number: text content,
 * CDATA, DOCTYPE, processing instructions elsewhere, mismatched or unclosed
 * tags, duplicate attributes, unterminated quotes or comments, more than one
 * root element, and nesting deeper than XMLR_MAX_DEPTH.
 */
#ifndef CS_XML_READER_H
#define CS_XML_READER_H

#include <stddef.h>
#include "cs_common.h"

#define XMLR_MAX_DEPTH 32

typedef struct xmlr_attr {
    char *name;
    char *value;
} xmlr_attr;

typedef struct xmlr_node {
    char *name;
    int line;
    int nattrs;
    xmlr_attr *attrs;
    int nchildren, capchildren;
    struct xmlr_node **children;
} xmlr_node;

int xmlr_parse(const char *text, size_t len, xmlr_node **root, cs_error *err);
void xmlr_free(xmlr_node *n);
/* The attribute's value, or NULL. */
const char *xmlr_attr_get(const xmlr_node *n, const char *name);

#endif
