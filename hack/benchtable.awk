# Turns `go test -bench` output into a Markdown table: one row per benchmark, one column per
# metric (ns/op, B/op, allocs/op and custom ones such as pods/s), in first-seen order.
/^pkg: / { pkg = $2; sub(/^github.com\/karpool\/karpool\//, "", pkg) }
/^Benchmark/ {
	row = pkg "." $1
	rows[++n] = row
	for (i = 3; i + 1 <= NF; i += 2) {
		unit = $(i + 1)
		if (!(unit in seen)) { seen[unit] = 1; units[++m] = unit }
		val[row, unit] = $i
	}
}
END {
	if (n == 0) { print "no benchmark results"; exit 1 }
	printf "| benchmark |"; for (j = 1; j <= m; j++) printf " %s |", units[j]; print ""
	printf "| --- |";       for (j = 1; j <= m; j++) printf " ---: |";          print ""
	for (k = 1; k <= n; k++) {
		printf "| %s |", rows[k]
		for (j = 1; j <= m; j++) printf " %s |", ((rows[k], units[j]) in val) ? val[rows[k], units[j]] : ""
		print ""
	}
}
