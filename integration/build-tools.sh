#!/usr/bin/env bash
# Builds the integration lane's binaries from Go modules at pinned versions into
# ~/.cache/nemo-gke/integration/bin/<tool>-<version>; a binary already there is not rebuilt.
# Modules whose go.mod carries `replace` directives are built through the wrapper modules beside
# this script (integration/wrappers/<tool>/go.mod), which pin what the replaces pointed at.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=integration/versions.sh
. "$here/versions.sh"
cache=${NEMO_GKE_CACHE:-$HOME/.cache/nemo-gke}/integration
bin=$cache/bin
mkdir -p "$bin"
export GOTOOLCHAIN=local GOFLAGS=-mod=mod CGO_ENABLED=0
export GOMODCACHE=${GOMODCACHE:-$HOME/.cache/nemo-gke/go/mod} GOCACHE=${GOCACHE:-$HOME/.cache/nemo-gke/go/build}

step() {  # step NAME VERSION COMMAND...: runs COMMAND unless bin/NAME-VERSION exists; prints its time
  local name=$1 version=$2; shift 2
  local out=$bin/$name-$version
  if [[ -x $out ]]; then echo "build $name $version: cached"; return; fi
  local start=$SECONDS
  "$@" "$out.tmp"
  mv "$out.tmp" "$out"
  echo "build $name $version: $((SECONDS - start)) s"
}

module_dir() {  # module_dir MODULE VERSION: the module's folder in the module cache, downloaded first
  go mod download -json "$1@$2" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p'
}

