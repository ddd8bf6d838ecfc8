package contract

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
)

func TestParseEndpoint(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want v1alpha1.APIEndpoint
		err  string
	}{
		{in: `{"host":"cp.example.com","port":6443}`, want: v1alpha1.APIEndpoint{Host: "cp.example.com", Port: 6443}},
		{in: `{"host":"10.0.0.1","port":"443"}`, want: v1alpha1.APIEndpoint{Host: "10.0.0.1", Port: 443}},
		{in: `"cp.example.com:6443"`, want: v1alpha1.APIEndpoint{Host: "cp.example.com", Port: 6443}},
		{in: `"[2001:db8::1]:6443"`, want: v1alpha1.APIEndpoint{Host: "2001:db8::1", Port: 6443}},
		{in: `{"host":"[2001:db8::1]","port":6443}`, want: v1alpha1.APIEndpoint{Host: "2001:db8::1", Port: 6443}},
		{in: `"cp.example.com"`, err: "not host:port"},
		{in: `"2001:db8::1:6443"`, err: "not host:port"},
		{in: `"cp:0"`, err: "port"},
		{in: `"cp:65536"`, err: "port"},
		{in: `{"host":"cp","port":-1}`, err: "port"},
		{in: `{"host":"cp","port":6443.5}`, err: "port"},
		{in: `{"host":"","port":6443}`, err: "empty"},
		{in: `{"host":"a b","port":6443}`, err: "white space"},
		{in: `{"port":6443}`, err: "object with host and port"},
		{in: `{"host":"cp"}`, err: "object with host and port"},
		{in: `6443`, err: "object with host and port"},
		{in: `["cp",6443]`, err: "object with host and port"},
		{in: `{"host":"` + strings.Repeat("a", 513) + `","port":1}`, err: "more than 512"},
	} {
		got, err := ParseEndpoint([]byte(tc.in))
		if tc.err != "" {
			require.ErrorContains(t, err, tc.err, tc.in)
			continue
		}
		require.NoError(t, err, tc.in)
		require.Equal(t, tc.want, got, tc.in)
	}
}

func TestParseProviderIDs(t *testing.T) {
	id, err := ParseProviderID([]byte(`"aws:///eu-west-1a/i-0abc"`))
	require.NoError(t, err)
	require.Equal(t, "aws:///eu-west-1a/i-0abc", id)
	for _, bad := range []string{`""`, `42`, `["a"]`, `null`} {
		_, err := ParseProviderID([]byte(bad))
		require.Error(t, err, bad)
	}

	l, err := ParseProviderIDList([]byte(`["fake://a","fake://b"]`))
	require.NoError(t, err)
	require.Equal(t, []string{"fake://a", "fake://b"}, l)
	l, err = ParseProviderIDList([]byte(`["fake://b","fake://a","fake://b"]`))
	require.NoError(t, err)
	require.Equal(t, []string{"fake://a", "fake://b"}, l, "sorted, without duplicates (K7)")
	for _, bad := range []string{`"fake://a"`, `["a",""]`, `["a",1]`, `{"a":"b"}`} {
		_, err := ParseProviderIDList([]byte(bad))
		require.Error(t, err, bad)
	}
	big := "[" + strings.TrimSuffix(strings.Repeat(`"x",`, MaxProviderIDList+1), ",") + "]"
	_, err = ParseProviderIDList([]byte(big))
	require.ErrorContains(t, err, "more than 10000")
}
