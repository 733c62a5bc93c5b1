#!/usr/bin/env bash
# rdma-vm.sh [RUNS] - rma over verbs and ofi:prov=verbs beside the device's
# own tools, on soft-RoCE in the QEMU guest of tests/vm, in one guest boot.
#
# Per run, on rxe0 (initiator and target on the one device): perftest's
# ib_write_bw, ib_read_bw (64 KiB, 1 MiB, 16 MiB) and ib_write_lat,
# ib_read_lat (8 B); ucx_perftest with UCX_TLS=rc_verbs,ud_verbs (ucp_put_bw,
# ucp_get, ucp_put_lat); `rma bench --transport verbs`; and
# `rma bench --transport ofi:prov=verbs` beside bench/fi_rma, the bare
# libfabric loop over verbs;ofi_rxm.  The guest's CPU is emulated (TCG):
# these are ratios of software cost on one device, never line rate.
# Needs a build (make build); writes bench/results/rdma-DATE/ and prints
# the table (bench/rdma-vm.py).  Not part of make test.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/.." && pwd)
build=${BUILD:-$src/build}
runs=${1:-3}
out=$src/bench/results/rdma-$(date -u +%Y-%m-%d-%H%M)
mkdir -p "$out"
list=$build/vm/bench.list
rma=$build/tools/rma/rma
fi=$build/tests/bench_fi_rma
[[ -x $rma && -x $fi ]] || { echo "rdma-vm.sh: build first (make build)" >&2; exit 1; }

sizes="65536 1048576 16777216"
: > "$list"
add() { echo "$1 120 $2" >> "$list"; }
# server & then client, on the one device, GID 1 (RoCE v2)
pair() { echo "($1 >/dev/null 2>&1 & sleep 1; $2 10.77.0.1; wait)"; }
for r in $(seq 1 "$runs"); do
	for s in $sizes; do
		n=$((64 * 1048576 / s)); [[ $n -lt 20 ]] && n=20
		for t in write read; do
			pt="ib_${t}_bw -d rxe0 -x 1 -F -s $s -n $n --report_gbits"
			add "r$r.perftest.${t}_bw.$s" "$(pair "$pt" "$pt")"
		done
		add "r$r.ucx.put_bw.$s" "$(pair "env UCX_TLS=rc_verbs,ud_verbs UCX_NET_DEVICES=rxe0:1 ucx_perftest -t ucp_put_bw -s $s -n 200" "env UCX_TLS=rc_verbs,ud_verbs UCX_NET_DEVICES=rxe0:1 ucx_perftest -t ucp_put_bw -s $s -n 200")"
		add "r$r.ucx.get_bw.$s" "$(pair "env UCX_TLS=rc_verbs,ud_verbs UCX_NET_DEVICES=rxe0:1 ucx_perftest -t ucp_get -s $s -n 200" "env UCX_TLS=rc_verbs,ud_verbs UCX_NET_DEVICES=rxe0:1 ucx_perftest -t ucp_get -s $s -n 200")"
	done
	for t in write read; do
		pt="ib_${t}_lat -d rxe0 -x 1 -F -s 8 -n 2000"
		add "r$r.perftest.${t}_lat.8" "$(pair "$pt" "$pt")"
	done
	add "r$r.ucx.put_lat.8" "$(pair "env UCX_TLS=rc_verbs,ud_verbs UCX_NET_DEVICES=rxe0:1 ucx_perftest -t ucp_put_lat -s 8 -n 2000" "env UCX_TLS=rc_verbs,ud_verbs UCX_NET_DEVICES=rxe0:1 ucx_perftest -t ucp_put_lat -s 8 -n 2000")"
	for op in put get; do
		add "r$r.rma.verbs.$op" "$rma bench -t verbs --op $op -s 8,${sizes// /,} -d 1 --json"
		add "r$r.rma.ofi.$op" "$rma bench -t ofi:prov=verbs --op $op -s 8,${sizes// /,} -d 1 --json"
		add "r$r.fi.$op" "FI_UNIVERSE_SIZE=64 $fi --transport verbs --op $op --sizes 8,${sizes// /,} --duration 1000"
	done
done
RMA_VM_TIMEOUT=${RMA_VM_TIMEOUT:-2400} bash "$src/tests/vm/run.sh" "$build" "$list" > "$out/summary.txt" || true
cp "$build"/vm/out/*.log "$out/" 2>/dev/null || true
python3 "$here/rdma-vm.py" "$out" | tee "$out/table.md"
