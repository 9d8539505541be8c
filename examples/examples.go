// Package examples embeds the examples, so that `karpool up` can run them from any working
// directory: it seeds its local git server with an example's pools (NodePools, EC2NodeClasses,
// kustomizations) and applies the rest (the workload, e.g. workshop/workload/) to the cluster.
package examples

import "embed"

// FS holds workshop/, hpa/ and seeds/.
//
//go:embed workshop hpa seeds
var FS embed.FS
