//go:build tools

// Package gitea pins Gitea, the real forge the PR-comment tests talk to. It is a separate module
// so that Gitea's large dependency graph never enters karpool's own.
package gitea

import _ "code.gitea.io/gitea"
