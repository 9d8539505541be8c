package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Check parses the non-test Go files of one directory and returns its violations: functions
// longer than maxLines lines and types with more than maxMethods methods, sorted.
func Check(dir string, maxLines, maxMethods int) ([]string, error) {
	fset := token.NewFileSet()
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	methods := map[string]int{}
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		path := filepath.Join(dir, name)
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok {
				continue
			}
			fn := fd.Name.Name
			if recv := receiverType(fd); recv != "" {
				methods[recv]++
				fn = recv + "." + fn
			}
			start := fset.Position(fd.Pos())
			if n := fset.Position(fd.End()).Line - start.Line + 1; n > maxLines {
				out = append(out, fmt.Sprintf("%s:%d: function %s is %d lines (at most %d)", path, start.Line, fn, n, maxLines))
			}
		}
	}
	for t, n := range methods {
		if n > maxMethods {
			out = append(out, fmt.Sprintf("%s: type %s has %d methods (at most %d)", dir, t, n, maxMethods))
		}
	}
	sort.Strings(out)
	return out, nil
}

// receiverType is the name of a method's receiver type ("" for a function).
func receiverType(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return ""
	}
	t := fd.Recv.List[0].Type
	if s, ok := t.(*ast.StarExpr); ok {
		t = s.X
	}
	switch x := t.(type) {
	case *ast.IndexExpr: // generic receiver T[P]
		t = x.X
	case *ast.IndexListExpr:
		t = x.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return id.Name
	}
	return ""
}
