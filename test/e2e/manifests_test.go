package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/test/integration/framework"
)

// TestManifestsAgree runs in make test without a node: the manifests make
// run applies (test/e2e/manifests), the image script and this test name the
// same images, Secret, key, endpoint and identity, so a rename in one place
// cannot leave the sample's Job Pending or refused.
func TestManifestsAgree(t *testing.T) {
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	docs := func(file string) [][]byte {
		b, err := os.ReadFile(filepath.Join(root, "test", "e2e", "manifests", file))
		if err != nil {
			t.Fatal(err)
		}
		var out [][]byte
		r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(b)))
		for {
			d, err := r.Read()
			if err == io.EOF {
				return out
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(bytes.TrimSpace(d)) > 0 {
				out = append(out, d)
			}
		}
	}
	kindOf := func(d []byte) string {
		var m struct{ Kind string }
		if err := yaml.Unmarshal(d, &m); err != nil {
			t.Fatal(err)
		}
		return m.Kind
	}

	var secret corev1.Secret
	var deploy appsv1.Deployment
	var svc corev1.Service
	for _, d := range docs("fakecloud.yaml") {
		switch kindOf(d) {
		case "Secret":
			mustUnmarshal(t, d, &secret)
		case "Deployment":
			mustUnmarshal(t, d, &deploy)
		case "Service":
			mustUnmarshal(t, d, &svc)
		}
	}
	if secret.Name != cloudSecret || secret.Namespace != cloudNamespace || secret.StringData[tokenKey] == "" {
		t.Errorf("fakecloud.yaml's Secret is %s/%s with keys %v, want %s/%s with %s", secret.Namespace, secret.Name, keys(secret.StringData), cloudNamespace, cloudSecret, tokenKey)
	}
	if secret.Labels[v1alpha1.LabelCredential] != v1alpha1.LabelTrue || secret.Annotations[v1alpha1.AnnotationCredentialIdentities] != identity {
		t.Errorf("fakecloud.yaml's Secret lacks the consent marks for identity %s (SPEC C1): %v %v", identity, secret.Labels, secret.Annotations)
	}
	if c := deploy.Spec.Template.Spec.Containers; len(c) != 1 || c[0].Image != "captf.local/fakecloud:dev" {
		t.Errorf("fakecloud.yaml's Deployment runs %+v, want captf.local/fakecloud:dev", c)
	}
	if got := "http://" + svc.Spec.ClusterIP + ":" + strconv.Itoa(int(svc.Spec.Ports[0].Port)); got != cloudEndpoint {
		t.Errorf("fakecloud.yaml's Service is %s, want %s", got, cloudEndpoint)
	}

	var id v1alpha1.TerraformClusterIdentity
	var cluster v1alpha1.TerraformCluster
	for _, d := range docs("sample.yaml") {
		switch kindOf(d) {
		case "TerraformClusterIdentity":
			mustUnmarshal(t, d, &id)
		case "TerraformCluster":
			mustUnmarshal(t, d, &cluster)
		}
	}
	if id.Name != identity || id.Spec.SecretRef.Name != cloudSecret || id.Spec.SecretRef.Namespace != cloudNamespace {
		t.Errorf("sample.yaml's identity %s names %s/%s, want %s naming %s/%s", id.Name, id.Spec.SecretRef.Namespace, id.Spec.SecretRef.Name, identity, cloudNamespace, cloudSecret)
	}
	if cluster.Spec.Source.Image != moduleImage || cluster.Spec.IdentityRef == nil || cluster.Spec.IdentityRef.Name != identity {
		t.Errorf("sample.yaml's cluster runs %q with identity %+v, want %q and %s", cluster.Spec.Source.Image, cluster.Spec.IdentityRef, moduleImage, identity)
	}
	var vars map[string]any
	if cluster.Spec.Variables == nil || json.Unmarshal(cluster.Spec.Variables.Raw, &vars) != nil || vars["fakecloud_endpoint"] != cloudEndpoint {
		t.Errorf("sample.yaml's cluster variables %v, want fakecloud_endpoint %s", vars, cloudEndpoint)
	}

	script, err := os.ReadFile(filepath.Join(root, "hack", "build-e2e-images.sh"))
	if err != nil {
		t.Fatal(err)
	}
	for _, img := range []string{captfImage, "captf.local/fakecloud:dev", moduleImage} {
		if !strings.Contains(string(script), img) {
			t.Errorf("hack/build-e2e-images.sh does not build %s", img)
		}
	}

	// The overlay the end-to-end tests deploy gives every webhook of the
	// configuration its caBundle: one without it refuses its kind (x509).
	b, err := os.ReadFile(filepath.Join(root, "manifests", "webhook", "validating_webhook_configuration.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var vwc admissionregistrationv1.ValidatingWebhookConfiguration
	mustUnmarshal(t, b, &vwc)
	if len(vwc.Webhooks) == 0 {
		t.Fatal("manifests/webhook: no webhooks")
	}
	for i, w := range vwc.Webhooks {
		if !strings.Contains(overlay, "path: /webhooks/"+strconv.Itoa(i)+"/clientConfig/caBundle") {
			t.Errorf("the e2e overlay sets no caBundle for webhook %d (%s)", i, w.Name)
		}
	}
	// And the mutating configuration's (TerraformPlans, O8), patched after
	// the validating one's.
	b, err = os.ReadFile(filepath.Join(root, "manifests", "webhook", "mutating_webhook_configuration.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var mwc admissionregistrationv1.MutatingWebhookConfiguration
	mustUnmarshal(t, b, &mwc)
	_, mutating, ok := strings.Cut(overlay, "kind: MutatingWebhookConfiguration, name: "+mwc.Name+"}")
	if !ok {
		t.Fatalf("the e2e overlay does not patch the MutatingWebhookConfiguration %s", mwc.Name)
	}
	for i, w := range mwc.Webhooks {
		if !strings.Contains(mutating, "path: /webhooks/"+strconv.Itoa(i)+"/clientConfig/caBundle") {
			t.Errorf("the e2e overlay sets no caBundle for mutating webhook %d (%s)", i, w.Name)
		}
	}
}

func mustUnmarshal(t *testing.T, d []byte, into any) {
	t.Helper()
	if err := yaml.UnmarshalStrict(d, into); err != nil {
		t.Fatalf("%v in:\n%s", err, d)
	}
}

func keys(m map[string]string) []string {
	var k []string
	for n := range m {
		k = append(k, n)
	}
	return k
}
