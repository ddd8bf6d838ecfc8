package main

import (
	"bufio"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// sample is one series of the Prometheus text format.
type sample struct {
	name   string
	labels map[string]string
	value  float64
}

// key identifies the series: name{k="v",...} with sorted labels.
func (s sample) key() string {
	keys := make([]string, 0, len(s.labels))
	for k := range s.labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString(s.name)
	b.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%s=%q", k, s.labels[k])
	}
	b.WriteByte('}')
	return b.String()
}

// metrics is a scrape of the manager's /metrics.
type metrics []sample

// parseMetrics parses the Prometheus text exposition format (enough of it
// for counters and gauges: comments are skipped, timestamps ignored).
func parseMetrics(text string) (metrics, error) {
	var out metrics
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

func parseLine(line string) (sample, error) {
	s := sample{labels: map[string]string{}}
	i := strings.IndexAny(line, "{ ")
	if i < 0 {
		return s, fmt.Errorf("no value")
	}
	s.name = line[:i]
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
					switch rest[j] {
					case 'n':
						val.WriteByte('\n')
					default:
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
			s.labels[name] = val.String()
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
	s.value = v
	return s, nil
}

// sum adds the values of the series of name whose labels include match.
func (m metrics) sum(name string, match map[string]string) float64 {
	var total float64
	for _, s := range m {
		if s.name != name {
			continue
		}
		ok := true
		for k, v := range match {
			if s.labels[k] != v {
				ok = false
				break
			}
		}
		if ok {
			total += s.value
		}
	}
	return total
}

// get is sum with one label.
func (m metrics) get(name, label, value string) float64 {
	return m.sum(name, map[string]string{label: value})
}

// diff returns after - before for every series of after (counters).
func diff(before, after metrics) metrics {
	prev := map[string]float64{}
	for _, s := range before {
		prev[s.key()] = s.value
	}
	out := make(metrics, 0, len(after))
	for _, s := range after {
		d := s
		d.value = s.value - prev[s.key()]
		out = append(out, d)
	}
	return out
}

// requestCounts returns captf_api_requests_total by "verb resource",
// leaving out zeros.
func (m metrics) requestCounts() map[string]float64 {
	out := map[string]float64{}
	for _, s := range m {
		if s.name == "captf_api_requests_total" && s.value != 0 {
			out[s.labels["verb"]+" "+s.labels["resource"]] += s.value
		}
	}
	return out
}

// writes returns captf_mirror_writes_total by result, leaving out zeros.
func (m metrics) writes() map[string]float64 {
	out := map[string]float64{}
	for _, s := range m {
		if s.name == "captf_mirror_writes_total" && s.value != 0 {
			out[s.labels["result"]] += s.value
		}
	}
	return out
}

// mirrorWrites is the number of created, updated and deleted mirrors.
func (m metrics) mirrorWrites() float64 {
	w := m.writes()
	return w["created"] + w["updated"] + w["deleted"]
}

// formatCounts renders a map as "k=v, ..." sorted by key.
func formatCounts(c map[string]float64) string {
	if len(c) == 0 {
		return "none"
	}
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%g", k, c[k]))
	}
	return strings.Join(parts, ", ")
}
