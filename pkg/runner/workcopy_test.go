package runner

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// snapshot describes a directory tree: per relative path its type and
// permission bits, and a file's content hash or a symlink's target.
func snapshot(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	require.NoError(t, filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		info, err := d.Info()
		if err != nil {
			return err
		}
		desc := info.Mode().String()
		switch {
		case info.Mode()&fs.ModeSymlink != 0:
			link, err := os.Readlink(path)
			if err != nil {
				return err
			}
			desc += " -> " + link
		case info.Mode().IsRegular():
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(b)
			desc += " " + hex.EncodeToString(sum[:8])
		}
		out[rel] = desc
		return nil
	}))
	return out
}

func writeTree(t *testing.T, root string, files map[string]string, modes map[string]fs.FileMode) {
	t.Helper()
	for rel, content := range files {
		p := filepath.Join(root, rel)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	}
	for rel, mode := range modes {
		require.NoError(t, os.Chmod(filepath.Join(root, rel), mode))
	}
}

// chmodWritable lets t.TempDir's cleanup remove read-only directories.
func chmodWritable(t *testing.T, root string) {
	t.Cleanup(func() {
		_ = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				_ = os.Chmod(path, 0o755)
			}
			return nil
		})
	})
}

// T2: with --workdir the module directory is copied (modes kept, symlinks
// inside it kept as symlinks, .terraform and any *.tfstate* left out),
// Terraform runs in the copy, and the module directory is not changed.
func TestWorkingCopyT2(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "FAKE_TOUCH=1")
	writeTree(t, f.module, map[string]string{
		"main.tf":                                  "# main\n",
		"run.sh":                                   "#!/bin/sh\n",
		"readonly.txt":                             "ro\n",
		".terraform.lock.hcl":                      "# lock\n",
		"modules/net/main.tf":                      "# net\n",
		"modules/net/.terraform/keep":              "only the root's .terraform is Terraform's\n",
		"sealed/data.json":                         "{}\n",
		".terraform/providers/p":                   "from the image's build\n",
		".terraform/terraform.tfstate":             "backend config of the image\n",
		"terraform.tfstate":                        "local state\n",
		"terraform.tfstate.backup":                 "local state\n",
		".terraform.tfstate.lock.info":             "lock\n",
		"terraform.tfstate.d/ws/terraform.tfstate": "workspace state\n",
		"modules/net/old.tfstate":                  "stray state\n",
	}, map[string]fs.FileMode{
		"run.sh":       0o755,
		"readonly.txt": 0o444,
		"modules/net":  0o750,
		"sealed":       0o555,
	})
	require.NoError(t, os.Symlink("main.tf", filepath.Join(f.module, "link.tf")))
	require.NoError(t, os.Symlink("../sealed", filepath.Join(f.module, "modules", "sealed-link")))
	chmodWritable(t, f.module)
	before := snapshot(t, f.module)

	work := t.TempDir()
	chmodWritable(t, work)
	code, _, stderr := f.run("apply", "--chdir="+f.module, "--workdir="+work)
	require.Equal(t, 0, code, stderr)

	require.Equal(t, before, snapshot(t, f.module), "the module directory changed")
	for _, step := range []string{"init", "apply"} {
		require.Equal(t, physical(t, work), strings.TrimSpace(f.read(step+".pwd")))
		require.Contains(t, f.read(step+".env"), "\nPWD="+physical(t, work)+"\n")
	}

	got := snapshot(t, work)
	want := map[string]string{}
	for rel, desc := range before {
		if rel == "." || rel == ".terraform" || strings.HasPrefix(rel, ".terraform/") ||
			strings.Contains(filepath.Base(rel), ".tfstate") || strings.HasPrefix(rel, "terraform.tfstate.d/") {
			continue
		}
		want[rel] = desc
	}
	delete(got, ".")
	delete(got, "fake-init.touched")
	delete(got, "fake-apply.touched")
	require.Equal(t, want, got)
	// The listing above would pass if the snapshot missed these: say them.
	require.Contains(t, got, "modules/net/.terraform/keep")
	require.Equal(t, "-r--r--r--", strings.Fields(got["readonly.txt"])[0])
	require.Equal(t, "-rwxr-xr-x", strings.Fields(got["run.sh"])[0])
	require.Equal(t, "dr-xr-xr-x", got["sealed"])
	require.Equal(t, "Lrwxrwxrwx -> main.tf", got["link.tf"])
	require.Contains(t, stderr, "captf runner: copied the module directory "+physical(t, f.module)+" to the working directory "+physical(t, work)+"\n")
}

