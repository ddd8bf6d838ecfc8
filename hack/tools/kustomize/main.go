// Command kustomize renders one kustomization directory to standard output,
// as `kubectl kustomize DIR` does, with the kustomize library kubectl
// v0.37 embeds (sigs.k8s.io/kustomize/api). It exists so that
// hack/clusterctl-repository.sh (make release-manifests, make
// clusterctl-repository; SPEC K10) needs only Go, not the control plane
// build that produces bin/kubectl.
//
//	kustomize DIR
package main

import (
	"fmt"
	"os"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: kustomize DIR")
		os.Exit(2)
	}
	out, err := render(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "kustomize:", err)
		os.Exit(1)
	}
	if _, err := os.Stdout.Write(out); err != nil {
		fmt.Fprintln(os.Stderr, "kustomize:", err)
		os.Exit(1)
	}
}

// render builds dir with kustomize's defaults (those of kubectl
// kustomize: files may only be loaded from within the kustomization root,
// bases may be anywhere).
func render(dir string) ([]byte, error) {
	opts := krusty.MakeDefaultOptions()
	// kubectl kustomize's order: Namespaces, CRDs and RBAC before what uses
	// them (its --reorder=legacy default).
	opts.Reorder = krusty.ReorderOptionLegacy
	k := krusty.MakeKustomizer(opts)
	m, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, err
	}
	return m.AsYaml()
}
