// Package metricsdoc reads the table of docs/metrics.md: the name, type and label set of every
// metric karpool serves. Tests hold the code (autoscaler/metrics) and the running controller
// (internal/operator) to it, so the page Karpenter users read is the contract.
package metricsdoc

import (
	"fmt"
	"slices"
	"strings"
)

// Metric is one row of the table.
type Metric struct {
	Name, Type string
	// Labels are sorted: their order means nothing to Prometheus.
	Labels []string
}

// Parse reads the rows "| `name` | type | `label`, ... | ..." of a Markdown page. A labels cell
// may name a label set, "*node labels*", defined by a row "| *node labels* | `label`, ... |";
// sets keep the long label lists Karpenter copies from node labels out of every row. path only
// names the page in errors.
func Parse(path string, markdown []byte) (map[string]Metric, error) {
	lines := strings.Split(string(markdown), "\n")
	sets := map[string][]string{}
	for i, line := range lines {
		if !strings.HasPrefix(line, "| *") {
			continue
		}
		cells := strings.Split(line, "|")
		if len(cells) < 4 {
			return nil, fmt.Errorf("%s:%d: a label set row is | *name* | `label`, ... |", path, i+1)
		}
		sets[strings.TrimSpace(cells[1])] = labelList(cells[2])
	}
	out := map[string]Metric{}
	for i, line := range lines {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := strings.Split(line, "|")
		if len(cells) < 5 {
			return nil, fmt.Errorf("%s:%d: a metric row is | `metric` | type | labels | ... |", path, i+1)
		}
		m := Metric{Name: strings.Trim(strings.TrimSpace(cells[1]), "`"), Type: strings.TrimSpace(cells[2]), Labels: []string{}}
		for _, l := range strings.Split(cells[3], ",") {
			l = strings.TrimSpace(l)
			if strings.HasPrefix(l, "*") {
				set, ok := sets[l]
				if !ok {
					return nil, fmt.Errorf("%s:%d: %s names the label set %s, which no | %s | row defines", path, i+1, m.Name, l, l)
				}
				m.Labels = append(m.Labels, set...)
			} else if l = strings.Trim(l, "`"); l != "" {
				m.Labels = append(m.Labels, l)
			}
		}
		slices.Sort(m.Labels)
		if _, dup := out[m.Name]; dup {
			return nil, fmt.Errorf("%s:%d: %s is listed twice", path, i+1, m.Name)
		}
		out[m.Name] = m
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no metrics table (rows | `metric` | type | labels | ...)", path)
	}
	return out, nil
}

func labelList(cell string) []string {
	var out []string
	for _, l := range strings.Split(cell, ",") {
		if l = strings.Trim(strings.TrimSpace(l), "`"); l != "" {
			out = append(out, l)
		}
	}
	return out
}