// T2: a symlink that leaves the module directory is not followed and not
// copied: the runner refuses it before Terraform runs.
func TestWorkingCopyRefusesOutsideSymlinksT2(t *testing.T) {
	for name, target := range map[string]string{
		"absolute": "/etc/passwd",
		"escaping": "../../outside",
		"dangling": "missing.tf",
		"via-dir":  "sub/../../x",
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			writeTree(t, f.module, map[string]string{"main.tf": "", "sub/a.tf": ""}, nil)
			require.NoError(t, os.Symlink(target, filepath.Join(f.module, "sub", "link")))
			code, _, stderr := f.run("apply", "--chdir="+f.module, "--workdir="+t.TempDir())
			require.Equal(t, ExitRunnerError, code, stderr)
			require.Contains(t, stderr, `symlink "sub/link": points to "`+target+`"`)
			require.NoFileExists(t, filepath.Join(f.rec, "steps"))
		})
	}
}

func TestWorkdirErrorsT2(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	writeTree(t, f.module, map[string]string{"main.tf": "", "inner/x": ""}, nil)
	outer := t.TempDir()
	nested := filepath.Join(outer, "module")
	require.NoError(t, os.Mkdir(nested, 0o755))
	writeTree(t, nested, map[string]string{"main.tf": ""}, nil)
	full := t.TempDir()
	writeTree(t, full, map[string]string{"terraform.tfstate": "old"}, nil)

	for _, tt := range []struct {
		name, chdir, workdir, want string
	}{
		{"inside the module", f.module, filepath.Join(f.module, "inner"), "overlap"},
		{"the module itself", f.module, f.module, "overlap"},
		{"contains the module", nested, outer, "overlap"},
		{"missing", f.module, filepath.Join(outer, "nope"), "does not exist; --workdir must name an existing empty directory"},
		{"not empty", f.module, full, `is not empty (it holds "terraform.tfstate")`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := f.run("apply", "--chdir="+tt.chdir, "--workdir="+tt.workdir)
			require.Equal(t, ExitRunnerError, code, stderr)
			require.Empty(t, stdout)
			require.Contains(t, lastLine(stderr), tt.want)
			require.True(t, strings.HasPrefix(lastLine(stderr), "captf runner: "))
		})
	}
	require.NoFileExists(t, filepath.Join(f.rec, "steps"))
}

// T2, T8: the state flags write the backend override into the working copy
// and configure the kubernetes backend on init's command line (in-cluster,
// or a kubeconfig out of cluster); -lock-timeout reaches init and the
// command.
func TestStateFlagsT2(t *testing.T) {
	for _, tt := range []struct {
		name    string
		command string
		extra   []string
		init    []string
		lock    string
	}{
		{"in cluster", "apply", nil,
			[]string{"-backend-config=in_cluster_config=true"}, "-lock-timeout=300s"},
		{"destroy with lock wait", "destroy", []string{"--lock-timeout=45s"},
			[]string{"-backend-config=in_cluster_config=true"}, "-lock-timeout=45s"},
		{"no lock wait", "apply", []string{"--lock-timeout=0"},
			[]string{"-backend-config=in_cluster_config=true"}, "-lock-timeout=0s"},
		{"kubeconfig", "apply", []string{"--state-kubeconfig=/etc/kube/config"},
			[]string{"-backend-config=config_path=/etc/kube/config", "-backend-config=in_cluster_config=false"}, "-lock-timeout=300s"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			writeTree(t, f.module, map[string]string{"main.tf": `terraform { backend "s3" {} }`}, nil)
			work := t.TempDir()
			args := append([]string{tt.command, "--chdir=" + f.module, "--workdir=" + work,
				"--state-namespace=team-a", "--state-suffix=demo-cluster"}, tt.extra...)
			code, _, stderr := f.run(args...)
			require.Equal(t, 0, code, stderr)

			wantInit := append([]string{"init", "-input=false", "-no-color", tt.lock, "-reconfigure",
				"-backend-config=secret_suffix=demo-cluster", "-backend-config=namespace=team-a"}, tt.init...)
			require.Equal(t, wantInit, strings.Split(strings.TrimSuffix(f.read("init.args"), "\n"), "\n"))
			require.Equal(t, []string{tt.command, "-auto-approve", "-input=false", "-no-color", tt.lock},
				strings.Split(strings.TrimSuffix(f.read(tt.command+".args"), "\n"), "\n"))

			b, err := os.ReadFile(filepath.Join(work, BackendOverrideFile))
			require.NoError(t, err)
			require.Contains(t, string(b), "terraform {\n  backend \"kubernetes\" {}\n}\n")
			require.NoFileExists(t, filepath.Join(f.module, BackendOverrideFile))
			require.Contains(t, stderr, "captf runner: state in the kubernetes backend (SPEC T2): Secret tfstate-default-demo-cluster in namespace team-a\n")
			// Never through KUBE_* (J6 drops them anyway).
			for _, e := range strings.Split(f.read("init.env"), "\n") {
				if strings.HasPrefix(e, "KUBE_") {
					require.Equal(t, "KUBE_NAMESPACE=team-a", e)
				}
			}
		})
	}
}

