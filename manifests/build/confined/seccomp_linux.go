//go:build linux && (amd64 || arm64)

package confined

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// deniedSyscalls fail with EPERM in the child: starting a program (execve, execveat), opening a
// socket of any family (so no connection and no DNS query), io_uring (which can open sockets
// without the socket call) and ptrace.
var deniedSyscalls = []uint32{unix.SYS_EXECVE, unix.SYS_EXECVEAT, unix.SYS_SOCKET, unix.SYS_IO_URING_SETUP, unix.SYS_PTRACE}

// lockdown installs the seccomp filter on every thread of the process. It is irreversible,
// and needs no privilege thanks to no_new_privs.
func lockdown() error {
	prog := filter(auditArch, deniedSyscalls)
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	_, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&fprog)))
	if errno != 0 {
		return fmt.Errorf("seccomp: %w", errno)
	}
	return nil
}

// filter is the BPF program: any other architecture (a 32-bit entry into a 64-bit kernel) and,
// on amd64, the x32 syscall range are denied outright; the listed calls are denied; the rest
// is allowed.
func filter(arch uint32, denied []uint32) []unix.SockFilter {
	const (
		offNr   = 0 // struct seccomp_data: int nr; __u32 arch; ...
		offArch = 4
		deny    = unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)
		x32Bit  = 0x40000000
	)
	stmt := func(code uint16, k uint32) unix.SockFilter { return unix.SockFilter{Code: code, K: k} }
	// Each jump to deny is resolved once the program's length is known.
	var prog []unix.SockFilter
	var toDeny []int
	jumpIf := func(op uint16, k uint32) {
		toDeny = append(toDeny, len(prog))
		prog = append(prog, unix.SockFilter{Code: unix.BPF_JMP | op | unix.BPF_K, K: k})
	}
	prog = append(prog, stmt(unix.BPF_LD|unix.BPF_W|unix.BPF_ABS, offArch))
	// Another architecture falls to deny (the jump-if-false, set below).
	archCheck := len(prog)
	prog = append(prog, unix.SockFilter{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, K: arch})
	prog = append(prog, stmt(unix.BPF_LD|unix.BPF_W|unix.BPF_ABS, offNr))
	if arch == unix.AUDIT_ARCH_X86_64 {
		jumpIf(unix.BPF_JGE, x32Bit)
	}
	for _, nr := range denied {
		jumpIf(unix.BPF_JEQ, nr)
	}
	prog = append(prog, stmt(unix.BPF_RET|unix.BPF_K, unix.SECCOMP_RET_ALLOW))
	denyAt := len(prog)
	prog = append(prog, stmt(unix.BPF_RET|unix.BPF_K, deny))
	for _, i := range toDeny {
		prog[i].Jt = uint8(denyAt - i - 1)
	}
	prog[archCheck].Jf = uint8(denyAt - archCheck - 1)
	return prog
}
