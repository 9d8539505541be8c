//go:build tools

// Package controllergen pins controller-gen, which generates deepcopy code and CRDs from api/.
package controllergen

import _ "sigs.k8s.io/controller-tools/cmd/controller-gen"
