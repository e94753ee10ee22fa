#ifndef DISCOVERD_CLDNS_SHIM_H
#define DISCOVERD_CLDNS_SHIM_H
#include <ldns/ldns.h>
/* Named for what wide-area registration uses: DNS UPDATE (RFC 2136) and TSIG (RFC 8945). */
#include <ldns/update.h>
#include <ldns/tsig.h>
/* getrandom(2) for the resolver's pool of query IDs (Resolver/Transport/PendingQuery.swift, QueryID): the Glibc
   module does not export <sys/random.h>. */
#include <sys/random.h>
#endif
