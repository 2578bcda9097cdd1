# netnslib.sh: machines on a private network, for tests sourced after
# tests/lib.sh: a hub namespace holding a bridge (where the servers run)
# and one namespace per machine, each with its own address on a veth pair
# plugged into the bridge. Every address lives inside namespaces made here;
# the host's network is never touched, and the cleanup removes them all.
# Needs root and iproute2.
# shellcheck shell=bash disable=SC2034 # T_RUN_IN is lib.sh's

NS_NET=10.213.0 # the /24 every namespace's address is in
NS_HUB=
NS_MACHINES=()

# ns_enter NS: what nginx_start, o_start and fg_mount start from now on
# runs in namespace NS's network ("": the host's). nsenter execs the
# program, so its pid is the program's; only the network changes, so a
# FUSE mount made there is seen by every process here.
ns_enter() {
	if [ -n "$1" ]; then
		T_RUN_IN=(nsenter "--net=/run/netns/$1")
	else
		T_RUN_IN=()
	fi
}

# ns_remove: deletes every namespace ns_setup made (their veth pairs and
# the bridge go with them).
ns_remove() {
	local ns
	for ns in "${NS_MACHINES[@]}" $NS_HUB; do
		ip netns delete "$ns" 2>/dev/null || true
	done
	NS_MACHINES=()
	NS_HUB=
}

# ns_can: true when this host can make namespaces, veth pairs and bridges
# (root, iproute2, a kernel that allows them).
ns_can() {
	local probe=pfprobe$$ rc=0
	[ "$(id -u)" -eq 0 ] || return 1
	command -v ip >/dev/null && command -v nsenter >/dev/null || return 1
	ip netns add "$probe" 2>/dev/null || return 1
	ip -n "$probe" link add v0 type veth peer name v1 2>/dev/null || rc=1
	ip -n "$probe" link add b0 type bridge 2>/dev/null || rc=1
	ip netns delete "$probe" 2>/dev/null || true
	return "$rc"
}

# ns_setup N HUB_ADDRS...: a hub namespace (NS_HUB) with the bridge, holding
# HUB_ADDRS (host parts: "2 3" gives $NS_NET.2 and $NS_NET.3, for servers
# there), and N machine namespaces (NS_MACHINES[0..N-1]), the k-th at
# $NS_NET.(100 + k). Each has its loopback up.
ns_setup() {
	local n=$1 k ns a
	shift
	NS_HUB=pfh$$
	T_CLEANUPS+=(ns_remove)
	ip netns add "$NS_HUB" || return 1
	ip -n "$NS_HUB" link set lo up
	ip -n "$NS_HUB" link add br0 type bridge
	ip -n "$NS_HUB" link set br0 up
	for a in "$@"; do
		ip -n "$NS_HUB" addr add "$NS_NET.$a/24" dev br0 || return 1
	done
	for ((k = 0; k < n; k++)); do
		ns=pfm$$-$k
		ip netns add "$ns" || return 1
		NS_MACHINES+=("$ns")
		ip -n "$ns" link set lo up
		ip -n "$NS_HUB" link add "m$k" type veth peer name eth0 netns "$ns" || return 1
		ip -n "$NS_HUB" link set "m$k" master br0 up
		ip -n "$ns" addr add "$NS_NET.$((100 + k))/24" dev eth0
		ip -n "$ns" link set eth0 up
	done
}
