# DNSSEC in the lab (issue #17), sourced by Scripts/lab: signed zones under the lab's own anchor zone
# dnssec.test, the trust anchor exported as files, and a validating Unbound as the reference validator.
#
# Knot (192.0.2.53) signs the zones itself (dnssec-signing: on, manual policies: the keys are made with keymgr at
# `up`, before Knot starts, so that each parent's zone file can carry its children's DS records):
#
#   dnssec.test.             ECDSAP256SHA256, KSK + ZSK, NSEC           the anchor
#   rsa.dnssec.test.         RSASHA256, KSK + ZSK, NSEC3 0 iterations    DS in dnssec.test
#   deep.rsa.dnssec.test.    ED25519, one CSK, NSEC                     DS in rsa.dnssec.test
#   badds.dnssec.test.       ECDSAP256SHA256, CSK                       DS in dnssec.test with a wrong digest
#   nsec3iter.dnssec.test.   ECDSAP256SHA256, CSK, NSEC3 200 iterations DS in dnssec.test
#   unsigned.dnssec.test.    not signed                                 no DS (NSEC in dnssec.test proves it)
#   expired.dnssec.test.     pre-signed by ldns-signzone, RRSIGs 2019-2020, served with signing off
#   future.dnssec.test.      pre-signed by ldns-signzone, RRSIGs valid from a year from now, signing off
#
# Keys (Knot's KASP database in $LAB/dns/db/keys, ldns keys in $LAB/dnssec/keys), the zone files Knot loads
# ($LAB/dnssec/zones) and the anchor files ($LAB/dnssec/trust-anchors.d/dnssec.test.positive in systemd-resolved's
# format, $LAB/dnssec/unbound-anchor.ds for Unbound's trust-anchor-file) all live in the lab dir, made at `up`.
#
# unbound-dnssec (192.0.2.58, 2001:db8::58 in dlab-dns): Unbound 1.17 validating with that anchor, forwarding
# dnssec.test to the fault server (192.0.2.54), so it sees the same tampering as discoverd. Remote control on a
# Unix socket ($LAB/dnssec/unbound/control.sock, unbound-control -c $LAB/dnssec/unbound/unbound.conf) to flush.
# lab/DNSSEC.md lists the names and the verdicts a validator must give.

DNSSEC_ZONE=dnssec.test
DNSSEC_UNBOUND4=192.0.2.58 DNSSEC_UNBOUND6=2001:db8::58
DNSSEC_PROCS=(unbound-dnssec)
# zone  policy (Knot-signed) | presigned:INCEPTION:EXPIRATION (ldns-signzone; YYYYMMDDhhmmss or +N years from now:
# RRSIG times are serial numbers, RFC 4034 3.1.5, so they must stay within 68 years of now) | unsigned
DNSSEC_ZONES=(
    "deep.rsa.dnssec.test lab-ed25519"
    "rsa.dnssec.test lab-rsa-nsec3"
    "badds.dnssec.test lab-ecdsa-csk"
    "nsec3iter.dnssec.test lab-nsec3-200"
    "expired.dnssec.test presigned:20190101000000:20200101000000"
    "future.dnssec.test presigned:+1year:+2years"
    "unsigned.dnssec.test unsigned"
    "dnssec.test lab-ecdsa"
)

dnssec_addresses() {
    addr "$NS_DNS" "$DNSSEC_UNBOUND4/24"
    addr "$NS_DNS" "$DNSSEC_UNBOUND6/64" nodad
}

# Knot configuration: the policies (before the zone section) and the zones (appended to it).
dnssec_knot_policies() {
    cat <<EOF
policy:
  - id: lab-ecdsa
    algorithm: ecdsap256sha256
    manual: on
  - id: lab-ecdsa-csk
    algorithm: ecdsap256sha256
    single-type-signing: on
    manual: on
  - id: lab-rsa-nsec3
    algorithm: rsasha256
    ksk-size: 2048
    zsk-size: 2048
    manual: on
    nsec3: on
    nsec3-iterations: 0
    nsec3-salt-length: 0
  - id: lab-ed25519
    algorithm: ed25519
    single-type-signing: on
    manual: on
  - id: lab-nsec3-200
    algorithm: ecdsap256sha256
    single-type-signing: on
    manual: on
    nsec3: on
    nsec3-iterations: 200
    nsec3-salt-length: 8

EOF
}

