package watchbound

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"

	"github.com/captf/captf/pkg/generated/clientset/versioned"
	captffake "github.com/captf/captf/pkg/generated/clientset/versioned/fake"
)

// B12: every Watch of the kinds the manager's informers watch, through
// the wrapped clients, returns Release's watch.
func TestClientsReleaseEveryInformerWatch(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	defer srv.Close()
	cfg := &rest.Config{Host: srv.URL}
	kc, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cc, err := versioned.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dc, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	mc, err := metadata.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	kube, captf, dyn, meta := Kube(kc), Captf(cc), Dynamic(dc), Metadata(mc)
	infra := captf.InfrastructureV1alpha1()
	gvr := schema.GroupVersionResource{Group: "cluster.x-k8s.io", Version: "v1beta2", Resource: "clusters"}
	secrets := schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	type watcher func(context.Context, metav1.ListOptions) (watch.Interface, error)
	for name, w := range map[string]watcher{
		"Secrets":                       kube.CoreV1().Secrets("ns").Watch,
		"Namespaces":                    kube.CoreV1().Namespaces().Watch,
		"Jobs":                          kube.BatchV1().Jobs("ns").Watch,
		"TerraformClusters":             infra.TerraformClusters("ns").Watch,
		"TerraformMachines":             infra.TerraformMachines("ns").Watch,
		"TerraformMachinePools":         infra.TerraformMachinePools("ns").Watch,
		"TerraformClusterIdentities":    infra.TerraformClusterIdentities().Watch,
		"TerraformPlans":                infra.TerraformPlans("ns").Watch,
		"TerraformClusterTemplates":     infra.TerraformClusterTemplates("ns").Watch,
		"TerraformMachineTemplates":     infra.TerraformMachineTemplates("ns").Watch,
		"TerraformMachinePoolTemplates": infra.TerraformMachinePoolTemplates("ns").Watch,
		"dynamic":                       dyn.Resource(gvr).Watch,
		"dynamic namespaced":            dyn.Resource(gvr).Namespace("ns").Watch,
		"metadata":                      meta.Resource(secrets).Watch,
		"metadata namespaced":           meta.Resource(secrets).Namespace("ns").Watch,
	} {
		got, err := w(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if _, ok := got.(*released); !ok {
			t.Errorf("B12: %s's Watch returned %T, not Release's watch", name, got)
		}
		got.Stop()
	}
}

// Fake clients, which do not support watch-list semantics, are returned
// as they are, so informers built on them still see that.
func TestClientsLeaveFakesAlone(t *testing.T) {
	kc, cc := kubefake.NewClientset(), captffake.NewSimpleClientset()
	dc := dynamicfake.NewSimpleDynamicClient(runtime.NewScheme())
	if Kube(kc) != kubernetes.Interface(kc) || Captf(cc) != versioned.Interface(cc) || Dynamic(dc) != dynamic.Interface(dc) {
		t.Fatal("a fake client was wrapped")
	}
}
