#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# rails.sh: N network rails between two network namespaces, for the rails tests.
#
#   RIO_RAILS_ID=ID rails.sh up N RATE[,RATE...]   build rails 0..N-1 (rates in tc units: 1gbit)
#   RIO_RAILS_ID=ID rails.sh down                  remove everything up built
#   RIO_RAILS_ID=ID rails.sh fail RAIL linkdown|drop|reset|brownout
#   RIO_RAILS_ID=ID rails.sh heal RAIL              undo every fault on RAIL
#   RIO_RAILS_ID=ID rails.sh rate RAIL RATE         reshape RAIL (both ends) to RATE from now on
#   rails.sh gc                                     remove rails whose owner pid is gone
#   rails.sh check                                  exit 0 if this machine can host rails, 77 if not
#
# ID (default: the caller's pid) names the namespaces rio-c-ID (client) and
# rio-s-ID (server); when ID is a live pid, `gc` leaves it alone, so tests use
# their own pid. Rail i is a veth pair rcIDrI (client ns, 10.99.i.1/30) <->
# rsIDrI (server ns, 10.99.i.2/30), shaped with tbf on both ends (burst
# max(128kb, R/500 bytes), latency 5ms). Nothing is created in the root
# namespace and nothing there routes to 10.99.0.0/16: both ends of a test run
# inside the namespaces (`ip netns exec`, or setns(2) from C).
#
# Faults act in the client namespace: linkdown sets the client end down;
# drop and reset add an nft table (drop, or reject with tcp reset, every
# packet of the rail's client end, both ways); brownout replaces the tbf of
# both ends with 8kbit. heal brings the link up, deletes the table and puts
# the rail's own rate back (tc qdisc replace).
set -euo pipefail

id="${RIO_RAILS_ID:-$PPID}"
cns="rio-c-$id"
sns="rio-s-$id"
state="/run/rio-rails-$id"

die() {
    echo "rails.sh: $*" >&2
    exit 1
}

# tc rate text -> bits per second
rate_bps() {
    local r="$1" n unit
    n="${r%%[a-zA-Z]*}"
    unit="${r#"$n"}"
    case "$unit" in
    gbit) echo $((n * 1000000000)) ;;
    mbit) echo $((n * 1000000)) ;;
    kbit) echo $((n * 1000)) ;;
    bit | "") echo "$n" ;;
    *) die "rate $r: use bit, kbit, mbit or gbit" ;;
    esac
}

shape() { # ns dev rate
    local bps burst
    bps=$(rate_bps "$3")
    burst=$((bps / 8 / 500))
    [ "$burst" -lt 131072 ] && burst=131072
    ip netns exec "$1" tc qdisc replace dev "$2" root tbf rate "$3" burst "$burst" latency 5ms
}

cdev() { echo "rc${id}r$1"; }
sdev() { echo "rs${id}r$1"; }

sysctls() { # ns
    ip netns exec "$1" sysctl -q -w net.ipv6.conf.all.disable_ipv6=1 \
        net.ipv6.conf.default.disable_ipv6=1 net.ipv4.conf.all.arp_ignore=1 \
        net.ipv4.conf.all.arp_announce=2 net.ipv4.conf.all.rp_filter=0 \
        net.ipv4.conf.default.rp_filter=0 >/dev/null
}

# Both ends of rail i report carrier (LOWER_UP) and the client has its
# connected route back (it goes with the link): 5 s at most.
wait_up() {
    local k
    for ((k = 0; k < 100; k++)); do
        if ip -n "$cns" link show dev "$(cdev "$1")" | grep -q LOWER_UP &&
            ip -n "$sns" link show dev "$(sdev "$1")" | grep -q LOWER_UP &&
            ip -n "$cns" route show "10.99.$1.0/30" | grep -q .; then
            return 0
        fi
        sleep 0.05
    done
    return 1
}

check() {
    if [ "$(id -u)" -ne 0 ]; then
        echo "rails.sh: not root: network namespaces need CAP_SYS_ADMIN" >&2
        exit 77
    fi
    command -v ip >/dev/null && command -v tc >/dev/null || {
        echo "rails.sh: ip/tc (iproute2) not installed" >&2
        exit 77
    }
    local probe="rio-probe-$$"
    if ! ip netns add "$probe" 2>/dev/null; then
        echo "rails.sh: network namespaces unavailable here (ip netns add failed)" >&2
        exit 77
    fi
    if ! ip -n "$probe" link add rpa$$ type veth peer name rpb$$ 2>/dev/null; then
        ip netns del "$probe"
        echo "rails.sh: veth unavailable here (ip link add type veth failed)" >&2
        exit 77
    fi
    if ! ip netns exec "$probe" tc qdisc add dev rpa$$ root tbf rate 1gbit burst 250000 \
        latency 5ms 2>/dev/null; then
        ip netns del "$probe"
        echo "rails.sh: tc tbf unavailable here" >&2
        exit 77
    fi
    ip netns del "$probe"
}

down() {
    ip netns del "$cns" 2>/dev/null || true # deleting a ns removes its veth ends
    ip netns del "$sns" 2>/dev/null || true
    rm -rf "$state"
}