// T8: OpenTofu gets the same commands and flags.
func TestOpenTofuT8(t *testing.T) {
	t.Parallel()
	f := newFixture(t, VariablesEnv+`={"a":1}`)
	work := t.TempDir()
	code, _, stderr := f.run("destroy", "--terraform=tofu", "--chdir="+f.module, "--workdir="+work,
		"--state-namespace=team-a", "--state-suffix=demo-machine", "--lock-timeout=10s")
	require.Equal(t, 0, code, stderr)
	require.Equal(t, "init\n-input=false\n-no-color\n-lock-timeout=10s\n-reconfigure\n-backend-config=secret_suffix=demo-machine\n"+
		"-backend-config=namespace=team-a\n-backend-config=in_cluster_config=true\n", f.read("init.args"))
	require.Equal(t, "destroy\n-auto-approve\n-input=false\n-no-color\n-lock-timeout=10s\n", f.read("destroy.args"))
	require.Contains(t, stderr, "captf runner: running tofu init -input=false")
	require.FileExists(t, filepath.Join(work, VariablesFile))
	require.FileExists(t, filepath.Join(work, BackendOverrideFile))
}

// T2: without the state flags there is no override and no backend
// configuration: local state where Terraform runs.
func TestNoStateFlagsNoOverrideT2(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	work := t.TempDir()
	code, _, stderr := f.run("apply", "--chdir="+f.module, "--workdir="+work)
	require.Equal(t, 0, code, stderr)
	require.NoFileExists(t, filepath.Join(work, BackendOverrideFile))
	require.Equal(t, "init\n-input=false\n-no-color\n-lock-timeout=300s\n", f.read("init.args"))
}

// T3: CAPTF_VARIABLES becomes captf.auto.tfvars.json in the working copy
// and is gone from Terraform's environment; the log names the keys only.
func TestVariablesT3(t *testing.T) {
	t.Parallel()
	const value = `{"region": "eu-west-1", "size": 3, "tags": {"team": "a"}, "name": "demo-value-xyz"}`
	f := newFixture(t, VariablesEnv+"="+value)
	work := t.TempDir()
	code, stdout, stderr := f.run("destroy", "--chdir="+f.module, "--workdir="+work)
	require.Equal(t, 0, code, stderr)

	b, err := os.ReadFile(filepath.Join(work, VariablesFile))
	require.NoError(t, err)
	require.JSONEq(t, value, string(b))
	require.NoFileExists(t, filepath.Join(f.module, VariablesFile))
	require.Contains(t, stderr, "captf runner: wrote 4 input variables from CAPTF_VARIABLES to captf.auto.tfvars.json (SPEC T3): name region size tags\n")
	require.NotContains(t, stdout+stderr, "eu-west-1")
	require.NotContains(t, stdout+stderr, "demo-value-xyz")
	for _, step := range []string{"init", "destroy"} {
		require.NotContains(t, f.read(step+".env"), VariablesEnv)
	}
}

// T3: a variables file from the image is replaced, even a read-only one.
func TestVariablesReplaceImageFileT3(t *testing.T) {
	t.Parallel()
	f := newFixture(t, VariablesEnv+`={"a":1}`)
	writeTree(t, f.module, map[string]string{VariablesFile: `{"a":0,"b":2}`}, map[string]fs.FileMode{VariablesFile: 0o444})
	work := t.TempDir()
	code, _, stderr := f.run("apply", "--chdir="+f.module, "--workdir="+work)
	require.Equal(t, 0, code, stderr)
	b, err := os.ReadFile(filepath.Join(work, VariablesFile))
	require.NoError(t, err)
	require.JSONEq(t, `{"a":1}`, string(b))
}

