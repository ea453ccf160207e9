/* Secrets in URLs: a password in a URL's user info (https://user:PASSWORD@host) and the values
 * of query parameters whose name says they hold one (token, key, secret, password, passwd, sig,
 * signature, credential, auth: X-Amz-Signature, api_key, access_token, ...) are replaced by
 * REDACTED wherever a URL appears in text, so logs, spool files and the run directory's
 * recipe.resolved.yaml never hold them. */
#ifndef EVALMESH_REDACT_H
#define EVALMESH_REDACT_H

#include <stdbool.h>

#define EM_REDACTED "REDACTED"

/* A copy of text (heap) with the secret parts of every URL in it replaced by EM_REDACTED. */
char *em_redact_urls(const char *text);

/* Whether text holds a URL secret that em_redact_urls would replace. */
bool em_has_url_secret(const char *text);

#endif