up() {
    local n="$1" rates="$2" i r
    [[ "$n" =~ ^[0-9]+$ ]] && [ "$n" -ge 1 ] && [ "$n" -le 16 ] || die "up: N must be 1..16"
    IFS=, read -r -a rl <<<"$rates"
    [ "${#rl[@]}" -ge 1 ] || die "up: no rate"
    down
    mkdir -p "$state"
    ip netns add "$cns"
    ip netns add "$sns"
    sysctls "$cns"
    sysctls "$sns"
    ip -n "$cns" link set lo up
    ip -n "$sns" link set lo up
    for ((i = 0; i < n; i++)); do
        r="${rl[$((i < ${#rl[@]} ? i : ${#rl[@]} - 1))]}"
        rate_bps "$r" >/dev/null
        echo "$r" >"$state/rate$i"
        ip link add "$(cdev $i)" netns "$cns" type veth peer name "$(sdev $i)" netns "$sns"
        ip netns exec "$cns" sysctl -q -w "net.ipv4.conf.$(cdev $i).rp_filter=0" \
            "net.ipv4.conf.$(cdev $i).arp_ignore=1" "net.ipv4.conf.$(cdev $i).arp_announce=2" >/dev/null
        ip netns exec "$sns" sysctl -q -w "net.ipv4.conf.$(sdev $i).rp_filter=0" \
            "net.ipv4.conf.$(sdev $i).arp_ignore=1" "net.ipv4.conf.$(sdev $i).arp_announce=2" >/dev/null
        ip -n "$cns" addr add "10.99.$i.1/30" dev "$(cdev $i)"
        ip -n "$sns" addr add "10.99.$i.2/30" dev "$(sdev $i)"
        ip -n "$cns" link set "$(cdev $i)" up
        ip -n "$sns" link set "$(sdev $i)" up
        shape "$cns" "$(cdev $i)" "$r"
        shape "$sns" "$(sdev $i)" "$r"
    done
    for ((i = 0; i < n; i++)); do
        wait_up "$i" || die "rail $i (10.99.$i.1 -> 10.99.$i.2) is not up"
    done
    echo "$cns $sns"
}

fail() {
    local i="$1" how="$2" dev
    dev=$(cdev "$i")
    [ -f "$state/rate$i" ] || die "fail: no rail $i"
    case "$how" in
    linkdown) ip -n "$cns" link set "$dev" down ;;
    drop | reset)
        command -v nft >/dev/null || die "nft not installed (scripts/install-deps.sh)"
        local verdict="drop"
        [ "$how" = reset ] && verdict="meta l4proto tcp reject with tcp reset"
        ip netns exec "$cns" nft -f - <<EOF
table inet rio_rail$i
delete table inet rio_rail$i
table inet rio_rail$i {
    chain in { type filter hook input priority 0; policy accept; iifname "$dev" $verdict; }
    chain out { type filter hook output priority 0; policy accept; oifname "$dev" $verdict; }
}
EOF
        ;;
    brownout)
        shape "$cns" "$dev" 8kbit
        shape "$sns" "$(sdev "$i")" 8kbit
        ;;
    *) die "fail: linkdown|drop|reset|brownout" ;;
    esac
}

heal() {
    local i="$1" r
    [ -f "$state/rate$i" ] || die "heal: no rail $i"
    r=$(cat "$state/rate$i")
    ip -n "$cns" link set "$(cdev "$i")" up
    if command -v nft >/dev/null; then
        ip netns exec "$cns" nft delete table inet "rio_rail$i" 2>/dev/null || true
    fi
    shape "$cns" "$(cdev "$i")" "$r"
    shape "$sns" "$(sdev "$i")" "$r"
    wait_up "$i" || die "heal: rail $i is not up"
}

rate() {
    local i="$1" r="$2"
    [ -f "$state/rate$i" ] || die "rate: no rail $i"
    rate_bps "$r" >/dev/null
    echo "$r" >"$state/rate$i"
    shape "$cns" "$(cdev "$i")" "$r"
    shape "$sns" "$(sdev "$i")" "$r"
}

gc() {
    local ns p
    for ns in $(ip netns list 2>/dev/null | awk '{print $1}'); do
        case "$ns" in
        rio-c-* | rio-s-*)
            p="${ns#rio-?-}"
            if [[ "$p" =~ ^[0-9]+$ ]] && ! kill -0 "$p" 2>/dev/null; then
                ip netns del "$ns" 2>/dev/null || true
                rm -rf "/run/rio-rails-$p"
            fi
            ;;
        esac
    done
}

cmd="${1:-}"
shift || true
case "$cmd" in
check) check ;;
up)
    [ $# -eq 2 ] || die "usage: up N RATE[,RATE...]"
    gc
    up "$1" "$2"
    ;;
down) down ;;
fail)
    [ $# -eq 2 ] || die "usage: fail RAIL linkdown|drop|reset|brownout"
    fail "$1" "$2"
    ;;
heal)
    [ $# -eq 1 ] || die "usage: heal RAIL"
    heal "$1"
    ;;
rate)
    [ $# -eq 2 ] || die "usage: rate RAIL RATE"
    rate "$1" "$2"
    ;;
gc) gc ;;
*)
    sed -n '2,25s/^# \{0,1\}//p' "$0" >&2
    exit 2
    ;;
esac
