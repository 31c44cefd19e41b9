#!/bin/sh
# Install the Debian packages Steer needs, only those that are missing.
#
#   scripts/setup-deps.sh run    build and run steerd (make run)
#   scripts/setup-deps.sh test   everything: the above plus the test suite, sanitizer and fuzz
#                                builds and the benchmark peers (make test, make bench)
#
# Idempotent: when everything is installed it only checks and exits, without touching apt or the
# network. Runs as root, or through sudo when that is available. Target: Debian 12 (bookworm).
set -eu

RUN_PKGS="build-essential meson ninja-build pkg-config libknot-dev liburcu-dev libyaml-dev
	libev-dev libjansson-dev libmaxminddb-dev libcurl4-openssl-dev knot-dnsutils
	libmicrohttpd-dev libfstrm-dev libprotobuf-c-dev protobuf-c-compiler libsystemd-dev libssl-dev
	zlib1g-dev"
# The tests: clang for the libFuzzer targets, the reference server and clients of the
# differential and integration tests, unbound (the ECS resolver of the GSLB test) and iproute2
# for the network-namespace tests; the benchmark peers (knot is also the differential reference).
# The forwarder failover lab (tests/integration/fwdlab.py): unbound per link, knot for the
# hierarchy, nftables for the drop and loss faults, dnsdist as a peer forwarder.
# The cluster lab (tests/integration/clusterlab.py): BIRD 2 and FRR as routers and node
# speakers, keepalived for the VRRP pair.
# Operations: Prometheus scrapes /metrics, dnstap-read (bind9-dnsutils) and fstrm_capture read
# the dnstap log, headless Chromium (driven over the DevTools protocol with python3-websocket)
# loads the status page; bench/ops.py compares the price of dnstap with Knot's dnstap module.
# Load feedback: prometheus-node-exporter (and nginx's stub_status) are the metrics monitors'
# real endpoints.
# Zone transfers and TSIG: BIND's named is a primary and a secondary of Steer (with Knot).
# Packaging: groff and man-db render the man pages, systemd's systemd-analyze,
# systemd-sysusers and systemd-tmpfiles check the unit and the entries.
TEST_PKGS="clang libclang-rt-14-dev clang-format knot bind9-dnsutils python3 python3-pytest
	python3-dnspython python3-yaml iproute2 nsd gdnsd dnsperf libmaxmind-db-writer-perl mmdb-bin
	unbound nginx-light openssl nftables dnsdist bird2 frr keepalived prometheus fstrm-bin
	chromium python3-websocket groff-base man-db systemd knot-module-dnstap
	prometheus-node-exporter bind9"

level=${1:-}
case "$level" in
run) pkgs=$RUN_PKGS ;;
test) pkgs="$RUN_PKGS $TEST_PKGS" ;;
*)
	echo "usage: $0 run|test" >&2
	exit 2
	;;
esac

installed() {
	[ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null)" = "install ok installed" ]
}

missing=""
for p in $pkgs; do
	installed "$p" || missing="$missing $p"
done
if [ -z "$missing" ]; then
	echo "setup-deps: all $level dependencies are installed"
	exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
	echo "setup-deps: missing packages:$missing" >&2
	echo "setup-deps: this script needs apt-get (Debian 12); install them by hand" >&2
	exit 1
fi

if [ "$(id -u)" -eq 0 ]; then
	SUDO=""
elif command -v sudo >/dev/null 2>&1; then
	SUDO="sudo"
else
	echo "setup-deps: missing packages:$missing" >&2
	echo "setup-deps: not root and sudo is not available; run as root" >&2
	exit 1
fi

echo "setup-deps: installing:$missing"

# The DNS servers installed for the tests (knot, nsd, gdnsd) would be started by their
# maintainer scripts and fight over port 53; the tests and the benchmark start their own
# instances. A temporary policy-rc.d (see invoke-rc.d(8)) keeps services from starting during
# this install only; an existing policy file is left alone.
policy=/usr/sbin/policy-rc.d
own_policy=0
if [ ! -e "$policy" ]; then
	$SUDO sh -c "printf '#!/bin/sh\nexit 101\n' > $policy && chmod 755 $policy"
	own_policy=1
fi
cleanup() {
	if [ "$own_policy" -eq 1 ]; then
		$SUDO rm -f "$policy"
	fi
}
trap cleanup EXIT INT TERM

export DEBIAN_FRONTEND=noninteractive
# shellcheck disable=SC2086
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -q
# shellcheck disable=SC2086
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $missing

still=""
for p in $pkgs; do
	installed "$p" || still="$still $p"
done
if [ -n "$still" ]; then
	echo "setup-deps: still missing after install:$still" >&2
	exit 1
fi
echo "setup-deps: done"
