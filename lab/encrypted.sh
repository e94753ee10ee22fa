# Encrypted DNS in the lab (issue #16), sourced by Scripts/lab: a lab CA made with openssl at `up`, and Unbound
# serving DNS over TLS (tls-port 853) and DNS over HTTPS (https-port 443, HTTP/2 through nghttp2) in dlab-dns.
#
#   192.0.2.63 / 2001:db8::63  unbound-tls      good certificate: DNS:dns.lab.test, IP:192.0.2.63, IP:2001:db8::63
#   (each also serves plain DNS on 53 and answers _dns.resolver.arpa SVCB designating itself: DDR, RFC 9462)
#   192.0.2.64                 unbound-expired  certificate for dns.lab.test + IP, expired in 2021
#   192.0.2.65                 unbound-rogue    certificate for dns.lab.test + IP from a CA nobody trusts
#   192.0.2.66                 unbound-wrong    certificate for wrong.example only (no IP SAN)
#   192.0.2.67                 free for a DoH fault server started by a test (lab/dohfault.py)
#   192.0.2.68 / 2001:db8::68  dnsdist          a second implementation: dnsdist 1.7 (DoT through OpenSSL, DoH through
#                              h2o, HTTP/2), good certificate DNS:dns.lab.test, IP:192.0.2.68, IP:2001:db8::68; DoT on
#                              853 and DoH on 443 (/dns-query) only (no plain DNS, no DDR, no console, no webserver)
#
# Everything lives in $LAB/ca and $LAB/tls; the machine's trust store is never touched: clients are pointed at
# $LAB/ca/ca.pem (discoverd --ca-file, kdig +tls-ca=, dnspython ssl contexts). Addresses .63-.68: Scripts/bench
# puts its own fault server on .56.

TLS_GOOD4=192.0.2.63 TLS_GOOD6=2001:db8::63
TLS_EXPIRED4=192.0.2.64 TLS_ROGUE4=192.0.2.65 TLS_WRONG4=192.0.2.66 TLS_FAULT4=192.0.2.67
TLS_DNSDIST4=192.0.2.68 TLS_DNSDIST6=2001:db8::68
TLS_NAME=dns.lab.test
TLS_PROCS=(unbound-tls unbound-expired unbound-rogue unbound-wrong dnsdist)

tls_addresses() {
    local a
    for a in "$TLS_GOOD4" "$TLS_EXPIRED4" "$TLS_ROGUE4" "$TLS_WRONG4" "$TLS_FAULT4" "$TLS_DNSDIST4"; do
        addr "$NS_DNS" "$a/24"
    done
    addr "$NS_DNS" "$TLS_GOOD6/64" nodad
    addr "$NS_DNS" "$TLS_DNSDIST6/64" nodad
}

# leaf NAME SAN [CA]: key and certificate NAME signed by CA (ca or rogue), valid 30 days from now.
tls_leaf() {
    local name=$1 san=$2 ca=${3:-ca} dir="$LAB/ca"
    openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$dir/$name.key" \
        -subj "/CN=$name" -out "$dir/$name.csr" 2>/dev/null
    printf 'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\nsubjectAltName=%s\n' \
        "$san" >"$dir/$name.ext"
    openssl x509 -req -in "$dir/$name.csr" -CA "$dir/$ca.pem" -CAkey "$dir/$ca.key" -CAcreateserial \
        -days 30 -sha256 -extfile "$dir/$name.ext" -out "$dir/$name.pem" 2>/dev/null
}

