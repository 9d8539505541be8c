//go:build tools

// Package etcd pins the etcd server that backs the local control plane.
package etcd

import _ "go.etcd.io/etcd/server/v3"
