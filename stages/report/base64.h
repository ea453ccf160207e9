/* Base64 (RFC 4648): the standard alphabet for HTTP basic credentials, the URL-safe one for
 * Pushgateway label values that contain a slash. */
#ifndef EVALMESH_REPORT_BASE64_H
#define EVALMESH_REPORT_BASE64_H

#include <stdbool.h>
#include <stddef.h>

/* Encodes len bytes with '=' padding; returns a heap string. */
char *em_base64_encode(const void *data, size_t len, bool url_safe);

#endif
