// Package crossbuild checks that the karpool binary builds for the systems users run the CLI on.
// It is a package of its own, beside the command, because compiling every dependency twice more
// is minutes of CPU on a cold cache: here `make test` runs it in the lane of the unit tests, beside
// the end-to-end packages (cmd/karpool is one of them), instead of in their queue.
package crossbuild

import (
	"os"
	"os/exec"
	"testing"
)

// TestBuildsForOtherSystems: the binary builds for Windows and macOS too (vet, plan, migrate
// and the controller run anywhere Go does; `karpool up` needs Linux, and says so when it
// starts its first component).
func TestBuildsForOtherSystems(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: cross-compiling the binary compiles every dependency again")
	}
	for _, goos := range []string{"windows", "darwin"} {
		cmd := exec.Command("go", "build", "-o", os.DevNull, "..")
		cmd.Env = append(os.Environ(), "GOOS="+goos, "GOARCH=amd64", "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("GOOS=%s go build ./cmd/karpool: %v\n%s", goos, err, out)
		}
	}
}
