#!/usr/bin/env bash
# Builds the pinned tools the tests and `karpool up` run, into bin/.
#
# Each tool is pinned by a small wrapper module under hack/tools/<tool>/ (go.mod + go.sum), so a
# version change is a reviewed diff there. A build lands in a per-user cache keyed by the tool, its
# version and a hash of its wrapper module; bin/<binary> is a symlink into that cache. A fresh clone
# on the same machine (which is what CI is) therefore links instead of rebuilding, and a changed pin
# gets a new cache key and is rebuilt.
#
# Usage: hack/tools.sh [tool...]   (default: kube etcd kwok metrics-server controller-gen cue gitea helm —
# metrics-server serves the local control plane's metrics API, Gitea is the real forge of the
# pull-request tests, helm renders charts/karpool in the install test; only
# when named: kubectl, for the README's commands (`make up`), and karpenter, Karpenter's kwok
# provider and CRDs, for `make bench-vs-karpenter`)
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
bin="$root/bin"
cache="${KARPOOL_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/karpool/tools}"
mkdir -p "$bin" "$cache"

# tool -> version, and tool -> binaries it provides (first one is the build target name).
declare -A version=(
	[kube]=v1.36.3
	[kubectl]=v1.36.3
	[etcd]=v3.5.17
	[kwok]=v0.8.0
	[metrics-server]=v0.9.0
	[controller-gen]=v0.21.0
	[cue]=v0.17.1
	[karpenter]=v1.14.1
	[gitea]=v1.26.0
	[helm]=v4.3.1
)
declare -A binaries=(
	[kube]="kube-apiserver kube-controller-manager kube-scheduler"
	[kubectl]="kubectl"
	[etcd]="etcd"
	[kwok]="kwok kwok-stages.yaml"
	[metrics-server]="metrics-server"
	[controller-gen]="controller-gen"
	[cue]="cue"
	[karpenter]="karpenter-kwok karpenter-crds"
	[gitea]="gitea"
	[helm]="helm"
)
order=(kube etcd kwok metrics-server controller-gen cue gitea helm)

fail() {
	echo "tools: FAILED: $*" >&2
	exit 1
}

# run prints the command, runs it, and names it again if it fails.
run() {
	echo "+ $*"
	"$@" || fail "command exited $?: $*"
}

