#!/bin/sh
# Two hosts, made of two network namespaces joined by a veth pair (root
# only; exit 77 otherwise).  Host A also has an interface, created first,
# that peers cannot reach (one end of a veth pair kept inside A).  A target on A listening on every address
# (0.0.0.0, then [::]) must advertise A's address on the veth (the default
# route's interface), not the other one's: `rma put` and `rma get` from B then
# agree with the target's crc32c.  --advertise names the address explicitly.
RMA=$1
. "$(dirname "$0")/cli_lib.sh"

[ "$(id -u)" = 0 ] || { echo "SKIP: needs root for network namespaces"; exit 77; }
command -v ip >/dev/null || { echo "SKIP: no ip(8)"; exit 77; }
A=rma-a-$$
B=rma-b-$$
netns_cleanup() {
	ip netns del "$A" 2>/dev/null
	ip netns del "$B" 2>/dev/null
	cleanup
}
trap netns_cleanup EXIT
if ! ip netns add "$A" 2>/dev/null || ! ip netns add "$B" 2>/dev/null; then
	echo "SKIP: cannot create network namespaces here"
	exit 77
fi
inA() { ip netns exec "$A" "$@"; }
inB() { ip netns exec "$B" "$@"; }
set -e
inA ip link set lo up
inB ip link set lo up
inA ip link add d0 type veth peer name d1
inA ip addr add 10.232.0.1/24 dev d0
inA ip -6 addr add fd78::1/64 dev d0 nodad
inA ip link set d0 up
inA ip link set d1 up
ip link add va-$$ netns "$A" type veth peer name vb-$$ netns "$B"
inA ip addr add 10.231.0.1/24 dev va-$$
inB ip addr add 10.231.0.2/24 dev vb-$$
inA ip -6 addr add fd77::1/64 dev va-$$ nodad
inB ip -6 addr add fd77::2/64 dev vb-$$ nodad
inA ip link set va-$$ up
inB ip link set vb-$$ up
inA ip route add default via 10.231.0.2
set +e

# The target runs in A: through a wrapper, so cli_lib's start_target works.
printf '#!/bin/sh\nexec ip netns exec %s %s "$@"\n' "$A" "$RMA" >"$tmp/rma-a"
chmod +x "$tmp/rma-a"
RMA_HOST=$RMA
SIZE=1048576

round() { # round NAME EXPECTED-ADDRESS TARGET-ARGS...
	name=$1 want=$2
	shift 2
	RMA=$tmp/rma-a
	RMA_LOG=info start_target --transport tcp --size $SIZE "$@"
	RMA=$RMA_HOST
	grep -q "advertising $want:" "$tmp/target.err" ||
		fail "$name: target did not advertise $want"
	inB "$RMA" put "$token" --fill 9 --size $SIZE --timeout 30s \
		>"$tmp/put.out" 2>"$tmp/put.err" || fail "$name: put from B: status $?"
	inB "$RMA" get "$token" --size $SIZE --timeout 30s \
		>"$tmp/get.out" 2>"$tmp/get.err" || fail "$name: get from B: status $?"
	put=$(crc_of "$tmp/put.out")
	get=$(crc_of "$tmp/get.out")
	[ -n "$put" ] && [ "$put" = "$get" ] || fail "$name: put crc $put, get crc $get"
	stop_target
	[ "$final" = "$put" ] || fail "$name: target's crc $final != put's $put"
	echo "ok: $name ($want)"
}

round ipv4-any 10.231.0.1 --listen 0.0.0.0:0
round ipv6-any '\[fd77::1\]' --listen '[::]:0'
round advertise 10.231.0.1 --listen 0.0.0.0:0 --advertise 10.231.0.1
