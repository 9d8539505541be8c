package localenv

import "syscall"

// componentAttr gives a component its own process group, which keeps a terminal's Ctrl-C from
// reaching it before we stop the components in order, and Pdeathsig, which kills it if this
// process dies without running Stop.
func componentAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