install_module() {  # install_module MODULE VERSION PACKAGE [PATCH] OUT: `go build` inside a copy of the
  # module, so that its own go.mod and go.sum decide every dependency and its hash; PATCH, a
  # function, runs in the copy first
  local dir tmp out=${*: -1} patch=
  (( $# == 5 )) && patch=$4
  dir=$(module_dir "$1" "$2")
  tmp=$(mktemp -d)
  cp -r "$dir/." "$tmp" && chmod -R u+w "$tmp"
  (cd "$tmp" && ${patch:+$patch} && go build -p 2 -trimpath -o "$out" "$3")
  rm -rf "$tmp"
}

wrapper() {  # wrapper NAME PACKAGE LDFLAGS OUT: `go build` inside integration/wrappers/NAME
  (cd "$here/wrappers/$1" && go build -p 2 -trimpath -ldflags "$3" -o "$4" "$2")
}

pinned() {  # pinned WRAPPER MODULE VERSION: the wrapper's go.mod requires MODULE at VERSION
  grep -qE "$2 $3( // indirect)?\$" "$here/wrappers/$1/go.mod" || { echo "integration/wrappers/$1/go.mod must require $2 $3" >&2; exit 1; }
}
pinned etcd go.etcd.io/etcd/server/v3 "$ETCD_VERSION"
pinned kubernetes k8s.io/kubernetes "$KUBERNETES_VERSION"
pinned pulumi-config github.com/pulumi/pulumi/sdk/v3 "$PULUMI_SDK_VERSION"
pinned pulumi github.com/pulumi/pulumi/pkg/v3 "$PULUMI_CLI_VERSION"
pinned pulumi-kubernetes github.com/pulumi/pulumi-kubernetes/provider/v4 "$PULUMI_KUBERNETES_VERSION"
k8s_version() {  # the version the API server reports (Kueue and the Pulumi provider read it)
  local v=${KUBERNETES_VERSION#v} pkg=k8s.io/component-base/version
  echo "-X $pkg.gitVersion=$KUBERNETES_VERSION -X $pkg.gitMajor=${v%%.*} -X $pkg.gitMinor=$(echo "$v" | cut -d. -f2)"
}

kubernetes_provider() {  # kubernetes_provider OUT: the provider's module copied beside the wrapper
  # (its ./provider), with the schema files its `go generate` step writes (cmd/pulumi-resource-kubernetes
  # generate.go: schema.json with the version set, and the Terraform mapping, compacted), then built
  local dir tmp version=${PULUMI_KUBERNETES_VERSION#v}
  dir=$(module_dir github.com/pulumi/pulumi-kubernetes/provider/v4 "$PULUMI_KUBERNETES_VERSION")
  tmp=$(mktemp -d)
  cp -r "$here/wrappers/pulumi-kubernetes/." "$tmp" && cp -r "$dir" "$tmp/provider" && chmod -R u+w "$tmp"
  (cd "$tmp/provider/cmd/pulumi-resource-kubernetes" && python3 -c '
import json, sys
schema = json.load(open("schema.json"))
schema["version"] = sys.argv[1]
json.dump(schema, open("schema-embed.json", "w"), separators=(",", ":"))
json.dump(json.load(open("terraform-mapping.json")), open("terraform-mapping-embed.json", "w"), separators=(",", ":"))
' "$version")
  (cd "$tmp" && go build -p 2 -trimpath -ldflags "-X github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/version.Version=$version" \
    -o "$1" github.com/pulumi/pulumi-kubernetes/provider/v4/cmd/pulumi-resource-kubernetes)
  rm -rf "$tmp"
}

tool=${1:-all}
want() { [[ $tool == all || $tool == "$1" ]]; }
kueue_metrics_cert_dir() {  # the one change to Kueue's source (versions.sh, KUEUE_LANE_PATCH)
  local from='metricsCertPath := "/etc/kueue/metrics/certs"' to='metricsCertPath := os.Getenv("KUEUE_METRICS_CERT_DIR")'
  grep -qF "$from" cmd/kueue/main.go || { echo "kueue cmd/kueue/main.go no longer has: $from" >&2; exit 1; }
  sed -i "s|$from|$to|" cmd/kueue/main.go
}
want kueue && step kueue "$KUEUE_VERSION+$KUEUE_LANE_PATCH" install_module sigs.k8s.io/kueue "$KUEUE_VERSION" ./cmd/kueue kueue_metrics_cert_dir
want jobset && step jobset "$JOBSET_VERSION" install_module sigs.k8s.io/jobset "$JOBSET_VERSION" .
want kueue && step kueue "$KUEUE_PREVIOUS_VERSION+$KUEUE_LANE_PATCH" install_module sigs.k8s.io/kueue \
  "$KUEUE_PREVIOUS_VERSION" ./cmd/kueue kueue_metrics_cert_dir
want jobset && step jobset "$JOBSET_PREVIOUS_VERSION" install_module sigs.k8s.io/jobset "$JOBSET_PREVIOUS_VERSION" .
want kwok && step kwok "$KWOK_VERSION" install_module sigs.k8s.io/kwok "$KWOK_VERSION" ./cmd/kwok
want etcd && step etcd "$ETCD_VERSION" wrapper etcd . ""
want pulumi-config && step pulumi-config "$PULUMI_SDK_VERSION" wrapper pulumi-config . ""
want pulumi && step pulumi "$PULUMI_CLI_VERSION" wrapper pulumi github.com/pulumi/pulumi/pkg/v3/cmd/pulumi \
  "-X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version=$PULUMI_CLI_VERSION"
want pulumi-kubernetes && step pulumi-kubernetes "$PULUMI_KUBERNETES_VERSION" kubernetes_provider
# The engine scenarios take both from one folder, by the names the engine looks for (integration/engine.py).
if want pulumi || want pulumi-kubernetes; then
  mkdir -p "$cache/pulumi"
  ln -sfn "../bin/pulumi-$PULUMI_CLI_VERSION" "$cache/pulumi/pulumi"
  ln -sfn "../bin/pulumi-kubernetes-$PULUMI_KUBERNETES_VERSION" "$cache/pulumi/pulumi-resource-kubernetes"
fi
for component in kube-apiserver kube-controller-manager kube-scheduler; do
  want "$component" && step "$component" "$KUBERNETES_VERSION" wrapper kubernetes "k8s.io/kubernetes/cmd/$component" "$(k8s_version)"
done
true
