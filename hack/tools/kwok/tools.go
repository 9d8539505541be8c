//go:build tools

// Package kwok pins kwok, which plays the kubelet for the local control plane's fake nodes.
package kwok

import _ "sigs.k8s.io/kwok/cmd/kwok"