func TestVariablesErrorsT3(t *testing.T) {
	t.Parallel()
	const marker = "zz-value-marker"
	for _, tt := range []struct {
		name, value, want string
		noWorkdir         bool
	}{
		{"no workdir", `{"a":"` + marker + `"}`, "CAPTF_VARIABLES is set but --workdir is not", true},
		{"not JSON", `{"a": "` + marker + `"`, "CAPTF_VARIABLES is not valid JSON (syntax error at byte", false},
		{"garbage", marker, "CAPTF_VARIABLES is not valid JSON", false},
		{"array", `["` + marker + `"]`, "CAPTF_VARIABLES is a JSON array; it must be a JSON object", false},
		{"string", `"` + marker + `"`, "CAPTF_VARIABLES is a JSON string", false},
		{"number", `42`, "CAPTF_VARIABLES is a JSON number", false},
		{"null", `null`, "CAPTF_VARIABLES is JSON null", false},
		{"empty", ``, "CAPTF_VARIABLES is empty", false},
		{"trailing data", `{"a":1} {"b":"` + marker + `"}`, "CAPTF_VARIABLES is not valid JSON", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, VariablesEnv+"="+tt.value)
			args := []string{"apply", "--chdir=" + f.module}
			work := t.TempDir()
			if !tt.noWorkdir {
				args = append(args, "--workdir="+work)
			}
			code, stdout, stderr := f.run(args...)
			require.Equal(t, ExitRunnerError, code, stderr)
			require.Contains(t, stderr, tt.want)
			require.NotContains(t, stdout+stderr, marker)
			require.NotContains(t, stdout+stderr, "42")
			require.NoFileExists(t, filepath.Join(f.rec, "steps"))
			require.NoFileExists(t, filepath.Join(work, VariablesFile))
			require.NoFileExists(t, filepath.Join(f.module, VariablesFile))
		})
	}
}

// T6: --home gives Terraform a HOME of its own, created if missing; without
// it Terraform inherits the runner's.
func TestHome(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "HOME=/nonexistent-home")
	home := filepath.Join(t.TempDir(), "a", "home")
	code, _, stderr := f.run("apply", "--chdir="+f.module, "--home="+home)
	require.Equal(t, 0, code, stderr)
	require.DirExists(t, home)
	for _, step := range []string{"init", "apply"} {
		env := strings.Split(f.read(step+".env"), "\n")
		require.Contains(t, env, "HOME="+home)
		require.NotContains(t, env, "HOME=/nonexistent-home")
	}

	g := newFixture(t, "HOME=/runner-home")
	code, _, stderr = g.run("apply", "--chdir="+g.module)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, strings.Split(g.read("apply.env"), "\n"), "HOME=/runner-home")
}

// parseVariables writes one value per key, keys sorted.
func TestParseVariables(t *testing.T) {
	b, names, err := parseVariables(` {"b": [1, 2], "a": {"x": null}, "c": "<&>"} `)
	require.NoError(t, err)
	require.Equal(t, []string{"a", "b", "c"}, names)
	var got map[string]any
	require.NoError(t, json.Unmarshal(b, &got))
	require.Equal(t, map[string]any{"a": map[string]any{"x": nil}, "b": []any{1.0, 2.0}, "c": "<&>"}, got)
	require.True(t, strings.HasSuffix(string(b), "}\n"), fmt.Sprintf("%q", b))
}

