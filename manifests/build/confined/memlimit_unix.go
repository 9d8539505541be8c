//go:build unix

package confined

import "syscall"

// limitAddressSpace has the kernel refuse the process memory past n bytes.
func limitAddressSpace(n int64) error {
	return syscall.Setrlimit(syscall.RLIMIT_AS, &syscall.Rlimit{Cur: uint64(n), Max: uint64(n)})
}
