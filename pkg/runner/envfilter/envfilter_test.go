package envfilter

import (
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestFilterJ6 checks SPEC rule J6 one variable at a time, so a failure names
// the variable that was misclassified.
func TestFilterJ6(t *testing.T) {
	tests := []struct {
		entry string
		drop  bool
		why   string
	}{
		// J6: the TF_ and KUBE_ classes are removed.
		{"TF_VAR_x=1", true, "overrides a rendered input"},
		{"TF_WORKSPACE=other", true, "moves the state"},
		{"TF_CLI_ARGS=-destroy", true, "rewrites every command"},
		{"TF_CLI_ARGS_apply=-target=x", true, "rewrites apply"},
		{"TF_LOG=TRACE", true, "makes providers log credentials"},
		{"TF_LOG_PATH=/tmp/log", true, "makes providers log credentials"},
		{"TF_DATA_DIR=/tmp/d", true, "moves .terraform"},
		{"KUBE_CONFIG_PATH=/x", true, "redirects the kubernetes provider"},
		{"KUBE_TOKEN=abc", true, "redirects the kubernetes provider"},
		{"TF_=x", true, "the bare prefix is still in the class"},
		{"KUBE_=x", true, "the bare prefix is still in the class"},
		{"TF_VAR_x", true, "no '=': the whole entry is the name"},
		{"TF_LOG=", true, "empty value"},

		// B7: two exact names outside the prefixes.
		{"TERRAFORM_CONFIG=/tmp/evil.tfrc", true, "legacy TF_CLI_CONFIG_FILE: redirects providers and credential helpers"},
		{"GODEBUG=http2debug=2", true, "http2debug prints request headers, i.e. credentials"},
		{"GODEBUG=", true, "empty value"},
		{"GODEBUG", true, "no '=': the whole entry is the name"},
		{"TERRAFORM_CONFIG", true, "no '=': the whole entry is the name"},
		{"TF_CLI_CONFIG_FILE=/tmp/evil.tfrc", true, "the current name, in the TF_ class"},

		// B7 matches whole names, case-sensitively, like J6.
		{"GODEBUGX=1", false, "B7 names are exact, not prefixes"},
		{"TERRAFORM_CONFIG_X=1", false, "B7 names are exact, not prefixes"},
		{"XGODEBUG=1", false, "B7 names are exact"},
		{"godebug=http2debug=2", false, "case-sensitive: the Go runtime reads only GODEBUG"},
		{"Terraform_Config=/x", false, "case-sensitive"},
		{"FOO=GODEBUG=http2debug=2", false, "GODEBUG in the value is not the name"},

		// J6 exceptions, set by the Job itself (J3).
		{"TF_IN_AUTOMATION=1", false, "J3"},
		{"TF_INPUT=0", false, "J3"},
		{"KUBE_NAMESPACE=team-a", false, "J3"},

		// Outside the classes: credentials and cluster plumbing a module needs.
		{"KUBECONFIG=/k", false, "no underscore after KUBE"},
		{"KUBERNETES_SERVICE_HOST=10.0.0.1", false, "no underscore after KUBE"},
		{"AWS_ACCESS_KEY_ID=AKIA", false, "provider credential"},
		{"ARM_CLIENT_SECRET=s", false, "provider credential"},
		{"GOOGLE_APPLICATION_CREDENTIALS=/c.json", false, "provider credential"},
		{"TFX=1", false, "prefix needs the underscore"},
		{"KUBEX=1", false, "prefix needs the underscore"},
		{"TF=1", false, "prefix needs the underscore"},
		{"X_TF_VAR=1", false, "prefix only at the start"},
		{"FOO=TF_VAR_x=1", false, "TF_ in the value is not the name"},
		{"FOO=KUBE_TOKEN", false, "KUBE_ in the value is not the name"},

		// Case: Terraform and the providers read these names case-sensitively
		// on Linux, so lower- or mixed-case spellings are inert and kept.
		{"tf_var_x=1", false, "case-sensitive, see forbiddenPrefixes"},
		{"Tf_log=TRACE", false, "case-sensitive"},
		{"kube_token=abc", false, "case-sensitive"},
		{"tf_in_automation=1", false, "case-sensitive"},

		// Malformed entries pass through unless their name is forbidden.
		{"", false, "empty entry"},
		{"=x", false, "empty name"},
		{"PLAIN", false, "no '='"},
	}
	for _, tt := range tests {
		t.Run(tt.entry, func(t *testing.T) {
			kept, dropped := Filter([]string{tt.entry})
			if tt.drop {
				require.Empty(t, kept, "J6 must drop %q (%s)", tt.entry, tt.why)
				require.Equal(t, []string{Name(tt.entry)}, dropped)
			} else {
				require.Equal(t, []string{tt.entry}, kept, "J6 must keep %q (%s)", tt.entry, tt.why)
				require.Empty(t, dropped)
			}
		})
	}
}

// TestFilterJ6Mixed checks order, duplicates and the dropped list on a
// realistic Job environment.
func TestFilterJ6Mixed(t *testing.T) {
	environ := []string{
		"PATH=/usr/bin",
		"TF_VAR_secret=hunter2",
		"TF_IN_AUTOMATION=1",
		"KUBE_TOKEN=abc",
		"AWS_SECRET_ACCESS_KEY=TF_LOG=x",
		"TF_VAR_secret=again",
		"TF_CLI_ARGS=-x",
		"KUBE_NAMESPACE=ns",
		"HOME=/root",
		"GODEBUG=http2debug=2",
		"TERRAFORM_CONFIG=/tmp/x.tfrc",
	}
	kept, dropped := Filter(environ)
	require.Equal(t, []string{
		"PATH=/usr/bin",
		"TF_IN_AUTOMATION=1",
		"AWS_SECRET_ACCESS_KEY=TF_LOG=x",
		"KUBE_NAMESPACE=ns",
		"HOME=/root",
	}, kept)
	require.Equal(t, []string{"GODEBUG", "KUBE_TOKEN", "TERRAFORM_CONFIG", "TF_CLI_ARGS", "TF_VAR_secret"}, dropped)
}

func TestFilterEmpty(t *testing.T) {
	kept, dropped := Filter(nil)
	require.Empty(t, kept)
	require.Empty(t, dropped)
}

// FuzzFilter checks the J6 invariants on arbitrary environments. The input
// is one string split on NUL, the separator the kernel itself uses.
func FuzzFilter(f *testing.F) {
	f.Add("TF_VAR_x=1\x00PATH=/bin\x00TF_IN_AUTOMATION=1")
	f.Add("KUBE_TOKEN=TF_LOG=x\x00kube_token=y\x00KUBE_=\x00=TF_\x00TF_")
	f.Add("A=B\x00\x00TF_LOG=1\x00TF_LOG=2\x00KUBE_NAMESPACE=n")
	f.Add("GODEBUG=http2debug=2\x00TERRAFORM_CONFIG=/x\x00GODEBUGX=1\x00godebug=1\x00GODEBUG")
	f.Fuzz(func(t *testing.T, s string) {
		environ := strings.Split(s, "\x00")
		kept, dropped := Filter(environ)

		// Every kept entry is allowed; every dropped name is forbidden.
		for _, e := range kept {
			if Forbidden(Name(e)) {
				t.Fatalf("kept forbidden entry %q", e)
			}
		}
		for _, n := range dropped {
			if !Forbidden(n) {
				t.Fatalf("dropped allowed name %q", n)
			}
		}

		// The B7 names are always dropped, whatever else is in environ.
		for _, e := range environ {
			if n := Name(e); (n == "GODEBUG" || n == "TERRAFORM_CONFIG") && !slices.Contains(dropped, n) {
				t.Fatalf("B7 name %q not dropped", n)
			}
		}
		// dropped is sorted and has no duplicates.
		if !slices.IsSorted(dropped) {
			t.Fatalf("dropped not sorted: %q", dropped)
		}
		if len(slices.Compact(slices.Clone(dropped))) != len(dropped) {
			t.Fatalf("dropped has duplicates: %q", dropped)
		}

		// kept is the input minus the forbidden entries, in order; and the
		// names of those entries are exactly dropped.
		var wantKept []string
		wantDropped := map[string]bool{}
		for _, e := range environ {
			if Forbidden(Name(e)) {
				wantDropped[Name(e)] = true
			} else {
				wantKept = append(wantKept, e)
			}
		}
		if !slices.Equal(kept, wantKept) {
			t.Fatalf("kept = %q, want %q", kept, wantKept)
		}
		if len(dropped) != len(wantDropped) {
			t.Fatalf("dropped = %q, want the names %v", dropped, wantDropped)
		}
		for _, n := range dropped {
			if !wantDropped[n] {
				t.Fatalf("dropped %q which is no input name", n)
			}
		}

		// No value reaches dropped: a name never holds '=', so no "NAME=value"
		// text and no value after the first '=' can be in the list.
		for _, n := range dropped {
			if strings.Contains(n, "=") {
				t.Fatalf("dropped entry %q carries a value", n)
			}
		}
	})
}