build_kube() {
	local out=$1 v=${version[kube]}
	local minor=${v#v1.}
	minor=${minor%%.*}
	# Without these the servers report v0.0.0-master and clients (kubectl, discovery) see nonsense.
	local ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$v \
-X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor \
-X k8s.io/component-base/version.gitTreeState=clean"
	(cd "$root/hack/tools/kube" && run go build -ldflags "$ldflags" -o "$out/" \
		k8s.io/kubernetes/cmd/kube-apiserver \
		k8s.io/kubernetes/cmd/kube-controller-manager \
		k8s.io/kubernetes/cmd/kube-scheduler)
}

build_kubectl() {
	local v=${version[kubectl]}
	local minor=${v#v1.}
	minor=${minor%%.*}
	# As build_kube: kubectl version then reports the pinned version.
	(cd "$root/hack/tools/kubectl" && run go build -ldflags "-s -w -X k8s.io/component-base/version.gitVersion=$v \
-X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor \
-X k8s.io/component-base/version.gitTreeState=clean" -o "$1/kubectl" k8s.io/kubernetes/cmd/kubectl)
}

build_etcd() {
	(cd "$root/hack/tools/etcd" && run go build -ldflags "-s -w" -o "$1/etcd" go.etcd.io/etcd/server/v3)
}

build_kwok() {
	local out=$1
	(cd "$root/hack/tools/kwok" && run go build -ldflags "-s -w" -o "$out/kwok" sigs.k8s.io/kwok/cmd/kwok)
	# kwok only moves nodes and pods through the stages it is given: the "fast" set makes nodes
	# Ready and pods Running at once, and lets deleted pods go.
	local dir
	dir=$(cd "$root/hack/tools/kwok" && go list -m -f '{{.Dir}}' sigs.k8s.io/kwok) || fail "locating the kwok module"
	local f first=1
	: >"$out/kwok-stages.yaml"
	for f in node/fast/node-initialize.yaml pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml; do
		[ -f "$dir/kustomize/stage/$f" ] || fail "kwok stage file missing: $dir/kustomize/stage/$f"
		if [ $first -eq 0 ]; then echo "---" >>"$out/kwok-stages.yaml"; fi
		first=0
		cat "$dir/kustomize/stage/$f" >>"$out/kwok-stages.yaml"
	done
}

build_metrics-server() {
	# Without the version, metrics-server reports v0.0.0-master.
	(cd "$root/hack/tools/metrics-server" && run go build -ldflags "-s -w -X k8s.io/client-go/pkg/version.gitVersion=${version[metrics-server]}" \
		-o "$1/metrics-server" sigs.k8s.io/metrics-server/cmd/metrics-server)
}

build_controller-gen() {
	(cd "$root/hack/tools/controller-gen" && run go build -o "$1/controller-gen" sigs.k8s.io/controller-tools/cmd/controller-gen)
}

build_cue() {
	(cd "$root/hack/tools/cue" && run go build -o "$1/cue" cuelang.org/go/cmd/cue)
}

build_karpenter() {
	local out=$1
	(cd "$root/hack/tools/karpenter" && run go build -ldflags "-s -w" -o "$out/karpenter-kwok" sigs.k8s.io/karpenter/kwok)
	# Karpenter's own CRDs and the KWOKNodeClass CRD, as the module ships them.
	local dir
	dir=$(cd "$root/hack/tools/karpenter" && go list -m -f '{{.Dir}}' sigs.k8s.io/karpenter) || fail "locating the karpenter module"
	mkdir -p "$out/karpenter-crds"
	cp "$dir"/pkg/apis/crds/*.yaml "$dir"/kwok/apis/crds/*.yaml "$out/karpenter-crds/" || fail "copying Karpenter's CRDs"
	chmod u+w "$out"/karpenter-crds/*.yaml
}

build_helm() {
	# Without the version, helm reports only the minor version (v4.3).
	(cd "$root/hack/tools/helm" && run go build -ldflags "-s -w -X helm.sh/helm/v4/internal/version.version=${version[helm]}" \
		-o "$1/helm" helm.sh/helm/v4/cmd/helm)
}

build_gitea() {
	local out=$1 v=${version[gitea]}
	local mod="$root/hack/tools/gitea"
	local tags="bindata sqlite sqlite_unlock_notify"
	# bindata embeds Gitea's templates/, options/ and public/ so the binary needs nothing beside it
	# at run time. The embedded files (bindata.dat) are made by Gitea's own go:generate lines and are
	# not in the module zip; the module cache is read-only (and -overlay refuses files under
	# GOMODCACHE), so generate them in a writable copy of the module and build against that copy
	# through a directory replace in a throwaway copy of the wrapper's go.mod.
	local dir
	# go list reports no directory for a module that is not in the module cache yet.
	(cd "$mod" && run go mod download code.gitea.io/gitea)
	dir=$(cd "$mod" && go list -m -f '{{.Dir}}' code.gitea.io/gitea) || fail "locating the gitea module"
	[ -n "$dir" ] && [ -d "$dir" ] || fail "the gitea module is not in the module cache after go mod download"
	local src="$out/.src"
	run cp -R "$dir" "$src"
	chmod -R u+w "$src"
	(cd "$src" && run env CGO_ENABLED=0 go generate -tags bindata \
		./modules/options ./modules/templates ./modules/public ./modules/migration)
	cp "$mod/go.mod" "$out/.build.mod" && cp "$mod/go.sum" "$out/.build.sum" || fail "copying the gitea wrapper module"
	echo "replace code.gitea.io/gitea => $src" >>"$out/.build.mod"
	# cgo is required: without it go-sqlite3 builds a stub that fails only at run time.
	(cd "$mod" && run env CGO_ENABLED=1 go build -modfile="$out/.build.mod" -tags "$tags" \
		-ldflags "-s -w -X main.Version=${v#v} -X 'main.Tags=$tags'" -o "$out/gitea" code.gitea.io/gitea)
	rm -rf "$src" "$out/.build.mod" "$out/.build.sum"
}

# key names the cache entry: the pinned version plus a hash of the wrapper module, so editing
# the pin (or the recipe in this script) yields a new entry instead of a stale binary.
key() {
	local t=$1 h
	h=$(cat "$root/hack/tools/$t/go.mod" "$root/hack/tools/$t/go.sum" <(declare -f "build_$t") | sha256sum | cut -c1-12)
	echo "$t-${version[$t]}-$h"
}

ensure() {
	local t=$1 dir b ok=1
	dir="$cache/$(key "$t")"
	for b in ${binaries[$t]}; do
		if [ "$(readlink "$bin/$b" 2>/dev/null)" != "$dir/$b" ] || [ ! -e "$bin/$b" ]; then ok=0; fi
	done
	if [ $ok -eq 1 ]; then
		echo "tools: $t ${version[$t]} up to date"
		return
	fi
	if [ ! -f "$dir/.complete" ]; then
		echo "tools: building $t ${version[$t]} into $dir"
		local start=$SECONDS tmp="$dir.tmp.$$"
		rm -rf "$tmp"
		mkdir -p "$tmp"
		"build_$t" "$tmp"
		touch "$tmp/.complete"
		rm -rf "$dir"
		mv "$tmp" "$dir"
		echo "tools: built $t ${version[$t]} in $((SECONDS - start))s"
	else
		echo "tools: linking cached $t ${version[$t]} from $dir"
	fi
	for b in ${binaries[$t]}; do
		[ -e "$dir/$b" ] || fail "$t build did not produce $b"
		ln -sfn "$dir/$b" "$bin/$b"
	done
}

want=("$@")
[ ${#want[@]} -gt 0 ] || want=("${order[@]}")
for t in "${want[@]}"; do
	[ -n "${version[$t]:-}" ] || fail "unknown tool '$t' (known: ${order[*]})"
done

for t in "${want[@]}"; do
	ensure "$t"
done
