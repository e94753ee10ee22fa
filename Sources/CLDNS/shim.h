#ifndef DISCOVERD_CLDNS_SHIM_H
#define DISCOVERD_CLDNS_SHIM_H
#include <ldns/ldns.h>
#endif
