//go:build !unix

package confined

// limitAddressSpace has no kernel limit to set here: the Go runtime's soft limit and the
// deadline still bound the build (SECURITY.md).
func limitAddressSpace(int64) error { return nil }