// K6: the contract inputs reach Terraform as their own variables file in
// the working copy; the log names them, never a value (K5: bootstrap_data
// is sensitive, X1).
func TestInputsK6(t *testing.T) {
	t.Parallel()
	const secret = "I2Nsb3VkLWNvbmZpZwpzZWNyZXQtYm9vdHN0cmFw"
	f := newFixture(t, VariablesEnv+`={"size":3}`)
	inputs := filepath.Join(t.TempDir(), "inputs.json")
	require.NoError(t, os.WriteFile(inputs, []byte(`{"machine_name":"m1","bootstrap_data":"`+secret+`","captf_object":{"kind":"TerraformMachine"}}`), 0o400))
	work := t.TempDir()
	code, stdout, stderr := f.run("apply", "--chdir="+f.module, "--workdir="+work, "--inputs="+inputs)
	require.Equal(t, 0, code, stderr)
	b, err := os.ReadFile(filepath.Join(work, InputsFile))
	require.NoError(t, err)
	require.JSONEq(t, `{"machine_name":"m1","bootstrap_data":"`+secret+`","captf_object":{"kind":"TerraformMachine"}}`, string(b))
	b, err = os.ReadFile(filepath.Join(work, VariablesFile))
	require.NoError(t, err)
	require.JSONEq(t, `{"size":3}`, string(b), "spec.variables keep their own file")
	require.NoFileExists(t, filepath.Join(f.module, InputsFile))
	require.Contains(t, stderr, "captf runner: wrote 3 contract inputs to captf-contract.auto.tfvars.json (SPEC K6; a module declares those it uses): bootstrap_data captf_object machine_name\n")
	require.NotContains(t, stdout+stderr, secret)
}

func TestInputsErrorsK6(t *testing.T) {
	t.Parallel()
	const marker = "zz-inputs-marker"
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(content), 0o400))
		return p
	}
	big := write("big", `{"a":"`+strings.Repeat("x", MaxInputsBytes)+`"}`)
	for _, tt := range []struct {
		name, path, want string
		noWorkdir        bool
	}{
		{"no workdir", write("ok", `{"a":1}`), "--inputs is set but --workdir is not", true},
		{"missing", filepath.Join(dir, "nope"), "--inputs: open", false},
		{"not JSON", write("bad", `{"a":"`+marker), "is not a JSON object of inputs", false},
		{"array", write("arr", `["`+marker+`"]`), "is not a JSON object of inputs", false},
		{"null", write("null", `null`), "is not a JSON object of inputs", false},
		{"too large", big, "is more than 1048576 bytes", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			args := []string{"apply", "--chdir=" + f.module, "--inputs=" + tt.path}
			if !tt.noWorkdir {
				args = append(args, "--workdir="+t.TempDir())
			}
			code, stdout, stderr := f.run(args...)
			require.Equal(t, ExitRunnerError, code)
			require.Contains(t, lastLine(stderr), tt.want)
			require.NotContains(t, stdout+stderr, marker)
			require.Empty(t, f.read("init.args"), "nothing ran")
		})
	}
}

// O9, K5, X1: the values of the inputs marked sensitive (the variables a
// Secret gave) and the bootstrap data, decoded too, never reach the pod's
// log through Terraform's output, even when the module does not declare
// them sensitive; other values do; the mark is no variable of the module's.
func TestSensitiveInputsKeptOutOfTheLogO9(t *testing.T) {
	t.Parallel()
	const password, bootLine = "hunter2-s3cret", "secret-bootstrap-line"
	boot := base64.StdEncoding.EncodeToString([]byte("#cloud-config\n" + bootLine + "\n"))
	f := newFixture(t)
	inputs := filepath.Join(t.TempDir(), "inputs.json")
	require.NoError(t, os.WriteFile(inputs, []byte(`{"db_password":"`+password+`","region":"eu-west-1","bootstrap_data":"`+boot+`",`+
		`"captf_sensitive_inputs":["db_password"]}`), 0o400))
	f.write("apply.out", "  + password = \""+password+"\"\n  + region   = \"eu-west-1\"\n  + user_data = <<EOT\n"+bootLine+"\nEOT\nlast "+password)
	f.write("apply.err", "Error: bad value \""+password+"\" for "+boot+"\n")
	work := t.TempDir()

	code, stdout, stderr := f.run("apply", "--chdir="+f.module, "--workdir="+work, "--inputs="+inputs)

	require.Equal(t, 0, code, stderr)
	for _, s := range []string{password, bootLine, boot} {
		require.NotContains(t, stdout+stderr, s)
	}
	require.Contains(t, stdout, `+ password = "(sensitive)"`)
	require.Contains(t, stdout, `"eu-west-1"`, "a value no Secret gave stays")
	require.Contains(t, stdout, "last (sensitive)", "the last line, without its end, too")
	require.Contains(t, stderr, `bad value "(sensitive)" for (sensitive)`)
	b, err := os.ReadFile(filepath.Join(work, InputsFile))
	require.NoError(t, err)
	require.NotContains(t, string(b), "captf_sensitive_inputs")
	require.Contains(t, string(b), password, "the module still gets the value")
}
