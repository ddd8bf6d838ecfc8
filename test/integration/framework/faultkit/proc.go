package faultkit

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// RSS returns a process's resident set size in bytes (VmRSS).
func RSS(pid int) (int64, error) { return statusBytes(pid, "VmRSS") }

// AnonRSS returns the anonymous part of a process's resident set in bytes
// (RssAnon): the heap and stacks, what a container's memory limit cannot
// reclaim. VmRSS also counts the mapped pages of the binary (RssFile),
// page cache the kernel can drop under the limit.
func AnonRSS(pid int) (int64, error) { return statusBytes(pid, "RssAnon") }

// statusBytes reads field (a kB figure) from /proc/<pid>/status.
func statusBytes(pid int, field string) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			f := strings.Fields(rest)
			if len(f) != 2 || f[1] != "kB" {
				return 0, fmt.Errorf("unexpected %s line %q", field, line)
			}
			kb, err := strconv.ParseInt(f[0], 10, 64)
			return kb * 1024, err
		}
	}
	return 0, fmt.Errorf("no %s in /proc/<pid>/status", field)
}

// MedianRSS returns the median of n RSS samples of pid taken interval
// apart: one sample catches a garbage collector's peak or trough.
func MedianRSS(ctx context.Context, pid, n int, interval time.Duration) (int64, error) {
	var samples []int64
	for i := range n {
		if i > 0 {
			select {
			case <-ctx.Done():
				return 0, ctx.Err()
			case <-time.After(interval):
			}
		}
		v, err := RSS(pid)
		if err != nil {
			return 0, err
		}
		samples = append(samples, v)
	}
	sort.Slice(samples, func(i, j int) bool { return samples[i] < samples[j] })
	return samples[len(samples)/2], nil
}

// MiB converts bytes to mebibytes.
func MiB(b int64) float64 { return float64(b) / (1 << 20) }

// Parallel runs fn for 0..n-1 on at most workers goroutines and returns
// the first error (the others still run to completion).
func Parallel(ctx context.Context, n, workers int, fn func(ctx context.Context, i int) error) error {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	next := make(chan int)
	for range workers {
		wg.Go(func() {
			for i := range next {
				if err := fn(ctx, i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		})
	}
	for i := range n {
		if ctx.Err() != nil {
			break
		}
		next <- i
	}
	close(next)
	wg.Wait()
	if first == nil {
		first = ctx.Err()
	}
	return first
}
