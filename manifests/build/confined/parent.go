package confined

import (
	"bytes"
	"context"
	"encoding/gob"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// parallel bounds the builds that run at once, so that many PoolSyncs and pull requests
// reconciled together cannot start a child each. A slot is held only while a child runs,
// which its deadline bounds.
var parallel = make(chan struct{}, 2)

// Build runs one kustomize build in a confined child process. Its error is *Error when the
// build failed, whatever the reason; any other error means the child could not be started.
func Build(ctx context.Context, req Request) (*Result, error) {
	if req.Root != "" && (req.Files != nil || !filepath.IsAbs(req.Root)) {
		return nil, fmt.Errorf("a build reads files in memory or below an absolute root, not %q", req.Root)
	}
	req.Limits = req.Limits.WithDefaults()
	ctx, cancel := context.WithTimeout(ctx, req.Limits.Timeout)
	defer cancel()
	select {
	case parallel <- struct{}{}:
		defer func() { <-parallel }()
	case <-ctx.Done():
		return nil, timeout(req.Limits, ctx)
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("finding this program to run the build in: %w", err)
	}
	var in bytes.Buffer
	if err := gob.NewEncoder(&in).Encode(req); err != nil {
		return nil, err
	}
	// exec.CommandContext kills the child by its PID at the deadline.
	cmd := exec.CommandContext(ctx, exe)
	cmd.Env = []string{childEnv + "=1", memoryEnv + "=" + strconv.FormatInt(req.Limits.Memory, 10)}
	cmd.Dir = "/"
	cmd.Stdin = &in
	out := &capped{max: req.Limits.OutputBytes + 1<<20}
	errOut := &capped{max: 64 << 10}
	cmd.Stdout, cmd.Stderr = out, errOut
	cmd.WaitDelay = 5 * time.Second
	setParentDeathSignal(cmd)
	runErr := cmd.Run()
	if ctx.Err() != nil {
		return nil, timeout(req.Limits, ctx)
	}
	var a answer
	if derr := gob.NewDecoder(&out.buf).Decode(&a); derr != nil {
		return nil, crashed(req.Limits, runErr, out, errOut)
	}
	if a.Err != nil {
		return nil, a.Err
	}
	if a.Result == nil {
		return nil, &Error{Kind: Crashed, Message: "the build process answered nothing"}
	}
	return a.Result, nil
}

func timeout(l Limits, ctx context.Context) *Error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return &Error{Kind: Timeout, Message: fmt.Sprintf("the build took longer than its %s deadline", l.Timeout)}
	}
	return &Error{Kind: Timeout, Message: "the build was cancelled"}
}

// crashed explains a child that ended without an answer: the memory limit, the output cap,
// or something else, with the first line of what it printed.
func crashed(l Limits, runErr error, out, errOut *capped) *Error {
	text := errOut.buf.String()
	switch {
	case strings.Contains(text, "out of memory"):
		return &Error{Kind: Limit, Message: fmt.Sprintf("the build needed more than its %s of memory", Size(l.Memory))}
	case out.over:
		return &Error{Kind: Limit, Message: fmt.Sprintf("the build's output is larger than %s", Size(l.OutputBytes))}
	}
	first, _, _ := strings.Cut(strings.TrimSpace(text), "\n")
	return &Error{Kind: Crashed, Message: fmt.Sprintf("the build process ended without an answer (%v): %s", runErr, first)}
}

// capped keeps at most max bytes of what is written to it and drops the rest.
type capped struct {
	buf  bytes.Buffer
	max  int64
	over bool
}

func (c *capped) Write(p []byte) (int, error) {
	room := c.max - int64(c.buf.Len())
	if int64(len(p)) > room {
		c.over = true
		if room > 0 {
			c.buf.Write(p[:room])
		}
		return len(p), nil
	}
	return c.buf.Write(p)
}
