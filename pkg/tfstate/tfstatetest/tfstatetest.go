// Package tfstatetest builds Terraform states, and the Secrets OpenTofu's
// kubernetes backend keeps them in, for tests (SPEC T2, T4). The backend's
// labels and keys are written out here as the backend writes them, not
// taken from package tfstate, so that tests built on them check tfstate's
// constants against the format.
package tfstatetest

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// State is an applied state (format version 4) with the given outputs
// (name to JSON value) and one sensitive output, admin_password, whose
// value is sensitive.
func State(sensitive string, outputs map[string]string) []byte {
	return StateSerial(3, sensitive, outputs)
}

// StateSerial is State with the given serial (SPEC O5 backs up each new
// one).
func StateSerial(serial int64, sensitive string, outputs map[string]string) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, `{"version":4,"terraform_version":"1.12.6","serial":%d,"lineage":"6c1d","outputs":{`, serial)
	fmt.Fprintf(&b, `"admin_password":{"value":%q,"type":"string","sensitive":true}`, sensitive)
	for k, v := range outputs {
		fmt.Fprintf(&b, `,%q:{"value":%s,"type":"string"}`, k, v)
	}
	b.WriteString(`},"resources":[],"check_results":null}`)
	return []byte(b.String())
}

// Gzip compresses data as the backend does (compress/gzip, default level).
func Gzip(data []byte) []byte {
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	if _, err := w.Write(data); err != nil {
		panic(err) // a bytes.Buffer does not fail
	}
	if err := w.Close(); err != nil {
		panic(err)
	}
	return b.Bytes()
}

// Secret is the state Secret namespace/name of the workspace "default" and
// suffix as the backend writes it: its four labels, the encoding
// annotation, and data (already gzipped) under the key tfstate; no data
// key when data is nil (the backend creates the Secret before it writes).
func Secret(namespace, name, suffix string, data []byte) *corev1.Secret {
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: namespace, Name: name,
			Labels: map[string]string{"tfstate": "true", "tfstateSecretSuffix": suffix, "tfstateWorkspace": "default",
				"app.kubernetes.io/managed-by": "terraform"},
			Annotations: map[string]string{"encoding": "gzip"},
		},
		Type: corev1.SecretTypeOpaque,
	}
	if data != nil {
		s.Data = map[string][]byte{"tfstate": data}
	}
	return s
}
