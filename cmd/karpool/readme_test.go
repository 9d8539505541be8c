package main

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// testRef names a test function and the package directory (from the repository root) that holds it.
type testRef struct{ pkg, name string }

// readmeCommand says how a command of the README is run by the test suite.
type readmeCommand struct {
	// tests run the command, or the exact thing it does (see why).
	tests []testRef
	// makeTarget: the command is `make <target>`, which must be a rule of the Makefile.
	makeTarget string
	// script runs the command verbatim (CI runs `make test` through .ci/run).
	script string
	// why says, for a reader of this table, how the tests run it.
	why string
}

// readmeCommands maps every command line of the README's ```sh blocks to what runs it. A line
// matches the longest key that is a prefix of it, word by word, once comments, line
// continuations and leading VAR=value assignments are removed. Shell builtins (export, cd) only
// set up the lines after them and are not listed.
var readmeCommands = map[string]readmeCommand{
	"make test": {makeTarget: "test", script: ".ci/run",
		why: "CI runs it on every change (.ci/run); it is the test suite itself"},
	"make up": {makeTarget: "up", tests: []testRef{{"testbed/up", "TestUp"}},
		why: "TestUp builds cmd/karpool and runs `karpool up` as make up does, then drives it as a user would"},
	"make up UP_FLAGS=--demo": {makeTarget: "up", tests: []testRef{{"testbed/up", "TestUpDemo"}},
		why: "TestUpDemo runs `karpool up --demo` to its end and checks every step passed"},
	"kubectl scale deployment/inflate --replicas 5": {tests: []testRef{{"testbed/up", "TestUp"}},
		why: "TestUp patches inflate's scale subresource to 5 replicas, as kubectl scale does, and checks the m5.large node"},
	"karpool nodes": {tests: []testRef{{"testbed/up", "TestUpDemo"}, {"internal/operator", "TestInstalledController"}},
		why: "both run `karpool nodes --once` (the live view drawn once) against a running controller"},
	"karpool vet": {tests: []testRef{{"cmd/karpool", "TestVetThreeInvalidOfSix"}, {"cmd/karpool", "TestVetValidExitsZero"}, {"cmd/karpool", "TestPipelinesAgreeOnAnOverlay"}},
		why: "vet on files, and on a kustomization directory"},
	"cue vet -c -d '#Resource' ./schema": {tests: []testRef{{"schema", "TestStockCueVet"}},
		why: "runs the pinned cue CLI with exactly these arguments on the examples and the corpus"},
	"karpool migrate -w": {tests: []testRef{{"cmd/karpool", "TestMigrateWritesInPlace"}},
		why: "migrate -w on a legacy pool and a file that needs no change"},
	"karpool simulate": {tests: []testRef{{"cmd/karpool", "TestSimulateWorkshopExample"}, {"cmd/karpool", "TestPipelinesAgreeOnAnOverlay"}},
		why: "simulate --pools DIR --workload FILE"},
	"karpool plan": {tests: []testRef{{"cmd/karpool", "TestPlanPostsToGitea"}, {"cmd/karpool", "TestPipelinesAgreeOnAnOverlay"}, {"cmd/karpool", "TestPlanExitCodes"}},
		why: "plan --base --head --path --workload on a repository, and its exit codes"},
	"karpool render --aws": {tests: []testRef{{"cmd/karpool", "TestRenderAWSFromPools"}},
		why: "render --aws with these flags, as CloudFormation and JSON"},
}

// shellBuiltins set up the lines after them; they are not commands a test could run.
var shellBuiltins = map[string]bool{"export": true, "cd": true}

const readmeMaxWords = 1500

