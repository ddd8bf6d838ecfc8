package runresult

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/captf/captf/pkg/bounded"
)

func failed() *Result {
	return &Result{
		Version: Version, Operation: OperationApply, Image: "registry.example/module:1", Runtime: "OpenTofu v1.12.6",
		Steps:   []Step{{Name: StepInit, ExitCode: 0, DurationMilliseconds: 1200}, {Name: StepApply, ExitCode: 1, DurationMilliseconds: 3400}},
		Changes: &Changes{Create: 1},
		Error:   &Error{Kind: KindStep, Step: StepApply, Tail: "Error: local-exec provisioner error\n\nexit status 1"},
	}
}

// TestRoundTripO1: what the runner marshals, the manager reads back equal.
func TestRoundTripO1(t *testing.T) {
	for name, r := range map[string]*Result{
		"failed":    failed(),
		"succeeded": {Version: Version, Operation: OperationDestroy, Steps: []Step{{Name: StepInit}, {Name: StepDestroy}}, Changes: &Changes{Delete: 3}},
		"minimal":   {Version: Version, Operation: OperationApply},
		"drift": {Version: Version, Operation: OperationDrift, Steps: []Step{{Name: StepInit}, {Name: StepRefresh}, {Name: StepPlan, ExitCode: 2}},
			Drift: &Drift{Changes: Changes{Update: 1, Replace: 1}, Resources: []string{"terraform_data.a", `aws_instance.b["x y"]`}}},
	} {
		t.Run(name, func(t *testing.T) {
			b, err := r.Marshal()
			require.NoError(t, err)
			require.LessOrEqual(t, len(b), MaxBytes)
			got, err := Unmarshal(b)
			require.NoError(t, err)
			require.Equal(t, r, got)
		})
	}
}

// TestMarshalFitsO1: a tail, an image and a runtime of any size still
// make a document of at most MaxBytes that the manager accepts, keeping
// the tail's headline and its last line.
func TestMarshalFitsO1(t *testing.T) {
	r := failed()
	r.Image = strings.Repeat("i", 5000)
	r.Runtime = strings.Repeat("v\n", 500)
	var lines []string
	for range 2000 {
		lines = append(lines, `│ a "quoted" line with \ escapes`)
	}
	r.Error.Tail = "Error: the headline\n" + strings.Join(lines, "\n") + "\nthe last line"
	b, err := r.Marshal()
	require.NoError(t, err)
	require.LessOrEqual(t, len(b), MaxBytes)
	got, err := Unmarshal(b)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(got.Error.Tail, "Error: the headline\n...\n"), got.Error.Tail)
	require.True(t, strings.HasSuffix(got.Error.Tail, "\nthe last line"), got.Error.Tail)
	require.LessOrEqual(t, len(got.Image), MaxImage)
	require.NotContains(t, got.Runtime, "\n")
	// The caller's Result is not changed.
	require.Len(t, r.Image, 5000)
}

// TestMarshalDriftFitsO7: drift addresses are cleaned, cut to
// MaxDriftResources and MaxAddress, and dropped from the end until the
// document fits; the counts stay whole.
func TestMarshalDriftFitsO7(t *testing.T) {
	var addrs []string
	for i := range 40 {
		addrs = append(addrs, strings.Repeat(`\"`, 200)+string(rune('a'+i%26)))
	}
	addrs = append([]string{"bad\x1b[31maddress"}, addrs...)
	r := &Result{Version: Version, Operation: OperationDrift, Drift: &Drift{Changes: Changes{Update: 41}, Resources: addrs}}
	b, err := r.Marshal()
	require.NoError(t, err)
	require.LessOrEqual(t, len(b), MaxBytes)
	got, err := Unmarshal(b)
	require.NoError(t, err)
	require.Equal(t, 41, got.Drift.Update)
	require.True(t, got.Drift.Found())
	require.NotEmpty(t, got.Drift.Resources)
	require.Less(t, len(got.Drift.Resources), MaxDriftResources, "escapes make 16 addresses too long: some are dropped")
	require.Equal(t, "bad[31maddress", got.Drift.Resources[0])
	for _, a := range got.Drift.Resources {
		require.LessOrEqual(t, len(a), MaxAddress)
	}
	require.Len(t, r.Drift.Resources, 41, "the caller's Result is not changed")
	require.False(t, (&Drift{}).Found())
	require.False(t, (*Drift)(nil).Found())
}

