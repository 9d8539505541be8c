package confined

import (
	"os/exec"
	"syscall"
)

// setParentDeathSignal has the kernel kill the child if the parent dies first.
func setParentDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
