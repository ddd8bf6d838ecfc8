package bounded

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// TestLimitResponses: a client made from LimitResponses' config reads a
// response within the budget, and fails past it with KindInput, which
// client-go returns wrapped; whether or not the server announces the
// length.
func TestLimitResponses(t *testing.T) {
	secret := func(size int) []byte {
		b, err := json.Marshal(&corev1.Secret{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
			ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "ns"},
			Data:       map[string][]byte{"k": []byte(strings.Repeat(secret, size/len(secret)))}})
		require.NoError(t, err)
		return b
	}
	small, large := secret(1000), secret(100000)
	for _, announce := range []bool{true, false} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body := small
			if strings.HasSuffix(r.URL.Path, "/large") {
				body = large
			}
			w.Header().Set("Content-Type", "application/json")
			if announce {
				w.Header().Set("Content-Length", strconv.Itoa(len(body)))
			}
			_, _ = w.Write(body[:len(body)/2])
			w.(http.Flusher).Flush() // chunked when not announced
			_, _ = w.Write(body[len(body)/2:])
		}))
		cfg := LimitResponses(&rest.Config{Host: srv.URL}, int64(len(small)+100))
		kube, err := kubernetes.NewForConfig(cfg)
		require.NoError(t, err)
		secrets := kube.CoreV1().Secrets("ns")

		s, err := secrets.Get(context.Background(), "small", metav1.GetOptions{})
		require.NoError(t, err, "announce %v", announce)
		require.Equal(t, "s", s.Name)
		_, err = secrets.Get(context.Background(), "large", metav1.GetOptions{})
		requireKind(t, err, KindInput)
		srv.Close()
	}
}
