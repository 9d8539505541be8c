package metrics

import (
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestMetricsMatchTheDocs: every metric the autoscaler registers is in docs/metrics.md with the
// same type and label set, and every metric there is registered. The table is where Karpenter's
// label sets are written down, so a label that drifts from Karpenter's fails here.
func TestMetricsMatchTheDocs(t *testing.T) {
	documented := docTable(t, "../../docs/metrics.md")
	m, err := New(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	registered := map[string]metricRow{}
	v := reflect.ValueOf(m).Elem()
	for i := range v.NumField() {
		c, ok := v.Field(i).Interface().(prometheus.Collector)
		if !ok {
			t.Fatalf("field %s is not a collector", v.Type().Field(i).Name)
		}
		row := describe(t, c)
		registered[row.name] = row
	}
	for name, got := range registered {
		want, ok := documented[name]
		if !ok {
			t.Errorf("%s (%s, labels %v) is not in docs/metrics.md", name, got.kind, got.labels)
			continue
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: registered as %s with labels %v, documented as %s with labels %v", name, got.kind, got.labels, want.kind, want.labels)
		}
	}
	for name := range documented {
		if _, ok := registered[name]; !ok {
			t.Errorf("docs/metrics.md lists %s, which is not registered", name)
		}
	}
}

type metricRow struct {
	name, kind string
	labels     []string
}

var descRE = regexp.MustCompile(`fqName: "([^"]+)".*variableLabels: \{([^}]*)\}`)

// describe reads a collector's name and variable labels from its description, and its type
// from its Go type.
func describe(t *testing.T, c prometheus.Collector) metricRow {
	ch := make(chan *prometheus.Desc, 1)
	c.Describe(ch)
	m := descRE.FindStringSubmatch((<-ch).String())
	if m == nil {
		t.Fatalf("cannot read the description of %T", c)
	}
	row := metricRow{name: m[1], labels: []string{}}
	if m[2] != "" {
		row.labels = strings.Split(m[2], ",")
	}
	// A Gauge also has a Counter's methods: ask for it first.
	switch c.(type) {
	case *prometheus.GaugeVec, prometheus.Gauge:
		row.kind = "gauge"
	case *prometheus.CounterVec, prometheus.Counter:
		row.kind = "counter"
	case prometheus.Histogram, *prometheus.HistogramVec:
		row.kind = "histogram"
	default:
		t.Fatalf("%s: unexpected collector type %T", row.name, c)
	}
	return row
}

// docTable reads the rows of the docs' metrics table: | `name` | type | `label`, ... | ...
func docTable(t *testing.T, path string) map[string]metricRow {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]metricRow{}
	for i, line := range strings.Split(string(data), "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := strings.Split(line, "|")
		if len(cells) < 5 {
			t.Fatalf("%s:%d: want | metric | type | labels | ...", path, i+1)
		}
		row := metricRow{name: strings.Trim(strings.TrimSpace(cells[1]), "`"), kind: strings.TrimSpace(cells[2]), labels: []string{}}
		for _, l := range strings.Split(cells[3], ",") {
			if l = strings.Trim(strings.TrimSpace(l), "`"); l != "" {
				row.labels = append(row.labels, l)
			}
		}
		if _, dup := rows[row.name]; dup {
			t.Fatalf("%s:%d: %s listed twice", path, i+1, row.name)
		}
		rows[row.name] = row
	}
	if len(rows) == 0 {
		t.Fatalf("%s: no metrics table", path)
	}
	return rows
}