dnssec_knot_zones() {
    local z zone kind
    for z in "${DNSSEC_ZONES[@]}"; do
        read -r zone kind <<<"$z"
        printf '  - domain: %s\n    file: "%s/dnssec/zones/%s.zone"\n' "$zone" "$LAB" "$zone"
        case "$kind" in
            presigned:*|unsigned) printf '    dnssec-signing: off\n' ;;
            *) printf '    dnssec-signing: on\n    dnssec-policy: %s\n' "$kind" ;;
        esac
    done
}

# ds_lines ZONE: the SHA-256 DS records of ZONE's KSK (or CSK) from Knot's KASP database, "NAME IN DS ..." lines.
dnssec_knot_ds() {
    keymgr -c "$LAB/dns/knot.conf" "$1" ds | awk '$2 == "DS" && $5 == 2 { $2 = "IN DS"; print }'
}

# Keys, DS records, zone files and anchors; done once per lab dir (Knot keeps its keys in $LAB/dns/db).
dnssec_prepare() {
    local dir="$LAB/dnssec" z zone kind tpl="$REPO/lab/zones/dnssec" out ds k inception expiration
    [[ -f $dir/.prepared ]] && return 0
    command -v keymgr >/dev/null && command -v ldns-signzone >/dev/null ||
        { log "keymgr or ldns-signzone not found: run Scripts/bootstrap"; return 1; }
    rm -rf "$dir"
    # Keys of an earlier, unfinished attempt would be used beside the new ones: start from none.
    pid_alive "$(read_pid knot)" || rm -rf "$LAB/dns/db/keys"
    mkdir -p "$dir/zones" "$dir/keys" "$dir/trust-anchors.d" "$dir/unbound"
    for z in "${DNSSEC_ZONES[@]}"; do
        read -r zone kind <<<"$z"
        cp "$tpl/$zone.zone" "$dir/zones/$zone.zone"
    done
    # Children first: each parent's zone file gets its children's DS before it is loaded (and signed).
    for z in "${DNSSEC_ZONES[@]}"; do
        read -r zone kind <<<"$z"
        out="$dir/zones/$zone.zone" ds=""
        case "$kind" in
            unsigned) continue ;;
            presigned:*)
                IFS=: read -r _ inception expiration <<<"$kind"
                [[ $inception == +* ]] && inception=$(date -u -d "now $inception" +%Y%m%d%H%M%S)
                [[ $expiration == +* ]] && expiration=$(date -u -d "now $expiration" +%Y%m%d%H%M%S)
                k=$(cd "$dir/keys" && ldns-keygen -a ECDSAP256SHA256 -k "$zone") || { log "ldns-keygen $zone failed"; return 1; }
                ldns-signzone -i "$inception" -e "$expiration" -f "$out.signed" "$out" "$dir/keys/$k" ||
                    { log "ldns-signzone $zone failed"; return 1; }
                mv "$out.signed" "$out"
                ds=$(ldns-key2ds -n -2 "$dir/keys/$k.key" | awk '{ $2 = ""; print }' | sed 's/  */ /g') ;;
            *)
                if [[ $kind == lab-ecdsa || $kind == lab-rsa-nsec3 ]]; then
                    keymgr -c "$LAB/dns/knot.conf" "$zone" generate ksk=yes >/dev/null &&
                        keymgr -c "$LAB/dns/knot.conf" "$zone" generate >/dev/null
                else
                    keymgr -c "$LAB/dns/knot.conf" "$zone" generate ksk=yes zsk=yes >/dev/null
                fi || { log "keymgr generate $zone failed"; return 1; }
                ds=$(dnssec_knot_ds "$zone") ;;
        esac
        [[ -n $ds ]] || { log "no DS for $zone"; return 1; }
        if [[ $zone == badds.* ]]; then
            # A DS that matches no key: the real key tag and algorithm, the digest's last byte changed.
            ds=$(awk '{ d = $NF; last = substr(d, length(d) - 1); $NF = substr(d, 1, length(d) - 2) (last == "00" ? "ff" : "00"); print }' <<<"$ds")
        fi
        if [[ $zone == "$DNSSEC_ZONE" ]]; then
            printf '; the lab trust anchor: the KSK of %s. (made by Scripts/lab up)\n%s\n' "$zone" "$ds" \
                >"$dir/trust-anchors.d/$zone.positive"
            printf '%s\n' "$ds" >"$dir/unbound-anchor.ds"
            k=$(keymgr -c "$LAB/dns/knot.conf" "$zone" list | awk '$3 == "KSK" { print $1; exit }')
            keymgr -c "$LAB/dns/knot.conf" "$zone" dnskey "$k" >"$dir/anchor.dnskey" || { log "no DNSKEY for $zone"; return 1; }
        else
            printf '%s\n' "$ds" >>"$dir/zones/${zone#*.}.zone"
        fi
    done
    chmod -R a+rX "$dir"
    touch "$dir/.prepared"
}

