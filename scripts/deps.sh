#!/usr/bin/env bash
# deps.sh - make sure the Debian packages rma builds and tests with are here.
#
# Checks with dpkg-query; installs what is missing when run as root,
# otherwise prints the exact command to run and exits 1.
#   scripts/deps.sh          check (and install as root)
#   scripts/deps.sh --bench  the same, with what bench/compare adds
#   scripts/deps.sh --list   print the package list and exit
set -euo pipefail

# The one list.  clang + libclang-rt-14-dev: libFuzzer and sanitizer
# runtimes for the fuzz build; iperf3: bench/compare.sh; libcmocka-dev: unit
# tests that wrap library calls; libfabric-dev: the ofi transport (built when
# pkg-config finds it); libibverbs-dev: the verbs transport (built when
# found); ibverbs-providers: the NIC drivers libibverbs loads at run time.
PACKAGES=(
	build-essential
	cmake
	pkg-config
	clang
	libclang-rt-14-dev
	iperf3
	python3
	libcmocka-dev
	libfabric-dev
	libibverbs-dev
	ibverbs-providers
	valgrind
	# the soft-RoCE guest of make rdma (tests/vm): QEMU, its initramfs
	# (busybox, cpio, kmod's depmod), and in the guest rdma(8), the
	# rxe provider's tools and libfabric's verbs provider
	qemu-system-x86
	busybox-static
	cpio
	kmod
	rdma-core
	ibverbs-utils
	iproute2
)

# bench/compare's systems and plots besides: UCX's UCP library and headers
# (bench/ucx_rma.c), gnuplot (the PNG plots).
BENCH_PACKAGES=(
	libucx-dev
	gnuplot-nox
)

if [[ "${1:-}" == "--bench" ]]; then
	PACKAGES+=("${BENCH_PACKAGES[@]}")
	shift
fi

if [[ "${1:-}" == "--list" ]]; then
	printf '%s\n' "${PACKAGES[@]}"
	exit 0
fi

if ! command -v dpkg-query >/dev/null 2>&1; then
	echo "deps.sh: no dpkg-query: not a Debian system; make sure these are installed:" >&2
	echo "  ${PACKAGES[*]}" >&2
	exit 0
fi

missing=()
for p in "${PACKAGES[@]}"; do
	status=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
	[[ "$status" == "installed" ]] || missing+=("$p")
done

[[ ${#missing[@]} -eq 0 ]] && exit 0

if [[ "$(id -u)" -eq 0 ]]; then
	echo "deps.sh: installing: ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update
	apt-get install -y --no-install-recommends "${missing[@]}"
	exit 0
fi

echo "deps.sh: missing packages: ${missing[*]}" >&2
echo "run:" >&2
echo "  sudo apt-get install -y --no-install-recommends ${missing[*]}" >&2
exit 1
