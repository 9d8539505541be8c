package metrics

import (
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/karpool/karpool/testbed/metricsdoc"
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
		for _, row := range describe(t, c) {
			if _, dup := registered[row.name]; dup {
				t.Errorf("%s registered twice", row.name)
			}
			registered[row.name] = row
		}
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

// describe reads each of a collector's metrics: its name and variable labels (sorted: their
// order means nothing to Prometheus) from its description, its type from the Go type (the
// scrape-time gauges are all gauges; the transitions are counters and histograms, told apart by
// their names).
func describe(t *testing.T, c prometheus.Collector) []metricRow {
	ch := make(chan *prometheus.Desc, 100)
	c.Describe(ch)
	close(ch)
	var out []metricRow
	for d := range ch {
		m := descRE.FindStringSubmatch(d.String())
		if m == nil {
			t.Fatalf("cannot read the description of %T", c)
		}
		row := metricRow{name: m[1], labels: []string{}}
		if m[2] != "" {
			row.labels = strings.Split(m[2], ",")
		}
		slices.Sort(row.labels)
		row.kind = kindOf(t, c, row.name)
		out = append(out, row)
	}
	return out
}

func kindOf(t *testing.T, c prometheus.Collector, name string) string {
	// A Gauge also has a Counter's methods: ask for it first.
	switch c.(type) {
	case *prometheus.GaugeVec, prometheus.Gauge, *Cluster:
		return "gauge"
	case *prometheus.CounterVec, prometheus.Counter:
		return "counter"
	case *prometheus.HistogramVec:
		return "histogram"
	case prometheus.Metric:
		// A Histogram and a Summary have the same methods: ask what it writes.
		var out dto.Metric
		if err := c.(prometheus.Metric).Write(&out); err != nil {
			t.Fatal(err)
		}
		if out.Summary != nil {
			return "summary"
		}
		return "histogram"
	case *Transitions:
		if strings.HasSuffix(name, "_total") {
			return "counter"
		}
		return "histogram"
	}
	t.Fatalf("%s: unexpected collector type %T", name, c)
	return ""
}

// docTable reads the docs' metrics table.
func docTable(t *testing.T, path string) map[string]metricRow {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	table, err := metricsdoc.Parse(path, data)
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]metricRow{}
	for name, m := range table {
		rows[name] = metricRow{name: name, kind: m.Type, labels: m.Labels}
	}
	return rows
}
