package main

import (
	"bufio"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestDockerfileBuildStage builds the image's build stage as the Dockerfile says, without a
// Docker engine: the context is the repository minus .dockerignore, each COPY copies from it,
// each RUN runs in the stage's WORKDIR with the stage's ARGs, and the final stage's
// `COPY --from=build` must find the binary, which must run. A package the binary imports but
// the Dockerfile does not copy, or an embedded file .dockerignore drops, fails here.
func TestDockerfileBuildStage(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the image's build stage compiles the whole binary")
	}
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	stages, err := readDockerfile(filepath.Join(repo, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	if len(stages) != 2 {
		t.Fatalf("Dockerfile has %d stages, want a build stage and the image", len(stages))
	}
	checkGoImage(t, repo, stages[0])
	ignore, err := readDockerignore(filepath.Join(repo, ".dockerignore"))
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir() // the build stage's file system
	runBuildStage(t, repo, root, stages[0], ignore)

	var binary string
	for _, in := range stages[1].instrs {
		if in.cmd == "COPY" && strings.HasPrefix(in.args, "--from=build ") {
			binary = filepath.Join(root, strings.Fields(in.args)[1])
		}
	}
	if binary == "" {
		t.Fatal("the image stage copies nothing from the build stage")
	}
	out, err := exec.Command(binary, "version").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "karpool dev") {
		t.Fatalf("the built binary %s: %v\n%s", binary, err, out)
	}
}

type instr struct {
	cmd, args string
	line      int
}

type stage struct {
	from   string
	instrs []instr
}

// readDockerfile splits a Dockerfile into stages of instructions, joining continued lines.
func readDockerfile(file string) ([]stage, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var stages []stage
	var cur strings.Builder
	start, n := 0, 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if cur.Len() == 0 && (line == "" || strings.HasPrefix(line, "#")) {
			continue
		}
		if cur.Len() == 0 {
			start = n
		}
		if strings.HasSuffix(line, `\`) {
			cur.WriteString(strings.TrimSuffix(line, `\`) + " ")
			continue
		}
		cur.WriteString(line)
		cmd, args, _ := strings.Cut(cur.String(), " ")
		cur.Reset()
		in := instr{cmd: strings.ToUpper(cmd), args: strings.TrimSpace(args), line: start}
		if in.cmd == "FROM" {
			stages = append(stages, stage{from: in.args})
			continue
		}
		if len(stages) == 0 {
			return nil, fmt.Errorf("%s:%d: %s before the first FROM", file, start, in.cmd)
		}
		stages[len(stages)-1].instrs = append(stages[len(stages)-1].instrs, in)
	}
	return stages, sc.Err()
}

// checkGoImage: the build image's Go is at least the go.mod's language version.
func checkGoImage(t *testing.T, repo string, s stage) {
	t.Helper()
	m := regexp.MustCompile(`^golang:(\d+)\.(\d+)`).FindStringSubmatch(s.from)
	if m == nil {
		t.Fatalf("build stage FROM %q: want a golang:<major>.<minor> image", s.from)
	}
	mod, err := os.ReadFile(filepath.Join(repo, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	want := regexp.MustCompile(`(?m)^go (\d+)\.(\d+)`).FindStringSubmatch(string(mod))
	if want == nil || fmt.Sprintf("%03s.%03s", m[1], m[2]) < fmt.Sprintf("%03s.%03s", want[1], want[2]) {
		t.Fatalf("build stage FROM %q is older than go.mod's go %s.%s", s.from, want[1], want[2])
	}
}

// runBuildStage reproduces the stage's WORKDIR, COPY, ARG and RUN instructions under root.
func runBuildStage(t *testing.T, repo, root string, s stage, ignore []string) {
	t.Helper()
	workdir := root
	env := append(os.Environ(), "GOWORK=off")
	for _, in := range s.instrs {
		where := fmt.Sprintf("Dockerfile:%d: %s %s", in.line, in.cmd, in.args)
		switch in.cmd {
		case "WORKDIR":
			workdir = filepath.Join(root, in.args)
			if err := os.MkdirAll(workdir, 0o755); err != nil {
				t.Fatal(err)
			}
		case "ARG":
			name, value, _ := strings.Cut(in.args, "=")
			env = append(env, name+"="+value)
		case "COPY":
			f := strings.Fields(in.args)
			if len(f) < 2 || strings.HasPrefix(f[0], "--") {
				t.Fatalf("%s: this check copies only plain sources", where)
			}
			dst := filepath.Join(workdir, f[len(f)-1])
			for _, src := range f[:len(f)-1] {
				if err := copyContext(repo, src, dst, ignore); err != nil {
					t.Fatalf("%s: %v", where, err)
				}
			}
		case "RUN":
			cmd := exec.Command("sh", "-c", in.args)
			cmd.Dir, cmd.Env = workdir, env
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("%s: %v\n%s", where, err, out)
			}
		default:
			t.Fatalf("%s: instruction not reproduced by this check", where)
		}
	}
}

// copyContext copies src of the build context (a file, or a directory's contents) to dst, as
// COPY does, leaving out what .dockerignore excludes. A source that is missing or entirely
// excluded is an error, as in Docker.
func copyContext(repo, src, dst string, ignore []string) error {
	rel := path.Clean(src)
	if ignored(rel, ignore) {
		return fmt.Errorf("%s is excluded by .dockerignore", src)
	}
	base := filepath.Join(repo, rel)
	info, err := os.Stat(base)
	if err != nil {
		return fmt.Errorf("not in the build context: %w", err)
	}
	if !info.IsDir() {
		if strings.HasSuffix(dst, string(filepath.Separator)) || isDir(dst) {
			dst = filepath.Join(dst, filepath.Base(rel))
		}
		return copyFile(base, dst)
	}
	return filepath.WalkDir(base, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		r, _ := filepath.Rel(repo, p)
		if ignored(filepath.ToSlash(r), ignore) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			return nil
		}
		inner, _ := filepath.Rel(base, p)
		return copyFile(p, filepath.Join(dst, inner))
	})
}

func isDir(p string) bool {
	info, err := os.Stat(p)
	return err == nil && info.IsDir()
}

func copyFile(src, dst string) error {
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	return os.WriteFile(dst, data, 0o644)
}

// readDockerignore reads the exclusion patterns; exceptions ("!") are refused rather than
// half-implemented.
func readDockerignore(file string) ([]string, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var patterns []string
	for i, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if strings.HasPrefix(line, "!") {
			return nil, fmt.Errorf("%s:%d: exceptions (%s) are not supported by this check", file, i+1, line)
		}
		patterns = append(patterns, strings.TrimSuffix(path.Clean(line), "/"))
	}
	return patterns, nil
}

// ignored reports whether a context path matches an exclusion: Docker matches each pattern
// against the path (a match on a directory excludes what is under it), and "**/" matches any
// number of leading directories.
func ignored(rel string, patterns []string) bool {
	parts := strings.Split(rel, "/")
	for _, p := range patterns {
		anyDepth := strings.HasPrefix(p, "**/")
		p = strings.TrimPrefix(p, "**/")
		for end := 1; end <= len(parts); end++ {
			for start := 0; start < end; start++ {
				if start > 0 && !anyDepth {
					break
				}
				if ok, _ := path.Match(p, strings.Join(parts[start:end], "/")); ok {
					return true
				}
			}
		}
	}
	return false
}

func TestDockerignoreMatching(t *testing.T) {
	patterns := []string{"bin", ".git", "*.test", "**/testdata"}
	for rel, want := range map[string]bool{
		"bin":                          true,
		"bin/karpool":                  true,
		"cmd/karpool/main.go":          false,
		"karpool.test":                 true,
		"cmd/karpool.test":             false, // without **/, a pattern matches from the root only
		"schema/testdata/x.yaml":       true,
		"autoscaler/a/testdata":        true,
		"examples/workshop/nodepool.y": false,
	} {
		if got := ignored(rel, patterns); got != want {
			t.Errorf("ignored(%q) = %v, want %v", rel, got, want)
		}
	}
}
