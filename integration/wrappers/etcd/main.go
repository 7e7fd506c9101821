// The etcd server of the pinned release, built from its module (its go.mod replaces its sibling
// modules with local paths, so `go install` refuses it).
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
