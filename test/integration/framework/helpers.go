package framework

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
)

// Context returns a context cancelled when the test ends.
func Context(t testing.TB) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	return ctx
}

// Name returns a unique DNS label starting with prefix.
func Name(prefix string) string {
	return prefix + "-" + utilrand.String(6)
}

// CreateNamespace creates a namespace with a unique name and the given
// labels, deleted when the test ends.
func (e *Env) CreateNamespace(t testing.TB, prefix string, labels map[string]string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: Name(prefix), Labels: labels}}
	if _, err := e.Kube.CoreV1().Namespaces().Create(Context(t), ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating namespace: %v", err)
	}
	t.Cleanup(func() {
		err := e.Kube.CoreV1().Namespaces().Delete(context.Background(), ns.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Logf("deleting namespace %s: %v", ns.Name, err)
		}
	})
	return ns.Name
}

// Eventually polls cond every interval until it returns true or timeout
// passes; on timeout the test fails with the last message cond returned, so
// a failure says what was last seen rather than only that time ran out.
func Eventually(t testing.TB, timeout time.Duration, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	interval := 50 * time.Millisecond
	var last string
	for {
		ok, msg := cond()
		if ok {
			return
		}
		last = msg
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %s; last seen: %s", timeout, last)
		}
		time.Sleep(interval)
		if interval < time.Second {
			interval *= 2
		}
	}
}

// RequireInvalid fails unless err is an Invalid error from the API server
// whose message contains every fragment.
func RequireInvalid(t testing.TB, err error, fragments ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("expected the API server to refuse the request, it accepted it")
	}
	if !apierrors.IsInvalid(err) {
		t.Fatalf("expected an Invalid error, got %T: %v", err, err)
	}
	for _, f := range fragments {
		if !strings.Contains(err.Error(), f) {
			t.Fatalf("error %q does not contain %q", err.Error(), f)
		}
	}
}

// Describe formats conditions for failure messages.
func Describe(conds []metav1.Condition) string {
	var b strings.Builder
	for _, c := range conds {
		fmt.Fprintf(&b, "%s=%s/%s(%q) ", c.Type, c.Status, c.Reason, c.Message)
	}
	return b.String()
}
