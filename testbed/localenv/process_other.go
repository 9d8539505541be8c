//go:build !linux

package localenv

import "syscall"

// componentAttr is the default elsewhere: the local environment's components (etcd, the
// Kubernetes control plane, kwok) are built and run on Linux only, so `karpool up` fails there
// when it starts the first one; this keeps the rest of the binary building.
func componentAttr() *syscall.SysProcAttr { return nil }
