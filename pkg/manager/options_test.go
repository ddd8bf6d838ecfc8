package manager

import (
	"flag"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// O4: the Job caps' flags, their defaults (200, 20), 0 as no cap, and a
// negative cap refused with the flag's name.
func TestO4JobCapFlags(t *testing.T) {
	o := NewOptions()
	require.Equal(t, 200, o.MaxActiveJobs)
	require.Equal(t, 20, o.ClusterMaxActiveJobs)

	fs := flag.NewFlagSet("manager", flag.ContinueOnError)
	o.AddFlags(fs)
	require.NoError(t, fs.Parse([]string{"--max-active-jobs=0", "--cluster-max-active-jobs=3"}))
	require.Equal(t, 0, o.MaxActiveJobs)
	require.Equal(t, 3, o.ClusterMaxActiveJobs)
	require.NoError(t, o.Validate(), "0 is no cap")

	o.MaxActiveJobs, o.ClusterMaxActiveJobs = -1, -2
	err := o.Validate()
	require.ErrorContains(t, err, "--max-active-jobs must be 0 (no cap) or more, got -1")
	require.ErrorContains(t, err, "--cluster-max-active-jobs must be 0 (no cap) or more, got -2")
}

// O7: --drift-default-interval defaults to 30m; 0 (off) and whole seconds
// are valid; a negative or fractional interval is refused by name.
func TestO7DriftDefaultIntervalFlag(t *testing.T) {
	o := NewOptions()
	require.Equal(t, 30*time.Minute, o.DriftDefaultInterval)
	fs := flag.NewFlagSet("manager", flag.ContinueOnError)
	o.AddFlags(fs)
	require.NoError(t, fs.Parse([]string{"--drift-default-interval=0"}))
	require.Zero(t, o.DriftDefaultInterval)
	require.NoError(t, o.Validate(), "0 is off")
	for _, bad := range []time.Duration{-time.Second, 1500 * time.Millisecond} {
		o.DriftDefaultInterval = bad
		require.ErrorContains(t, o.Validate(), "--drift-default-interval must be 0 (no drift checks) or a positive whole number of seconds")
	}
}
