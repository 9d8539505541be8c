// Command crdcompare reports how a generated CustomResourceDefinition differs from a reference one,
// ignoring prose (descriptions) and generator annotations. It exists so that the claim "our CRDs
// accept and reject exactly what upstream Karpenter's do" is checked, not hoped for.
//
// Usage: go run ./hack/crdcompare OURS.yaml REFERENCE.yaml
//
// It prints one line per differing schema path ("- path = value" only in the reference,
// "+ path = value" only in ours) and exits 1 when there is any difference.
package main

import (
	"fmt"
	"os"

	"github.com/karpool/karpool/testbed/crddiff"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: crdcompare OURS.yaml REFERENCE.yaml")
		os.Exit(2)
	}
	diffs, err := crddiff.Files(os.Args[1], os.Args[2])
	if err != nil {
		fmt.Fprintln(os.Stderr, "crdcompare:", err)
		os.Exit(2)
	}
	for _, d := range diffs {
		fmt.Println(d)
	}
	if len(diffs) > 0 {
		fmt.Fprintf(os.Stderr, "crdcompare: %d difference(s)\n", len(diffs))
		os.Exit(1)
	}
}
