#!/usr/bin/env bash
# Builds the SVCB/DNS-message fuzzer with libFuzzer and AddressSanitizer and runs it for a bounded time.
#
#   Fuzz/build-and-run.sh [SECONDS]      (default 60)
#
# The fuzzer is compiled outside SwiftPM: swiftc takes the ldns codec (Sources/Resolver/Wire) and SVCB sources of
# the Resolver module, its reply scrubber, DNSSEC cryptography and DoH path templates, plus Fuzz/SVCBFuzz/main.swift as one module,
# importing the DNSCore module (built first by Fuzz/build-dnscore.sh) and the CLDNS module map for ldns. libFuzzer's
# runtime comes with the Swift toolchain (lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a), which `swiftc -sanitize=fuzzer`
# links by itself. New inputs found are written to Fuzz/.corpus-work (not the seed corpus); crashes to
# Fuzz/artifacts/.
set -euo pipefail
# libFuzzer and AddressSanitizer print the crash's stack themselves; Swift's own backtracer, started on the same
# signal, can wait on the terminal for minutes (it did with a crash found in a piped run), so it is off.
export SWIFT_BACKTRACE=enable=no

seconds="${1:-60}"
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"

out="$root/Fuzz/.build"
work="$root/Fuzz/.corpus-work"
artifacts="$root/Fuzz/artifacts"
mkdir -p "$out" "$work" "$artifacts"

"$root/Fuzz/build-dnscore.sh" "$out"
swiftc -sanitize=fuzzer,address -parse-as-library -swift-version 6 -O -g \
    -module-name Resolver -package-name discoverd \
    -I "$out" -L "$out" -lDNSCore -I Sources/CLDNS -lldns \
    Sources/Resolver/Wire/*.swift Sources/Resolver/SVCB/*.swift Sources/Resolver/Engine/ReplyScrubber.swift \
    Sources/Resolver/DNSSEC/DNSSECCrypto.swift Sources/Resolver/DNSSEC/NSECDenial.swift \
    Sources/Resolver/Transport/Encrypted/DoHPathTemplate.swift Fuzz/SVCBFuzz/main.swift \
    -o "$out/svcb-fuzz" 2>&1 | { grep -v "Cannot export local symbol" || true; }
# (gold warns once per ASan helper symbol; harmless, so filtered.)

echo "built $out/svcb-fuzz; running for ${seconds}s"
"$out/svcb-fuzz" "$work" "$root/Fuzz/corpus/svcb" \
    -max_total_time="$seconds" -max_len=4096 -timeout=10 -rss_limit_mb=2048 \
    -artifact_prefix="$artifacts/" -print_final_stats=1