// TestReadmeCommandsAreTested: every command the README tells a user to run is run by a named
// test (or, for make targets, is a rule of the Makefile that a named test or CI runs); karpool's
// flags in it exist; the README stays under readmeMaxWords words and speaks of no issue or
// session numbers (nor do the pages of docs/).
func TestReadmeCommandsAreTested(t *testing.T) {
	const root = "../.."
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}

	if n := len(strings.Fields(string(readme))); n > readmeMaxWords {
		t.Errorf("README.md has %d words (wc -w), more than %d: move details to a page of docs/", n, readmeMaxWords)
	}
	for _, bad := range jargon(string(readme)) {
		t.Errorf("README.md mentions %q: a user cannot look that up; say what it means instead", bad)
	}
	pages, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	for _, page := range pages {
		data, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, bad := range jargon(string(data)) {
			t.Errorf("docs/%s mentions %q: a user cannot look that up; say what it means instead", filepath.Base(page), bad)
		}
	}
	for _, link := range regexp.MustCompile(`\]\(([^)#\s]+)`).FindAllStringSubmatch(string(readme), -1) {
		if strings.Contains(link[1], "://") {
			continue
		}
		if _, err := os.Stat(filepath.Join(root, link[1])); err != nil {
			t.Errorf("README.md links to %s, which does not exist", link[1])
		}
	}

	makefile, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	tests := testFunctions(t, root)
	used := map[string]bool{}
	commands := readmeShellCommands(string(readme))
	if len(commands) == 0 {
		t.Fatal("found no command in README.md's ```sh blocks")
	}
	for _, c := range commands {
		if shellBuiltins[c.words[0]] {
			continue
		}
		key := longestPrefix(c.words)
		if key == "" {
			t.Errorf("README.md line %d runs %q, which no test runs: add a test that runs it and name it in readmeCommands (cmd/karpool/readme_test.go), or drop it from the README", c.line, c.text)
			continue
		}
		used[key] = true
		if c.words[0] == "karpool" {
			if err := karpoolParses(c.words[1:]); err != nil {
				t.Errorf("README.md line %d: %q: %v", c.line, c.text, err)
			}
		}
		if c.words[0] == "make" {
			for _, w := range c.words[2:] {
				if v, ok := strings.CutPrefix(w, "UP_FLAGS="); ok {
					if err := karpoolParses(append([]string{"up"}, strings.Fields(strings.Trim(v, `"'`))...)); err != nil {
						t.Errorf("README.md line %d: %q: karpool up %s: %v", c.line, c.text, v, err)
					}
				}
			}
		}
	}

	keys := make([]string, 0, len(readmeCommands))
	for k := range readmeCommands {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, key := range keys {
		rc := readmeCommands[key]
		if !used[key] {
			t.Errorf("readmeCommands lists %q, which README.md no longer runs: remove it", key)
		}
		if rc.why == "" || len(rc.tests) == 0 && rc.script == "" {
			t.Errorf("readmeCommands[%q] names no test and no script, or does not say why", key)
		}
		if rc.makeTarget != "" && !regexp.MustCompile(`(?m)^`+regexp.QuoteMeta(rc.makeTarget)+`:`).Match(makefile) {
			t.Errorf("README.md runs %q, but the Makefile has no rule %q", key, rc.makeTarget)
		}
		if rc.script != "" {
			data, err := os.ReadFile(filepath.Join(root, rc.script))
			if err != nil || !strings.Contains(string(data), key) {
				t.Errorf("readmeCommands[%q]: %s does not run %q (%v)", key, rc.script, key, err)
			}
		}
		for _, ref := range rc.tests {
			if !tests[ref] {
				t.Errorf("readmeCommands[%q] names %s in %s, but no _test.go file there has func %s(", key, ref.name, ref.pkg, ref.name)
			}
		}
	}
}

// shellCommand is one command of a ```sh block: its words, its text and the README line it starts on.
type shellCommand struct {
	words []string
	text  string
	line  int
}

// readmeShellCommands returns the commands of the ```sh blocks of a Markdown text: continuation
// lines joined, comments dropped, pipelines and lists split into their commands, and leading
// VAR=value assignments removed.
func readmeShellCommands(markdown string) []shellCommand {
	var out []shellCommand
	in := false
	var pending strings.Builder
	start := 0
	sc := bufio.NewScanner(strings.NewReader(markdown))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "```") {
			in = !in && trimmed == "```sh"
			continue
		}
		if !in {
			continue
		}
		code := stripComment(line)
		if pending.Len() == 0 {
			start = n
		}
		if body, ok := strings.CutSuffix(strings.TrimRight(code, " \t"), `\`); ok {
			pending.WriteString(body + " ")
			continue
		}
		pending.WriteString(code)
		full := pending.String()
		pending.Reset()
		for _, part := range regexp.MustCompile(`\|\||&&|[|;]`).Split(full, -1) {
			words := strings.Fields(part)
			for len(words) > 0 && regexp.MustCompile(`^[A-Z_][A-Z0-9_]*=`).MatchString(words[0]) {
				words = words[1:]
			}
			if len(words) > 0 {
				out = append(out, shellCommand{words: words, text: strings.Join(words, " "), line: start})
			}
		}
	}
	return out
}

// stripComment drops a shell comment: a # at the start of a word, outside quotes.
func stripComment(line string) string {
	var quote rune
	prev := ' '
	for i, r := range line {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			}
		case r == '\'' || r == '"':
			quote = r
		case r == '#' && (prev == ' ' || prev == '\t'):
			return line[:i]
		}
		prev = r
	}
	return line
}

// longestPrefix returns the key of readmeCommands that matches the most leading words.
func longestPrefix(words []string) string {
	best, bestLen := "", 0
	for key := range readmeCommands {
		k := strings.Fields(key)
		if len(k) <= len(words) && len(k) > bestLen && strings.Join(words[:len(k)], " ") == key {
			best, bestLen = key, len(k)
		}
	}
	return best
}

// karpoolParses checks that args name a karpool command and that its flags exist.
func karpoolParses(args []string) error {
	var clean []string
	for _, a := range args {
		if a == ">" || strings.HasPrefix(a, ">") {
			break
		}
		clean = append(clean, strings.Trim(a, `"'`))
	}
	root := newRootCommand()
	cmd, rest, err := root.Find(clean)
	if err != nil {
		return err
	}
	if cmd == root {
		return fmt.Errorf("no karpool command named %q", clean[0])
	}
	return cmd.ParseFlags(rest)
}

// jargon returns the issue, session and "seed NNN" references in a text.
func jargon(text string) []string {
	return jargonRE.FindAllString(text, -1)
}

var jargonRE = regexp.MustCompile(`(?im)\b(issues?|sessions?)\s+#?\d+|(?:^|[\s(])#\d+\b|\bseeds?\s+\d{3}\b`)

// testFunctions returns every Test function of the repository's _test.go files, by package directory.
func testFunctions(t *testing.T, root string) map[testRef]bool {
	t.Helper()
	found := map[testRef]bool{}
	decl := regexp.MustCompile(`(?m)^func (Test\w*)\(`)
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "bin" || d.Name() == "testdata" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return err
		}
		for _, m := range decl.FindAllSubmatch(data, -1) {
			found[testRef{filepath.ToSlash(rel), string(m[1])}] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}
