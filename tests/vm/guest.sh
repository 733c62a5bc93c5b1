#!/usr/bin/env bash
# guest.sh OUT - inside the guest: soft-RoCE up, then every test of OUT/list.
#
# Two devices: rxe0 on veth0 (10.77.0.1) in the main namespace, rxe1 on
# veth1 (10.77.0.2) in namespace "b" (two ends in one namespace do not
# reach each other: the IP stack short-cuts local addresses).  rdma's
# netns mode stays shared: rxe devices cannot move to another namespace,
# so both are listed everywhere, and a test names the one it means.
out=$1
. "$out/env"
export build src
export PATH=$path
export HOME=/tmp
# A device is here: a test that skips because a transport cannot start
# fails instead (tests/lib/target.c).
export RMA_TEST_REQUIRE=1
ulimit -l unlimited
ulimit -n 65536

log() { echo "guest: $*"; }
ip link set lo up
ip link add veth0 type veth peer name veth1
ip netns add b
ip link set veth1 netns b
ip addr add 10.77.0.1/24 dev veth0
ip link set veth0 mtu 4200 up
ip netns exec b ip link set lo up
ip netns exec b ip addr add 10.77.0.2/24 dev veth1
ip netns exec b ip link set veth1 mtu 4200 up
rdma link add rxe0 type rxe netdev veth0 || log "rdma link add rxe0 failed"
ip netns exec b rdma link add rxe1 type rxe netdev veth1 || log "rdma link add rxe1 failed"
{ ibv_devinfo -l; ip netns exec b ibv_devinfo -l; } > "$out/devices" 2>&1

cd "$build"
: > "$out/summary"
while read -r name limit cmd; do
	[[ -z "$name" || "$name" == \#* ]] && continue
	start=$(date +%s%N)
	timeout -k 5 "$limit" bash -c "$cmd" > "$out/$name.log" 2>&1
	rc=$?
	ms=$((($(date +%s%N) - start) / 1000000))
	echo "$rc" > "$out/$name.rc"
	printf '%-44s rc %3d  %4d.%d s\n' "$name" "$rc" $((ms / 1000)) $((ms % 1000 / 100)) >> "$out/summary"
done < "$out/list"
touch "$out/done"
