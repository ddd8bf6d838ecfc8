package bounded_test

import (
	"bytes"
	"compress/gzip"
	"fmt"

	"github.com/captf/captf/pkg/bounded"
)

// A small document from a tenant's pod, such as the runner's result in a
// termination message (at most 4 KiB), decoded whole with small limits.
func ExampleUnmarshal() {
	var result struct {
		Version int    `json:"version"`
		Outcome string `json:"outcome"`
	}
	limits := bounded.Limits{MaxSize: 4 << 10, MaxDepth: 8, MaxValues: 256, MaxToken: 1 << 10}
	err := bounded.Unmarshal([]byte(`{"version":1,"outcome":"Succeeded"}`), &result, limits)
	fmt.Println(result.Outcome, err)

	err = bounded.Unmarshal([]byte(`{"version":1,"outcome":[[[[[[[[[["x"]]]]]]]]]]}`), &result, limits)
	fmt.Println(bounded.KindOf(err), err)
	// Output:
	// Succeeded <nil>
	// Depth the JSON text nests deeper than 8 levels
}

// Large tenant data read as a stream: a gzip decompressed within limits
// and walked, keeping one captured value.
func ExampleDecoder() {
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	_, _ = w.Write([]byte(`{"skipped":[1,2,3],"kept":{"a":[true, null]}}`))
	_ = w.Close()

	limits := bounded.Limits{MaxInput: 1 << 20, MaxSize: 16 << 20, MaxDepth: 64, MaxValues: 1 << 20, MaxToken: 1 << 20}
	r, err := bounded.Gunzip(&b, limits)
	if err != nil {
		fmt.Println(err)
		return
	}
	d := bounded.NewDecoder(r, limits)
	var kept []byte
	err = d.Object(func(key string) error {
		if key != "kept" {
			return d.Skip()
		}
		raw, ok, err := d.Capture(1 << 10)
		if ok {
			kept = raw
		}
		return err
	})
	if err == nil {
		err = d.End()
	}
	fmt.Println(string(kept), err)
	// Output: {"a":[true,null]} <nil>
}
