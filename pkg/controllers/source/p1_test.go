package source

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/captf/captf/pkg/controllers/freshness"
)

// readOnce runs one Get and releases its GET if it starts one.
func readOnce(t *testing.T, s *server, r *Reader, ticket Ticket) result {
	t.Helper()
	out := make(chan result, 1)
	get(r, ticket, out)
	select {
	case res := <-out:
		return res
	case <-time.After(50 * time.Millisecond):
	}
	s.awaitStart(t)
	s.release <- struct{}{}
	return receive(t, out)
}

// P1: a completed read that began after the key was added is reused: a
// resync pass reads each Secret once.
func TestP1ReusesAReadThatBeganAfterTheAdd(t *testing.T) {
	s := newServer(t)
	r := NewReader(s.client)
	added := freshness.Now() // the pass adds every key first
	require.Equal(t, "0", readOnce(t, s, r, added).rv)
	s.setVersion(1)
	for range 3 {
		require.Equal(t, "0", readOnce(t, s, r, added).rv, "the rest of the pass reuses the read")
	}
	require.Equal(t, 1, s.getCount())
}

// P1: a read that began before the key was added is never used: a
// reconcile a change triggered reads afresh.
func TestP1ReadBeforeTheAddIsNotReused(t *testing.T) {
	s := newServer(t)
	r := NewReader(s.client)
	require.Equal(t, "0", readOnce(t, s, r, freshness.Now()).rv)
	s.setVersion(1)
	added := freshness.Now() // a change enqueues the key after that read
	require.Equal(t, "1", readOnce(t, s, r, added).rv)
	require.Equal(t, 2, s.getCount())
}

// P1: a read in flight when the key is added is not joined; the caller
// waits for the next read.
func TestP1ReadInFlightAcrossTheAddIsNotJoined(t *testing.T) {
	s := newServer(t)
	r := NewReader(s.client)
	shares := watchSharing(r)
	first := make(chan result, 1)
	get(r, freshness.Now(), first)
	s.awaitStart(t) // version 0 in flight
	s.setVersion(1)
	late := make(chan result, 1)
	get(r, freshness.Now(), late)
	awaitShare(t, shares, false)
	s.release <- struct{}{}
	require.Equal(t, "0", receive(t, first).rv)
	require.Equal(t, 1, s.awaitStart(t))
	s.release <- struct{}{}
	require.Equal(t, "1", receive(t, late).rv)
}

// P1: a failed read is not kept; a retry (added again by the rate limiter)
// reads afresh, and so does another caller of the same pass.
func TestP1FailedReadIsNotKept(t *testing.T) {
	c := fake.NewClientset()
	calls := 0
	c.PrependReactor("get", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
		calls++
		if calls == 1 {
			return true, nil, apierrors.NewInternalError(fmt.Errorf("etcd"))
		}
		return true, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, ResourceVersion: strconv.Itoa(calls)}}, nil
	})
	r := NewReader(c)
	added := freshness.Now()
	_, err := r.Get(context.Background(), added, ns, name)
	require.Error(t, err)
	got, err := r.Get(context.Background(), added, ns, name)
	require.NoError(t, err)
	require.Equal(t, "2", got.ResourceVersion)
	require.Equal(t, 2, calls)
}

// P1, property: however adds and reads interleave, a caller never gets a
// read that began before its ticket (when its key was last added), and a
// pass of many callers with one old ticket costs few reads.
func TestP1NeverUsesAReadThatBeganBeforeTheTicket(t *testing.T) {
	c := fake.NewClientset()
	var mu sync.Mutex
	var began []Ticket // began[i]: the start of the i-th read
	gets := 0
	c.PrependReactor("get", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		gets++
		n := gets
		mu.Unlock()
		time.Sleep(time.Duration(rand.IntN(300)) * time.Microsecond)
		return true, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, ResourceVersion: strconv.Itoa(n)}}, nil
	})
	r := NewReader(c)
	r.onStart = func(b Ticket) {
		mu.Lock()
		defer mu.Unlock()
		began = append(began, b)
	}
	var wg sync.WaitGroup
	var failures sync.Map
	for i := range 400 {
		wg.Go(func() {
			time.Sleep(time.Duration(rand.IntN(2000)) * time.Microsecond)
			ticket := freshness.Now() // the key's last add
			time.Sleep(time.Duration(rand.IntN(500)) * time.Microsecond)
			s, err := r.Get(context.Background(), ticket, ns, name)
			if err != nil {
				failures.Store(i, err.Error())
				return
			}
			n, _ := strconv.Atoi(s.ResourceVersion)
			mu.Lock()
			b := began[n-1]
			mu.Unlock()
			if b <= ticket {
				failures.Store(i, fmt.Sprintf("read %d began at %d, before the ticket %d", n, b, ticket))
			}
		})
	}
	wg.Wait()
	failures.Range(func(k, v any) bool {
		t.Errorf("caller %v: %v", k, v)
		return true
	})
	t.Logf("400 callers, %d reads", gets)
}
