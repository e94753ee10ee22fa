#ifndef DISCOVERD_CLDNS_SHIM_H
#define DISCOVERD_CLDNS_SHIM_H
#include <ldns/ldns.h>
/* Named for what wide-area registration uses: DNS UPDATE (RFC 2136) and TSIG (RFC 8945). */
#include <ldns/update.h>
#include <ldns/tsig.h>
#endif
