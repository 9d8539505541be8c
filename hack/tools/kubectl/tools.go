//go:build tools

// Package kubectl pins the kubectl that the README's commands use, at the version of the local
// control plane (hack/tools/kube). `make up` builds it; the tests do not need it.
package kubectl

import (
	_ "k8s.io/kubernetes/cmd/kubectl"
)
