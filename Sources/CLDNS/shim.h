#ifndef DISCOVERD_CLDNS_SHIM_H
#define DISCOVERD_CLDNS_SHIM_H
#include <ldns/ldns.h>
/* Named for what wide-area registration uses: DNS UPDATE (RFC 2136) and TSIG (RFC 8945). */
#include <ldns/update.h>
#include <ldns/tsig.h>
/* getrandom(2) for the resolver's pool of query IDs (Resolver/Transport/PendingQuery.swift, QueryID): the Glibc
   module does not export <sys/random.h>. */
#include <sys/random.h>

/* ldns's output formats are `extern const` pointers, which Swift imports as mutable globals; these read them
   (Resolver/Wire/RecordPresentation.swift). */
static inline const ldns_output_format *cldns_format_with_comments(void) { return ldns_output_format_default; }
static inline const ldns_output_format *cldns_format_without_comments(void) { return ldns_output_format_nocomments; }
#endif
