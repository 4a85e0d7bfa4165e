package metrics

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestOperationsListsEveryMetric: the metrics table of docs/monitoring.md
// names every metric Sluice registers and no other, and every metric named
// anywhere in that section or in the Grafana dashboard is registered.
func TestOperationsListsEveryMetric(t *testing.T) {
	t.Parallel()
	have := registeredNames(t)

	doc, err := os.ReadFile("../../docs/monitoring.md")
	require.NoError(t, err)
	section := metricsSection(t, string(doc))
	var table []string
	for _, line := range strings.Split(section, "\n") {
		if m := tableRow.FindStringSubmatch(line); m != nil {
			table = append(table, m[1])
		}
	}
	slices.Sort(table)
	assert.Empty(t, missing(have, table), "registered, but not in the table of docs/monitoring.md's Metrics")
	assert.Empty(t, missing(table, have), "in the table of docs/monitoring.md's Metrics, but not registered")
	assert.Len(t, table, len(slices.Compact(slices.Clone(table))), "each metric once in the table")

	assert.Empty(t, missing(named(section, have), have), "named in docs/monitoring.md's Metrics, but not registered")
	dashboard, err := os.ReadFile("../../deploy/grafana/sluice.json")
	require.NoError(t, err)
	assert.Empty(t, missing(named(string(dashboard), have), have), "queried by deploy/grafana/sluice.json, but not registered")
}

// tableRow is a row of the metrics table: its first cell is the metric.
var tableRow = regexp.MustCompile("^\\| `(sluice_[a-z_]+)` \\|")

// metricName is how a metric is named in text.
var metricName = regexp.MustCompile(`sluice_[a-z_]+`)

// descName is the name in a prometheus.Desc's String, the only place a
// Desc shows it.
var descName = regexp.MustCompile(`fqName: "([^"]+)"`)

// registeredNames returns the sorted names of every metric Sluice serves:
// this package's, registered as it loads, and the collectors app builds
// and registers itself (a new one of those is added here).
func registeredNames(t *testing.T) []string {
	t.Helper()
	collectors := append(slices.Clone(registered), NewQueueCollector(nil))
	descs := make(chan *prometheus.Desc)
	go func() {
		defer close(descs)
		for _, c := range collectors {
			c.Describe(descs)
		}
	}()
	var names []string
	for d := range descs {
		m := descName.FindStringSubmatch(d.String())
		require.NotNil(t, m, "no name in %s", d)
		names = append(names, m[1])
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// metricsSection returns the "## Metrics" section of a Markdown page.
func metricsSection(t *testing.T, doc string) string {
	t.Helper()
	_, section, ok := strings.Cut(doc, "\n## Metrics\n")
	require.True(t, ok, "docs/monitoring.md has a Metrics section")
	section, _, _ = strings.Cut(section, "\n## ")
	return section
}

// named returns the sorted metric names in text. A histogram's series
// (name_bucket, name_sum, name_count) count as the histogram.
func named(text string, known []string) []string {
	var out []string
	for _, name := range metricName.FindAllString(text, -1) {
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if base, ok := strings.CutSuffix(name, suffix); ok && slices.Contains(known, base) {
				name = base
			}
		}
		out = append(out, name)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// missing returns the names in want that are not in have.
func missing(want, have []string) []string {
	var out []string
	for _, name := range want {
		if !slices.Contains(have, name) {
			out = append(out, name)
		}
	}
	return out
}
