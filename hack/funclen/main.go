// Command funclen keeps the scheduling engine in parts of a readable size: it fails when a
// non-test function in the given package directories is longer than -lines lines (from its
// func keyword to its closing brace) or a type has more than -methods methods.
//
// Usage: go run ./hack/funclen [-lines 100] [-methods 30] DIR...
//
// It prints one line per violation and exits 1 when there is any (2 on a parse error).
package main

import (
	"flag"
	"fmt"
	"os"
)

func main() {
	maxLines := flag.Int("lines", 100, "longest function allowed, in lines")
	maxMethods := flag.Int("methods", 30, "most methods allowed on one type")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: funclen [-lines N] [-methods N] DIR...")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	var all []string
	for _, dir := range flag.Args() {
		v, err := Check(dir, *maxLines, *maxMethods)
		if err != nil {
			fmt.Fprintln(os.Stderr, "funclen:", err)
			os.Exit(2)
		}
		all = append(all, v...)
	}
	for _, v := range all {
		fmt.Println(v)
	}
	if len(all) > 0 {
		os.Exit(1)
	}
}
