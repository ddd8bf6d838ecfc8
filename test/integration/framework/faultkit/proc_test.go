package faultkit

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

// The anonymous part of the resident set is part of it, and both are read.
func TestAnonRSSIsPartOfRSS(t *testing.T) {
	rss, err := RSS(os.Getpid())
	require.NoError(t, err)
	anon, err := AnonRSS(os.Getpid())
	require.NoError(t, err)
	require.Positive(t, anon)
	require.LessOrEqual(t, anon, rss)
	_, err = statusBytes(os.Getpid(), "NoSuchField")
	require.ErrorContains(t, err, "no NoSuchField")
}
