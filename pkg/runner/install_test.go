package runner

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestInstallCopiesTheRunningBinary covers the J5 init container step.
func TestInstallCopiesTheRunningBinary(t *testing.T) {
	dest := filepath.Join(t.TempDir(), "captf")
	var stderr bytes.Buffer
	require.Equal(t, 0, Install([]string{dest}, &stderr), stderr.String())

	self, err := os.Executable()
	require.NoError(t, err)
	want, err := os.ReadFile(self)
	require.NoError(t, err)
	got, err := os.ReadFile(dest)
	require.NoError(t, err)
	require.Equal(t, want, got, "the installed file must be a byte copy of the running binary")
	st, err := os.Stat(dest)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o555), st.Mode().Perm())
}

func TestInstallErrors(t *testing.T) {
	for name, args := range map[string][]string{
		"no destination":        nil,
		"two destinations":      {"a", "b"},
		"missing parent folder": {filepath.Join(t.TempDir(), "missing", "captf")},
	} {
		t.Run(name, func(t *testing.T) {
			var stderr bytes.Buffer
			require.Equal(t, ExitRunnerError, Install(args, &stderr))
			require.Contains(t, stderr.String(), "captf runner: install: ")
		})
	}
}
