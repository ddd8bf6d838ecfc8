package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/captf/captf/test/integration/framework/faultkit"
)

// Units of a row's value.
const (
	unitSeconds = "s"
	unitCount   = "count"
	unitMiB     = "MiB"
	unitRatio   = "x"
	unitPer     = "per object"
	unitPercent = "%"
)

// row is one figure of the table.
type row struct {
	Scenario string   `json:"scenario"`
	Figure   string   `json:"figure"`
	Value    float64  `json:"value"`
	Unit     string   `json:"unit"`
	Baseline *float64 `json:"baseline,omitempty"`
	// Ratio is Value / Baseline.
	Ratio *float64 `json:"ratio,omitempty"`
}

// requestTable is the manager's API requests during part of a scenario.
type requestTable struct {
	Scenario string             `json:"scenario"`
	What     string             `json:"what"`
	Requests map[string]float64 `json:"requests"` // "verb resource" -> count
	Writes   map[string]float64 `json:"mirrorWrites"`
	Reads    map[string]float64 `json:"sourceReads"`
}

// results of a run.
type results struct {
	Started     time.Time         `json:"started"`
	Duration    string            `json:"duration"`
	Environment map[string]string `json:"environment"`
	Config      map[string]any    `json:"config"`
	Rows        []*row            `json:"rows"`
	Requests    []requestTable    `json:"requests"`
	// Failures are failed correctness checks; Notes are anomalies worth a
	// look that are not failures (extra writes, more reads than objects...).
	Failures []string `json:"failures"`
	Notes    []string `json:"notes"`
}

func (r *results) add(scenario, figure string, value float64, unit string) *row {
	x := &row{Scenario: scenario, Figure: figure, Value: value, Unit: unit}
	r.Rows = append(r.Rows, x)
	return x
}

// vs sets the baseline and the ratio.
func (x *row) vs(baseline float64) *row {
	x.Baseline = &baseline
	if baseline != 0 {
		ratio := x.Value / baseline
		x.Ratio = &ratio
	}
	return x
}

func (r *results) fail(format string, args ...any) {
	r.Failures = append(r.Failures, fmt.Sprintf(format, args...))
}

func (r *results) note(format string, args ...any) {
	r.Notes = append(r.Notes, fmt.Sprintf(format, args...))
}

func (r *results) requests(scenario, what string, d faultkit.Metrics) {
	r.Requests = append(r.Requests, requestTable{Scenario: scenario, What: what, Requests: d.Requests(), Writes: d.Writes(),
		Reads: d.By("captf_source_reads_total", "result")})
}

func formatValue(v float64, unit string) string {
	switch unit {
	case unitSeconds:
		return fmt.Sprintf("%.2f s", v)
	case unitCount:
		if v == math.Trunc(v) {
			return fmt.Sprintf("%.0f", v)
		}
		return fmt.Sprintf("%.2f", v)
	case unitMiB:
		return fmt.Sprintf("%.1f MiB", v)
	case unitRatio:
		return fmt.Sprintf("%.2fx", v)
	case unitPer:
		return fmt.Sprintf("%.3f /object", v)
	case unitPercent:
		return fmt.Sprintf("%+.1f%%", v)
	}
	return fmt.Sprintf("%g %s", v, unit)
}

// print writes the table, the request breakdowns, notes and failures.
func (r *results) print(w io.Writer) {
	fmt.Fprintf(w, "\ncaptf benchmark, %s, %s\n", r.Started.Format(time.RFC3339), r.Duration)
	keys := make([]string, 0, len(r.Environment))
	for k := range r.Environment {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(w, "  %s: %s\n", k, r.Environment[k])
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SCENARIO\tFIGURE\tVALUE\tBASELINE\tCAPTF/BASELINE")
	for _, x := range r.Rows {
		base, ratio := "-", "-"
		if x.Baseline != nil {
			base = formatValue(*x.Baseline, x.Unit)
		}
		if x.Ratio != nil {
			ratio = fmt.Sprintf("%.2f", *x.Ratio)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", x.Scenario, x.Figure, formatValue(x.Value, x.Unit), base, ratio)
	}
	tw.Flush()
	if len(r.Requests) > 0 {
		fmt.Fprintln(w, "\nManager API requests (captf_api_requests_total), mirror writes and source reads:")
		for _, t := range r.Requests {
			fmt.Fprintf(w, "  %s, %s:\n", t.Scenario, t.What)
			fmt.Fprintf(w, "    requests: %s\n", faultkit.FormatCounts(t.Requests))
			fmt.Fprintf(w, "    mirror writes: %s; source reads: %s\n", faultkit.FormatCounts(t.Writes), faultkit.FormatCounts(t.Reads))
		}
	}
	if len(r.Notes) > 0 {
		fmt.Fprintln(w, "\nNotes:")
		for _, n := range r.Notes {
			fmt.Fprintf(w, "  - %s\n", n)
		}
	}
	if len(r.Failures) > 0 {
		fmt.Fprintln(w, "\nFAILED correctness checks:")
		for _, f := range r.Failures {
			fmt.Fprintf(w, "  - %s\n", f)
		}
	} else {
		fmt.Fprintln(w, "\nAll correctness checks passed.")
	}
}

func (r *results) writeJSON(path string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	b = append(b, '\n')
	if path == "-" {
		_, err = os.Stdout.Write(b)
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// percentile is the nearest-rank percentile of sorted values.
func percentile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return math.NaN()
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	if i < 0 {
		i = 0
	}
	if i >= len(sorted) {
		i = len(sorted) - 1
	}
	return sorted[i]
}

func joinLimited(items []string, n int) string {
	if len(items) <= n {
		return strings.Join(items, "; ")
	}
	return strings.Join(items[:n], "; ") + fmt.Sprintf("; ... (%d more)", len(items)-n)
}
