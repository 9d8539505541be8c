package vet_test

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/karpool/karpool/manifests"
	"github.com/karpool/karpool/schema/vet"
)

// FuzzVet feeds arbitrary bytes to vet, as a file would: it must not panic, must finish in
// bounded time, keep the heap bounded, and locate every finding in the input. The seed corpus
// holds the examples, the invalid corpus, YAML alias bombs, documents nested thousands deep, and
// other hostile YAML. CI runs it briefly:
//
//	go test -run '^$' -fuzz FuzzVet -fuzztime 20s ./schema/vet
func FuzzVet(f *testing.F) {
	for _, pattern := range []string{"../../examples/workshop/*.yaml", "../../examples/workshop/workload/*.yaml", "../../examples/seeds/*/*.yaml", "../testdata/invalid/*/*.yaml", "../testdata/valid/*.yaml", "testdata/*.yaml"} {
		files, _ := filepath.Glob(pattern)
		for _, file := range files {
			if data, err := os.ReadFile(file); err == nil {
				f.Add(data)
			}
		}
	}
	for _, s := range hostile {
		f.Add([]byte(s))
	}
	o := opts()
	o.Limits = manifests.Limits{MaxBytes: 1 << 20}
	f.Fuzz(func(t *testing.T, data []byte) {
		// A hang would stop the fuzzer without a verdict; crash instead, which saves the input.
		watchdog := time.AfterFunc(hangAfter, func() { panic(fmt.Sprintf("vet still running after %v on %d bytes", hangAfter, len(data))) })
		r, err := vet.CheckBytes("fuzz.yaml", data, o)
		watchdog.Stop()
		if err != nil {
			t.Fatalf("vet failed: %v", err)
		}
		lines := strings.Count(string(data), "\n") + 1
		for _, fd := range r.Findings {
			if fd.File != "fuzz.yaml" || fd.Message == "" || fd.Line < 0 || fd.Line > lines+1 {
				t.Fatalf("finding out of place: %+v (input has %d lines)", fd, lines)
			}
		}
		for _, format := range vet.Formats {
			if err := vet.WriteReport(io.Discard, r, format); err != nil {
				t.Fatal(err)
			}
		}
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		if ms.HeapAlloc > 2<<30 {
			t.Fatalf("heap at %d MB", ms.HeapAlloc>>20)
		}
	})
}

// hangAfter is how long one input may take. Inputs are at most 1 MiB; the slowest real ones take
// a few seconds on a loaded machine.
const hangAfter = 60 * time.Second

// hostile is YAML made to hurt a parser or a validator.
var hostile = []string{
	// Billion laughs: nine levels of nine aliases.
	aliasBomb,
	// The same with mappings and merge keys.
	`apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: merge}
a: &a {x1: 1, x2: 2, x3: 3, x4: 4, x5: 5, x6: 6, x7: 7, x8: 8}
b: &b {<<: *a, b1: *a, b2: *a, b3: *a, b4: *a, b5: *a, b6: *a, b7: *a}
c: &c {<<: *b, c1: *b, c2: *b, c3: *b, c4: *b, c5: *b, c6: *b, c7: *b}
d: &d {<<: *c, d1: *c, d2: *c, d3: *c, d4: *c, d5: *c, d6: *c, d7: *c}
spec: {<<: *d, e1: *d, e2: *d, e3: *d, e4: *d, e5: *d, e6: *d, e7: *d}
`,
	// An anchor that contains itself.
	"apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: self}\nspec: &s {template: *s}\n",
	// Nested thousands deep, in flow and block style.
	"apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: deep}\nspec: " + strings.Repeat("[", 5000) + strings.Repeat("]", 5000) + "\n",
	"apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: deep}\nspec: " + strings.Repeat("{a: ", 3000) + "1" + strings.Repeat("}", 3000) + "\n",
	"apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: deep}\nspec:\n" + deepBlock(300),
	// Wide: many requirements, labels and documents.
	"apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: wide}\nspec:\n  template:\n    spec:\n      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: d}\n      requirements:\n" + strings.Repeat("      - {key: karpenter.sh/capacity-type, operator: In, values: [spot]}\n", 2000),
	strings.Repeat("---\napiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: x}\n", 500),
	"apiVersion: karpenter.k8s.aws/v1\nkind: EC2NodeClass\nmetadata: {name: ni}\nspec:\n  networkInterfaces:\n" + strings.Repeat("  - {networkCardIndex: 0, deviceIndex: 0, interfaceType: interface}\n", 1500),
	// Odd YAML.
	"--- !!binary\nR0lGODlhDAAMAIQAAP//9/X17unp5WZmZgAAAOfn515eXvPz7Y6OjuDg4J+fn5\n",
	"%YAML 1.2\n---\napiVersion: karpenter.sh/v1\nkind: NodePool\n...\n--- |\n  text\n",
	"apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: x}\nspec: {weight: .inf, replicas: .nan, limits: {cpu: 99999999999999999999999999}}\n",
	"apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: x}\nmetadata: {name: y}\n",
	"? [complex, key]\n: value\napiVersion: karpenter.sh/v1\n",
	"apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata:\n  name: \"\\u0000\\uffff\"\nspec: \t\n",
	"\xff\xfe\x00a\x00p\x00i",
	"apiVersion: [karpenter.sh/v1]\nkind: {NodePool: 1}\n",
	"- a\n- b\n---\n\"just a string\"\n---\n42\n",
}

func deepBlock(n int) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		b.WriteString(strings.Repeat("  ", i+1))
		b.WriteString("a:\n")
	}
	b.WriteString(strings.Repeat("  ", n+1) + "b: 1\n")
	return b.String()
}
