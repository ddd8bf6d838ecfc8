package metrics

import "testing"

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		method, path string
		watch        bool
		verb, res    string
	}{
		{"GET", "/api/v1/namespaces/team-a/secrets/captf-creds-aws", false, "get", "secrets"},
		{"GET", "/api/v1/secrets", false, "list", "secrets"},
		{"GET", "/api/v1/secrets", true, "watch", "secrets"},
		{"GET", "/api/v1/namespaces", false, "list", "namespaces"},
		{"GET", "/api/v1/namespaces/team-a", false, "get", "namespaces"},
		{"PUT", "/api/v1/namespaces/team-a/secrets/x", false, "update", "secrets"},
		{"POST", "/api/v1/namespaces/team-a/secrets", false, "create", "secrets"},
		{"DELETE", "/api/v1/namespaces/team-a/secrets/x", false, "delete", "secrets"},
		{"PUT", "/apis/infrastructure.cluster.x-k8s.io/v1alpha1/namespaces/a/terraformclusters/c/status", false, "update", "terraformclusters/status"},
		{"PUT", "/apis/infrastructure.cluster.x-k8s.io/v1alpha1/terraformclusteridentities/i/status", false, "update", "terraformclusteridentities/status"},
		{"POST", "/apis/batch/v1/namespaces/a/jobs", false, "create", "jobs"},
		{"POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", false, "create", "subjectaccessreviews"},
		{"GET", "/healthz", false, "get", "other"},
	} {
		verb, res := Classify(tc.method, tc.path, tc.watch)
		if verb != tc.verb || res != tc.res {
			t.Errorf("%s %s watch=%v: got %s %s, want %s %s", tc.method, tc.path, tc.watch, verb, res, tc.verb, tc.res)
		}
	}
}