// TestMarshalRefusesInvalid: a Result the manager would refuse is not
// written.
func TestMarshalRefusesInvalid(t *testing.T) {
	r := failed()
	r.Error.Kind = "made-up"
	_, err := r.Marshal()
	require.ErrorContains(t, err, "error.kind")
}

// TestUnmarshalRefusesO1B10: each document is refused whole, and no error
// quotes it.
func TestUnmarshalRefusesO1B10(t *testing.T) {
	const secret = "s3cr3t-in-the-document"
	for _, tt := range []struct {
		name, doc, want string
	}{
		{"empty", ``, "no result document"},
		{"not JSON", `Error: ` + secret, "not readable"},
		{"the log tail the kubelet falls back to", "│ Error: " + secret + "\n╵\n", "not readable"},
		{"over 4 KiB", `{"version":1,"operation":"apply","image":"` + strings.Repeat("x", MaxBytes) + `"}`, "not readable"},
		{"too deep", `{"version":1,"operation":"apply","steps":[{"name":[[[["` + secret + `"]]]]}]}`, "not readable"},
		{"too many values", `{"version":1,"operation":"apply","steps":[` + strings.Repeat(`0,`, 200) + `0]}`, "not readable"},
		{"wrong type", `{"version":"1","operation":"` + secret + `"}`, "not readable"},
		{"trailing data", `{"version":1,"operation":"apply"} {}`, "not readable"},
		{"another version", `{"version":2,"operation":"apply"}`, "version is not 1"},
		{"another operation", `{"version":1,"operation":"` + secret + `"}`, "operation is not"},
		{"unknown step", `{"version":1,"operation":"apply","steps":[{"name":"` + secret + `"}]}`, "steps[0].name"},
		{"exit code", `{"version":1,"operation":"apply","steps":[{"name":"init","exitCode":256}]}`, "steps[0].exitCode"},
		{"negative duration", `{"version":1,"operation":"apply","steps":[{"name":"init","durationMilliseconds":-1}]}`, "durationMilliseconds"},
		{"too many steps", `{"version":1,"operation":"apply","steps":[` + strings.Repeat(`{"name":"init"},`, MaxSteps) + `{"name":"init"}]}`, "more than 8 steps"},
		{"negative count", `{"version":1,"operation":"apply","changes":{"create":-1}}`, "changes"},
		{"unknown kind", `{"version":1,"operation":"apply","error":{"kind":"` + secret + `"}}`, "error.kind"},
		{"control characters in the tail", `{"version":1,"operation":"apply","error":{"kind":"step","tail":"a\u001b[31mred"}}`, "error.tail"},
		{"a tail over MaxTail", `{"version":1,"operation":"apply","error":{"kind":"step","tail":"` + strings.Repeat("t", MaxTail+1) + `"}}`, "error.tail"},
		{"a newline in the image", `{"version":1,"operation":"apply","image":"a\nb"}`, "image"},
		{"negative drift count", `{"version":1,"operation":"drift","drift":{"delete":-1}}`, "drift holds"},
		{"an empty drift address", `{"version":1,"operation":"drift","drift":{"resources":[""]}}`, "drift.resources[0]"},
		{"a newline in a drift address", `{"version":1,"operation":"drift","drift":{"resources":["a\n` + secret + `"]}}`, "drift.resources[0]"},
		{"too many drift addresses", `{"version":1,"operation":"drift","drift":{"resources":[` + strings.Repeat(`"a",`, MaxDriftResources) + `"a"]}}`, "more than 16"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r, err := Unmarshal([]byte(tt.doc))
			require.Nil(t, r)
			require.ErrorContains(t, err, tt.want)
			require.NotContains(t, err.Error(), secret)
			require.NotContains(t, err.Error(), "\n")
		})
	}
}

// TestUnmarshalIsBounded: the decoder stops at the bounded package's
// limits, which are the document's.
func TestUnmarshalIsBounded(t *testing.T) {
	_, err := Unmarshal([]byte(`{"version":1,"operation":"apply","steps":[[[[[]]]]]}`))
	require.Equal(t, bounded.KindDepth, bounded.KindOf(err))
	_, err = Unmarshal([]byte(strings.Repeat(" ", MaxBytes+1)))
	require.Equal(t, bounded.KindSize, bounded.KindOf(err))
}
