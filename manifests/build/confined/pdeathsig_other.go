//go:build !linux

package confined

import "os/exec"

// setParentDeathSignal has no equivalent here; the deadline still ends the child.
func setParentDeathSignal(*exec.Cmd) {}
