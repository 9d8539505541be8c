//go:build tools

// Package cue pins the stock cue CLI that users run with cue vet in CI.
package cue

import _ "cuelang.org/go/cmd/cue"