write_dnssec_unbound() {
    local dir="$LAB/dnssec/unbound"
    mkdir -p "$dir"
    cat >"$dir/unbound.conf" <<EOF
# discoverd lab: unbound-dnssec, the reference validator (generated by Scripts/lab, lab/dnssec.sh)
server:
    username: ""
    chroot: ""
    pidfile: ""
    directory: "$dir"
    use-syslog: no
    logfile: ""
    verbosity: 1
    val-log-level: 2
    num-threads: 1
    do-ip6: yes
    do-daemonize: no
    interface: $DNSSEC_UNBOUND4@53
    interface: $DNSSEC_UNBOUND6@53
    access-control: 0.0.0.0/0 allow
    access-control: ::/0 allow
    module-config: "validator iterator"
    trust-anchor-file: "$LAB/dnssec/unbound-anchor.ds"
    # RFC 9276: NSEC3 with more than 150 iterations is treated as insecure (nsec3iter.dnssec.test has 200).
    val-nsec3-keysize-iterations: "1024 150 2048 150 4096 150"
    ede: yes
    qname-minimisation: no
    aggressive-nsec: no
    serve-expired: no
    prefetch: no
    val-bogus-ttl: 5
    cache-max-negative-ttl: 5
    local-zone: "." refuse
    local-zone: "$DNSSEC_ZONE." transparent
    do-not-query-localhost: no
remote-control:
    control-enable: yes
    control-interface: "$dir/control.sock"
    control-use-cert: no
forward-zone:
    name: "$DNSSEC_ZONE."
    forward-addr: $FAULT4
EOF
}

dnssec_unbound_ok() {   # a validated (AD) answer from the reference validator: the whole chain works
    local out
    out=$(nsx "$NS_DNS" kdig +time=2 +retry=0 +dnssec "@$DNSSEC_UNBOUND4" "www.$DNSSEC_ZONE" A 2>/dev/null) &&
        grep -q 'status: NOERROR' <<<"$out" && grep -Eq '^;; Flags:[^;]* ad;' <<<"$out"
}

knot_serves_dnssec() {
    nsx "$NS_DNS" kdig +time=1 +retry=0 +norec "@$KNOT4" "$DNSSEC_ZONE" SOA 2>/dev/null | grep -q 'status: NOERROR'
}

start_dnssec_unbound() {
    pid_alive "$(read_pid unbound-dnssec)" && return 0
    # A Knot started by an older Scripts/lab (a lab that was up before this file existed) has no dnssec.test:
    # make it read the new configuration.
    if ! knot_serves_dnssec; then
        log "knot does not serve $DNSSEC_ZONE: reloading its configuration"
        knotc -c "$LAB/dns/knot.conf" reload >/dev/null 2>&1 || true
        wait_until knot "$READY_TIMEOUT" knot_serves_dnssec || return 1
    fi
    write_dnssec_unbound
    rm -f "$LAB/dnssec/unbound/control.sock"
    spawn unbound-dnssec "$NS_DNS" unbound -d -c "$LAB/dnssec/unbound/unbound.conf"
    WAIT_FAIL_RE='fatal error|could not open' wait_until unbound-dnssec "$READY_TIMEOUT" dnssec_unbound_ok || return 1
}

dnssec_env() {
    cat <<EOF
LAB_DNSSEC_ZONE=$DNSSEC_ZONE
LAB_DNSSEC_UNBOUND=$DNSSEC_UNBOUND4
LAB_DNSSEC_UNBOUND6=$DNSSEC_UNBOUND6
LAB_DNSSEC_UNBOUND_CONF=$LAB/dnssec/unbound/unbound.conf
LAB_DNSSEC_ANCHORS=$LAB/dnssec/trust-anchors.d
LAB_DNSSEC_POSITIVE=$LAB/dnssec/trust-anchors.d/$DNSSEC_ZONE.positive
LAB_DNSSEC_UNBOUND_ANCHOR=$LAB/dnssec/unbound-anchor.ds
LAB_DNSSEC_DNSKEY=$LAB/dnssec/anchor.dnskey
EOF
}
