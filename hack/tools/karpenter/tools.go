//go:build tools

// Package karpenter pins Karpenter's kwok provider, which `make bench-vs-karpenter` runs side by
// side with karpool. It is not part of `make test`.
package karpenter

import _ "sigs.k8s.io/karpenter/kwok"
