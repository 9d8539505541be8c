//go:build tools

// Package kube pins the Kubernetes control-plane binaries that the local
// environment runs. It is a separate module so that k8s.io/kubernetes never
// enters karpool's own dependency graph.
package kube

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
)
