#!/usr/bin/env bash
# Builds the DNSCore module (the wire types without C) instrumented for libFuzzer and AddressSanitizer, as a
# static library and a .swiftmodule in DIR, for the fuzz targets to import.
#
#   Fuzz/build-dnscore.sh DIR
set -euo pipefail
out="$1"
root="$(cd "$(dirname "$0")/.." && pwd)"
mkdir -p "$out"
cd "$out"
swiftc -sanitize=fuzzer,address -parse-as-library -swift-version 6 -O -g -module-name DNSCore \
    -emit-module -emit-module-path "$out/DNSCore.swiftmodule" -emit-library -static -o "$out/libDNSCore.a" \
    -package-name discoverd "$root"/Sources/DNSCore/*.swift 2>&1 | { grep -v "Cannot export local symbol" || true; }
