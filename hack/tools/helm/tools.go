//go:build tools

// Package helm pins the helm CLI that renders charts/karpool in the install test.
package helm

import _ "helm.sh/helm/v4/cmd/helm"