make_lab_ca() {
    local dir="$LAB/ca"
    if [[ -s $dir/good.pem && -s $dir/expired.pem && -s $dir/rogue-leaf.pem && -s $dir/wrong.pem && -s $dir/dohfault.pem ]]
    then
        # A lab made before dnsdist joined it: its leaf only, from the CA the running servers already use.
        [[ -s $dir/dnsdist.pem ]] || { tls_leaf dnsdist "DNS:$TLS_NAME,IP:$TLS_DNSDIST4,IP:$TLS_DNSDIST6" &&
            chmod 0644 "$dir/dnsdist.pem"; }
        return
    fi
    command -v openssl >/dev/null || { log "openssl not found: run Scripts/bootstrap"; return 1; }
    mkdir -p "$dir/new"
    local ca
    for ca in ca rogue; do
        openssl req -x509 -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 30 -sha256 \
            -keyout "$dir/$ca.key" -out "$dir/$ca.pem" -subj "/CN=discoverd lab $ca CA" \
            -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign 2>/dev/null
    done
    tls_leaf good "DNS:$TLS_NAME,IP:$TLS_GOOD4,IP:$TLS_GOOD6"
    tls_leaf rogue-leaf "DNS:$TLS_NAME,IP:$TLS_ROGUE4" rogue
    tls_leaf wrong "DNS:wrong.example"
    tls_leaf dohfault "DNS:$TLS_NAME,IP:$TLS_FAULT4"
    tls_leaf dnsdist "DNS:$TLS_NAME,IP:$TLS_DNSDIST4,IP:$TLS_DNSDIST6"
    # Expired: openssl ca is the one openssl 3.0 command that takes a start and an end date in the past.
    : >"$dir/index.txt"; echo 1000 >"$dir/serial"
    cat >"$dir/ca.cnf" <<EOF
[ca]
default_ca = lab
[lab]
dir = $dir
database = $dir/index.txt
new_certs_dir = $dir/new
serial = $dir/serial
default_md = sha256
policy = anything
unique_subject = no
[anything]
commonName = supplied
[server]
basicConstraints = CA:FALSE
keyUsage = critical,digitalSignature
extendedKeyUsage = serverAuth
subjectAltName = DNS:$TLS_NAME,IP:$TLS_EXPIRED4
EOF
    openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$dir/expired.key" \
        -subj "/CN=$TLS_NAME" -out "$dir/expired.csr" 2>/dev/null
    openssl ca -batch -config "$dir/ca.cnf" -cert "$dir/ca.pem" -keyfile "$dir/ca.key" -in "$dir/expired.csr" \
        -out "$dir/expired.pem" -startdate 20200101000000Z -enddate 20210101000000Z -extensions server \
        -notext 2>/dev/null
    [[ -s $dir/good.pem && -s $dir/expired.pem && -s $dir/rogue-leaf.pem && -s $dir/wrong.pem && -s $dir/dnsdist.pem ]] ||
        { log "making the lab CA failed"; return 1; }
    chmod 0644 "$dir"/*.pem
}

# write_unbound_tls NAME CERT ADDR...: an Unbound forwarding lab.test to Knot through the fault server (so a test or
# the bench can delay or break the upstream behind it), DoT on 853, DoH on 443, plain on 53.
write_unbound_tls() {
    local name=$1 cert=$2; shift 2
    local dir="$LAB/tls/$name" a v4=() v6=() hints
    mkdir -p "$dir"
    # DDR (RFC 9462): each server designates itself, its own addresses as hints.
    for a in "$@"; do if [[ $a == *:* ]]; then v6+=("$a"); else v4+=("$a"); fi; done
    hints="ipv4hint=$(IFS=,; echo "${v4[*]}")"
    ((${#v6[@]})) && hints+=" ipv6hint=$(IFS=,; echo "${v6[*]}")"
    {
        cat <<EOF
# discoverd lab: $name (generated by Scripts/lab, lab/encrypted.sh)
server:
    username: ""
    chroot: ""
    pidfile: ""
    directory: "$dir"
    use-syslog: no
    logfile: ""
    verbosity: 1
    num-threads: 1
    do-ip6: yes
    do-daemonize: no
    port: 53
    tls-port: 853
    https-port: 443
    http-endpoint: "/dns-query"
    tls-service-key: "$LAB/ca/$cert.key"
    tls-service-pem: "$LAB/ca/$cert.pem"
    incoming-num-tcp: 1000
    tcp-idle-timeout: 30000
    edns-tcp-keepalive: yes
    access-control: 0.0.0.0/0 allow
    access-control: ::/0 allow
    module-config: "iterator"
    local-zone: "." refuse
    local-zone: "$ZONE." transparent
    # Scripts/bench-encrypted's capacity pass: every name under capacity.$ZONE answered here from local data,
    # not through the stub zone below (the fault server and Knot), so that the forwarders in front are measured.
    local-zone: "capacity.$ZONE." redirect
    local-data: "capacity.$ZONE. 300 IN A 192.0.2.250"
    do-not-query-localhost: no
    local-zone: "resolver.arpa." static
    local-data: '_dns.resolver.arpa. 300 IN SVCB 1 $TLS_NAME. alpn="dot" $hints'
    local-data: '_dns.resolver.arpa. 300 IN SVCB 2 $TLS_NAME. alpn="h2" key7="/dns-query{?dns}" $hints'
EOF
        for a in "$@"; do
            printf '    interface: %s@53\n    interface: %s@853\n    interface: %s@443\n' "$a" "$a" "$a"
        done
        cat <<EOF
stub-zone:
    name: "$ZONE."
    stub-addr: $FAULT4
    stub-no-cache: yes
EOF
    } >"$dir/unbound.conf"
}

tls_ok() {   # ADDR: a TLS handshake and a DNS answer over DoT (no verification: the bad certificates too)
    nsx "$NS_DNS" kdig +time=1 +retry=0 +tls "@$1" "$ZONE" SOA 2>/dev/null | grep -q 'status: NOERROR'
}

start_unbound_tls() {   # NAME CERT ADDR...
    local name=$1 cert=$2 first=$3
    pid_alive "$(read_pid "$name")" && return 0
    write_unbound_tls "$@"
    spawn "$name" "$NS_DNS" unbound -d -c "$LAB/tls/$name/unbound.conf"
    WAIT_FAIL_RE='fatal error|could not open' wait_until "$name" "$READY_TIMEOUT" tls_ok "$first" || return 1
}

# write_dnsdist: dnsdist in front of the same backend as the Unbound TLS servers (the fault server, which relays to
# Knot), so the same names answer the same way and a test can delay or break the upstream behind it. Listeners only
# on the lab addresses: DoT 853 and DoH 443 (/dns-query); no plain DNS (none listed: dnsdist adds its default
# 127.0.0.1:53 only when there is no listener at all), no console (no controlSocket), no webserver, no carbon, no
# security polling (setSecurityPollSuffix(""): it would ask secpoll.powerdns.com), no packet cache. The backend is
# set up by hand (setUp): no health-check queries in the fault server's counts and logs, and a fault rule cannot
# mark it down. Everything else is dnsdist 1.7's default, on purpose (a second implementation, not a copy of
# Unbound): e.g. tcpRecvTimeout 2 s (an idle DoT connection is closed by dnsdist after 2 s, Unbound waits 30 s).
write_dnsdist() {
    local dir="$LAB/tls/dnsdist" ca="$LAB/ca"
    mkdir -p "$dir"
    cat >"$dir/dnsdist.conf" <<EOF
-- discoverd lab: dnsdist (generated by Scripts/lab, lab/encrypted.sh)
setSecurityPollSuffix("")
setACL({"192.0.2.0/24", "2001:db8::/64"})
addTLSLocal("$TLS_DNSDIST4:853", "$ca/dnsdist.pem", "$ca/dnsdist.key", {provider="openssl"})
addTLSLocal("[$TLS_DNSDIST6]:853", "$ca/dnsdist.pem", "$ca/dnsdist.key", {provider="openssl"})
addDOHLocal("$TLS_DNSDIST4:443", "$ca/dnsdist.pem", "$ca/dnsdist.key", "/dns-query")
addDOHLocal("[$TLS_DNSDIST6]:443", "$ca/dnsdist.pem", "$ca/dnsdist.key", "/dns-query")
newServer({address="$FAULT4:53", name="dnsfault"}):setUp()
EOF
}

start_dnsdist() {
    pid_alive "$(read_pid dnsdist)" && return 0
    command -v dnsdist >/dev/null || { log "dnsdist not found: run Scripts/bootstrap"; return 1; }
    write_dnsdist
    nsx "$NS_DNS" dnsdist --check-config -C "$LAB/tls/dnsdist/dnsdist.conf" >>"$LAB/logs/dnsdist.log" 2>&1 ||
        { log "dnsdist: configuration rejected:"; tail -n 5 "$LAB/logs/dnsdist.log" >&2; return 1; }
    # --supervised: in the foreground, no console on stdin; --disable-syslog: its log is $LAB/logs/dnsdist.log.
    spawn dnsdist "$NS_DNS" dnsdist --supervised --disable-syslog -C "$LAB/tls/dnsdist/dnsdist.conf"
    WAIT_FAIL_RE='Fatal|Unable to bind' wait_until dnsdist "$READY_TIMEOUT" tls_ok "$TLS_DNSDIST4" || return 1
}

start_encrypted() {
    make_lab_ca || return 1
    start_unbound_tls unbound-tls good "$TLS_GOOD4" "$TLS_GOOD6" || return 1
    start_unbound_tls unbound-expired expired "$TLS_EXPIRED4" || return 1
    start_unbound_tls unbound-rogue rogue-leaf "$TLS_ROGUE4" || return 1
    start_unbound_tls unbound-wrong wrong "$TLS_WRONG4" || return 1
    start_dnsdist || return 1
}

tls_env() {
    cat <<EOF
LAB_CA=$LAB/ca/ca.pem
LAB_TLS_NAME=$TLS_NAME
LAB_TLS=$TLS_GOOD4
LAB_TLS6=$TLS_GOOD6
LAB_TLS_EXPIRED=$TLS_EXPIRED4
LAB_TLS_ROGUE=$TLS_ROGUE4
LAB_TLS_WRONG=$TLS_WRONG4
LAB_DOH_FAULT=$TLS_FAULT4
LAB_DNSDIST=$TLS_DNSDIST4
LAB_DNSDIST6=$TLS_DNSDIST6
EOF
}
