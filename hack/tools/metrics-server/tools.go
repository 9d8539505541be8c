//go:build tools

// Package metricsserver pins metrics-server, which serves the metrics API (metrics.k8s.io) the
// local control plane's HorizontalPodAutoscalers read, scraping kwok's simulated kubelets.
package metricsserver

import _ "sigs.k8s.io/metrics-server/cmd/metrics-server"
