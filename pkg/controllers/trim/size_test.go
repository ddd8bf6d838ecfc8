package trim

import (
	"fmt"
	"runtime"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	captfscheme "github.com/captf/captf/pkg/generated/clientset/versioned/scheme"
)

// machineJSON is a converged TerraformMachine as the bench's shared
// scenario leaves it (issue 25): the seven conditions the manager writes.
const machineJSON = `{"apiVersion":"infrastructure.cluster.x-k8s.io/v1alpha1","kind":"TerraformMachine",
"metadata":{"annotations":{"captf.io/standalone":"true"},"creationTimestamp":"2026-12-03T03:18:53Z","generation":1,
"labels":{"cluster.x-k8s.io/cluster-name":"c0"},"name":"m0-a","namespace":"shared-%03d","resourceVersion":"%d","uid":"a7946f78-536e-4bde-9931-%012d",
"finalizers":["captf.io/destroy"]},
"spec":{"jobs":{"activeDeadlineSeconds":3600},"source":{}},
"status":{"conditions":[
{"lastTransitionTime":"2026-12-03T03:18:53Z","message":"annotation cluster.x-k8s.io/paused is not set","observedGeneration":1,"reason":"NotPaused","status":"False","type":"Paused"},
{"lastTransitionTime":"2026-12-03T03:18:53Z","message":"TerraformClusterIdentity bench-shared-1 allows namespace shared-%03d","observedGeneration":1,"reason":"IdentityAllowed","status":"True","type":"IdentityAllowed"},
{"lastTransitionTime":"2026-12-03T03:18:53Z","message":"mirror Secret captf-creds-bench-shared-1 is current","observedGeneration":1,"reason":"Mirrored","status":"True","type":"CredentialsMirrored"},
{"lastTransitionTime":"2026-12-03T03:18:53Z","message":"annotation captf.io/standalone: \"true\": runs without Cluster API owners","observedGeneration":1,"reason":"DependenciesReady","status":"True","type":"DependenciesReady"},
{"lastTransitionTime":"2026-12-03T03:18:53Z","message":"spec.source.image is not set: no Job can run","observedGeneration":1,"reason":"NoApplyYet","status":"Unknown","type":"ApplyJobSucceeded"},
{"lastTransitionTime":"2026-12-03T03:18:53Z","message":"not provisioned yet","observedGeneration":1,"reason":"WaitingForProvisioning","status":"Unknown","type":"InfrastructureHealthy"},
{"lastTransitionTime":"2026-12-03T03:18:53Z","message":"ApplyJobSucceeded: spec.source.image is not set: no Job can run","observedGeneration":1,"reason":"NoApplyYet","status":"False","type":"Ready"}],
"identity":"bench-shared-1"}}`

// mirrorJSON is a mirror as the manager writes it.
const mirrorJSON = `{"apiVersion":"v1","kind":"Secret","type":"Opaque",
"data":{"AWS_ACCESS_KEY_ID":"QUtJQUJENkZCNTFCQTMxNzU1RUY=","AWS_SECRET_ACCESS_KEY":"OGE2YTc3YjMxYTg1NDNiY2I1YmE2ZGJhZGZjNjI4NTgyYzA0YzQyMQ=="},
"metadata":{"annotations":{"captf.io/identity":"bench-shared-0","captf.io/source-hash":"b90009ff591dd41313292892c6913d948a22dbc05ef86f658407741946b590ad"},
"creationTimestamp":"2026-12-03T03:18:53Z","labels":{"captf.io/managed":"true","captf.io/mirrored":"true"},
"name":"captf-creds-bench-shared-0","namespace":"shared-%03d",
"ownerReferences":[{"apiVersion":"infrastructure.cluster.x-k8s.io/v1alpha1","kind":"TerraformCluster","name":"c0","uid":"1e916a88-5d93-4df5-916a-%012d"}],
"resourceVersion":"%d","uid":"f9e781de-c78f-4eee-bfd7-%012d"}}`

// BenchmarkCachedBytes reports the heap each cached object holds after
// [ForCache] (issue 25): `go test -run NONE -bench CachedBytes
// ./pkg/controllers/trim`. It decodes n objects as an informer does (JSON
// for the captf kinds, which have no protobuf; JSON for the Secret too,
// an upper bound of its protobuf decoding), trims each and keeps them.
func BenchmarkCachedBytes(b *testing.B) {
	captf := serializer.NewCodecFactory(captfscheme.Scheme).UniversalDeserializer()
	core := serializer.NewCodecFactory(clientgoscheme.Scheme).UniversalDeserializer()
	const n = 5000
	kinds := []struct {
		name string
		doc  func(i int) string
		dec  func(data []byte) (interface{}, error)
	}{
		{"TerraformMachine", func(i int) string { return fmt.Sprintf(machineJSON, i, i, i, i) }, func(d []byte) (interface{}, error) {
			o, _, err := captf.Decode(d, nil, &v1alpha1.TerraformMachine{})
			return o, err
		}},
		{"mirror", func(i int) string { return fmt.Sprintf(mirrorJSON, i, i, i, i) }, func(d []byte) (interface{}, error) {
			o, _, err := core.Decode(d, nil, &corev1.Secret{})
			return o, err
		}},
	}
	for _, k := range kinds {
		b.Run(k.name, func(b *testing.B) {
			docs := make([][]byte, n)
			for i := range docs {
				docs[i] = []byte(k.doc(i))
			}
			for b.Loop() {
				kept := make([]interface{}, n)
				before := heapInUse()
				for i, d := range docs {
					o, err := k.dec(d)
					if err != nil {
						b.Fatal(err)
					}
					if kept[i], err = ForCache(o); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(heapInUse()-before)/n, "heap-bytes/object")
				runtime.KeepAlive(kept)
			}
		})
	}
}

func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
