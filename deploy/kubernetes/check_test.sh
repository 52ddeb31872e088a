#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
# check_test.sh - check.py refuses a copy of the manifests that breaks each
# of its rules (and passes the tree's own: the control).  `make k8s-check`.
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=0 bad=0

# refused WHAT SED-ON-MANIFEST SED-ON-DOC WANT: the mutated copy fails with a line containing WANT
refused() {
	sed "$2" "$here/latch-node.yaml" >"$tmp/m.yaml"
	sed "$3" "$top/docs/kubernetes.md" >"$tmp/d.md"
	n=$((n + 1))
	if out=$(python3 "$here/check.py" "$tmp/m.yaml" "$tmp/d.md" 2>&1); then
		echo "not ok $n - $1: check.py passed it"; bad=1
	elif ! grep -qF -- "$4" <<<"$out"; then
		echo "not ok $n - $1: refused, but not for it: $out"; bad=1
	else
		echo "ok $n - $1"
	fi
}

n=$((n + 1))
if python3 "$here/check.py" "$here/latch-node.yaml" "$top/docs/kubernetes.md"; then echo "ok $n - the tree's manifests pass"; else echo "not ok $n - the tree's manifests"; bad=1; fi
refused "a privileged latchd" '/usr\/sbin\/latchd"\]/,/runAsUser/ s/runAsUser: 0/privileged: true\n            runAsUser: 0/' '' "container latchd is privileged"
refused "a key twice in one mapping" 's/^          command: \["\/usr\/sbin\/latchd"\]/&\n          securityContext: {privileged: true}/' '' "duplicate key"
refused "a capability the doc does not list" 's/add: \["BPF", "PERFMON", "NET_ADMIN", "NET_BIND_SERVICE"/add: ["BPF", "SYS_PTRACE", "PERFMON", "NET_ADMIN", "NET_BIND_SERVICE"/' '' "container latchd adds"
refused "the kits' secrets in latch-boot" 's/^            - {name: run-latch, mountPath: \/run\/latch}$/&\n            - {name: kit-secrets, mountPath: \/s}/' '' "mounts the kits' secrets"
refused "a host path the doc does not list" 's/^            - {name: cgroup, mountPath: \/sys\/fs\/cgroup}$/&\n            - {name: rootfs, mountPath: \/host}/; s/^      volumes:$/&\n        - {name: rootfs, hostPath: {path: \/}}/' '' "host paths mounted"
refused "not in the node's netns" 's/hostNetwork: true/hostNetwork: false/' '' "hostNetwork"
refused "latch-cni not last in the chain" 's/{"type": "latch-cni", "latch": {"profile": "sealed"}}/{"type": "latch-cni"}, {"type": "portmap"}/' '' "must come last"
refused "a YAML document that does not parse" 's/^kind: Namespace$/kind: [Namespace/' '' "m.yaml: while parsing"
echo "1..$n"
exit $bad
