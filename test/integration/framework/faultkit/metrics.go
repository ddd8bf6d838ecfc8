package faultkit

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Sample is one series of the Prometheus text format.
type Sample struct {
	Name   string
	Labels map[string]string
	Value  float64
}

// Key identifies the series: name{k="v",...} with sorted labels.
func (s Sample) Key() string {
	keys := make([]string, 0, len(s.Labels))
	for k := range s.Labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString(s.Name)
	b.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%s=%q", k, s.Labels[k])
	}
	b.WriteByte('}')
	return b.String()
}

// Metrics is one scrape of a /metrics endpoint.
type Metrics []Sample

// Scrape fetches and parses url (the manager's MetricsURL + "/metrics").
func Scrape(ctx context.Context, url string) (Metrics, error) {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, err
	}
	return ParseMetrics(string(b))
}

// ParseMetrics parses the Prometheus text exposition format (enough of it
// for counters, gauges and histogram series: comments are skipped,
// timestamps ignored).
func ParseMetrics(text string) (Metrics, error) {
	var out Metrics
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		s, err := parseLine(line)
		if err != nil {
			return nil, fmt.Errorf("parsing metrics line %q: %w", line, err)
		}
		out = append(out, s)
	}
	return out, sc.Err()
}

func parseLine(line string) (Sample, error) {
	s := Sample{Labels: map[string]string{}}
	i := strings.IndexAny(line, "{ ")
	if i < 0 {
		return s, fmt.Errorf("no value")
	}
	s.Name = line[:i]
	rest := line[i:]
	if rest[0] == '{' {
		rest = rest[1:]
		for {
			rest = strings.TrimLeft(rest, " ,")
			if strings.HasPrefix(rest, "}") {
				rest = rest[1:]
				break
			}
			eq := strings.IndexByte(rest, '=')
			if eq < 0 || len(rest) < eq+2 || rest[eq+1] != '"' {
				return s, fmt.Errorf("bad label")
			}
			name := strings.TrimSpace(rest[:eq])
			rest = rest[eq+2:]
			var val strings.Builder
			j := 0
			for ; j < len(rest); j++ {
				c := rest[j]
				if c == '\\' && j+1 < len(rest) {
					j++
					if rest[j] == 'n' {
						val.WriteByte('\n')
					} else {
						val.WriteByte(rest[j])
					}
					continue
				}
				if c == '"' {
					break
				}
				val.WriteByte(c)
			}
			if j >= len(rest) {
				return s, fmt.Errorf("unterminated label value")
			}
			s.Labels[name] = val.String()
			rest = rest[j+1:]
		}
	}
	f := strings.Fields(rest)
	if len(f) == 0 {
		return s, fmt.Errorf("no value")
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return s, err
	}
	s.Value = v
	return s, nil
}

// Sum adds the values of the series of name whose labels include match.
func (m Metrics) Sum(name string, match map[string]string) float64 {
	var total float64
	for _, s := range m {
		if s.Name != name {
			continue
		}
		ok := true
		for k, v := range match {
			if s.Labels[k] != v {
				ok = false
				break
			}
		}
		if ok {
			total += s.Value
		}
	}
	return total
}

// Get is Sum with one label.
func (m Metrics) Get(name, label, value string) float64 {
	return m.Sum(name, map[string]string{label: value})
}

// Diff returns after - before for every series of after (counters).
func Diff(before, after Metrics) Metrics {
	prev := map[string]float64{}
	for _, s := range before {
		prev[s.Key()] = s.Value
	}
	out := make(Metrics, 0, len(after))
	for _, s := range after {
		d := s
		d.Value = s.Value - prev[s.Key()]
		out = append(out, d)
	}
	return out
}

// By returns the series of name summed by the value of label, leaving out
// zeros.
func (m Metrics) By(name, label string) map[string]float64 {
	out := map[string]float64{}
	for _, s := range m {
		if s.Name == name && s.Value != 0 {
			out[s.Labels[label]] += s.Value
		}
	}
	return out
}

// Writes returns captf_mirror_writes_total by result (created, updated,
// deleted, conflict, refused, error), leaving out zeros.
func (m Metrics) Writes() map[string]float64 { return m.By("captf_mirror_writes_total", "result") }

// MirrorWrites is the number of mirrors created, updated and deleted:
// writes that succeeded.
func (m Metrics) MirrorWrites() float64 {
	w := m.Writes()
	return w["created"] + w["updated"] + w["deleted"]
}

// Requests returns captf_api_requests_total by "verb resource", leaving
// out zeros.
func (m Metrics) Requests() map[string]float64 {
	out := map[string]float64{}
	for _, s := range m {
		if s.Name == "captf_api_requests_total" && s.Value != 0 {
			out[s.Labels["verb"]+" "+s.Labels["resource"]] += s.Value
		}
	}
	return out
}

// TotalRequests is the sum of captf_api_requests_total.
func (m Metrics) TotalRequests() float64 { return m.Sum("captf_api_requests_total", nil) }

// Retries is workqueue_retries_total summed over the queues.
func (m Metrics) Retries() float64 { return m.Sum("workqueue_retries_total", nil) }

// FormatCounts renders a map as "k=v, ..." sorted by key ("none" when
// empty).
func FormatCounts(c map[string]float64) string {
	if len(c) == 0 {
		return "none"
	}
	return formatSorted(c, "%s=%g")
}

// formatSorted renders every entry of c with format (key, value), sorted
// by key and joined by ", ".
func formatSorted[V any](c map[string]V, format string) string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf(format, k, c[k]))
	}
	return strings.Join(parts, ", ")
}
