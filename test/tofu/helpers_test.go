package tofu

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/captf/captf/test/fakecloud"
)

// buildFakecloud builds the fake cloud and its client, static like in the
// module image, into a directory removed when the test ends.
func buildFakecloud(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, name := range []string{"fakecloud", "fakecloud-client"} {
		cmd := exec.Command("go", "build", "-trimpath", "-o", filepath.Join(dir, name), "./test/fakecloud/cmd/"+name)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "building %s: %s", name, out)
	}
	return dir
}

// cloud is a fake cloud process started for one test.
type cloud struct {
	url string
	// credentialFile is the file the fake cloud reads its expected
	// credential from on every request, and the module's credential_file
	// (as if both mounted the same Secret).
	credentialFile string
}

// startCloud runs the fakecloud binary on 127.0.0.1 expecting token.
func startCloud(t *testing.T, bin, token string) *cloud {
	t.Helper()
	file := filepath.Join(t.TempDir(), "FAKECLOUD_TOKEN")
	require.NoError(t, os.WriteFile(file, []byte(token), 0o600))
	cmd := exec.Command(filepath.Join(bin, "fakecloud"), "--listen", "127.0.0.1:0", "--credential-file", file)
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	lines := bufio.NewScanner(stderr)
	addr := make(chan string, 1)
	go func() {
		for lines.Scan() {
			if a, ok := strings.CutPrefix(lines.Text(), "fakecloud: listening on "); ok {
				addr <- a
			}
		}
	}()
	select {
	case a := <-addr:
		return &cloud{url: "http://" + a, credentialFile: file}
	case <-time.After(30 * time.Second):
		t.Fatal("fakecloud did not say where it listens")
		return nil
	}
}

// rotate replaces the fake cloud's credential the way the kubelet updates a
// mounted Secret: a new file renamed over the old.
func (c *cloud) rotate(t *testing.T, token string) {
	t.Helper()
	tmp := c.credentialFile + ".new"
	require.NoError(t, os.WriteFile(tmp, []byte(token), 0o600))
	require.NoError(t, os.Rename(tmp, c.credentialFile))
}

// seen returns what the fake cloud recorded.
func (c *cloud) seen(t *testing.T) []fakecloud.Request {
	t.Helper()
	resp, err := http.Get(c.url + "/seen")
	require.NoError(t, err)
	defer resp.Body.Close()
	var out struct {
		Requests []fakecloud.Request `json:"requests"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	return out.Requests
}

// resources lists the fake cloud's resources with token.
func (c *cloud) resources(t *testing.T, token string) []fakecloud.Resource {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, c.url+"/resources", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set(fakecloud.SourceHeader, "test")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var out struct {
		Resources []fakecloud.Resource `json:"resources"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	return out.Resources
}

// workdir is a writable copy of the test module, as captf's runner makes one
// (SPEC T2), with the variables written the way T3 delivers them.
type workdir struct {
	dir string
	env []string
}

// newWorkdir copies test/e2e/module and writes vars as
// captf.auto.tfvars.json. env is the whole environment OpenTofu gets.
func newWorkdir(t *testing.T, vars map[string]any, env []string) *workdir {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "module")
	require.NoError(t, os.CopyFS(dir, os.DirFS(filepath.Join(root, "test", "e2e", "module"))))
	b, err := json.MarshalIndent(vars, "", "  ")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "captf.auto.tfvars.json"), b, 0o644))
	return &workdir{dir: dir, env: env}
}

// tofuEnv is a minimal, hermetic environment like a Job's after the
// runner's filter (SPEC J3, J6): no TF_* or KUBE_* beyond the runner's own,
// a HOME of its own, the client in PATH.
func tofuEnv(t *testing.T, clientDir, token string) []string {
	home := t.TempDir()
	env := []string{
		"PATH=" + clientDir + ":/usr/local/bin:/usr/bin:/bin",
		"HOME=" + home,
		"TF_IN_AUTOMATION=1",
		"TF_INPUT=0",
	}
	if token != "" {
		env = append(env, "FAKECLOUD_TOKEN="+token)
	}
	return env
}

// run runs bin/tofu with args in the working copy and returns its combined
// output and exit code.
func (w *workdir) run(t *testing.T, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, tofuBinary, args...)
	cmd.Dir = w.dir
	cmd.Env = w.env
	out, err := cmd.CombinedOutput()
	code := 0
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		require.True(t, ok, "running tofu %s: %v", args[0], err)
		code = ee.ExitCode()
	}
	return string(out), code
}

// mustRun is run that fails the test on a non-zero exit.
func (w *workdir) mustRun(t *testing.T, args ...string) string {
	t.Helper()
	out, code := w.run(t, args...)
	require.Equal(t, 0, code, "tofu %s failed:\n%s", strings.Join(args, " "), out)
	return out
}

// start runs tofu in the background; wait returns its output and exit code.
func (w *workdir) start(t *testing.T, args ...string) (wait func() (string, int)) {
	t.Helper()
	cmd := exec.Command(tofuBinary, args...)
	cmd.Dir = w.dir
	cmd.Env = w.env
	var buf strings.Builder
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(&buf, pr)
		close(done)
	}()
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	return func() (string, int) {
		err := cmd.Wait()
		_ = pw.Close()
		<-done
		if err != nil {
			if ee, ok := err.(*exec.ExitError); ok {
				return buf.String(), ee.ExitCode()
			}
			return buf.String() + "\n" + err.Error(), -1
		}
		return buf.String(), 0
	}
}

// outputs is `tofu output -json`.
type outputs map[string]struct {
	Sensitive bool            `json:"sensitive"`
	Type      json.RawMessage `json:"type"`
	Value     json.RawMessage `json:"value"`
}

func (w *workdir) outputs(t *testing.T) outputs {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, tofuBinary, "output", "-json")
	cmd.Dir = w.dir
	cmd.Env = w.env
	out, err := cmd.Output()
	require.NoError(t, err)
	var o outputs
	require.NoError(t, json.Unmarshal(out, &o), "%s", out)
	return o
}

// requestsTo keeps the recorded requests of method to path.
func requestsTo(reqs []fakecloud.Request, method, path string) []fakecloud.Request {
	var out []fakecloud.Request
	for _, r := range reqs {
		if r.Method == method && r.Path == path {
			out = append(out, r)
		}
	}
	return out
}

// describe is a one-line summary of a request for failure messages.
func describe(reqs []fakecloud.Request) string {
	var b strings.Builder
	for _, r := range reqs {
		fmt.Fprintf(&b, "\n  %s %s -> %d source=%s credential=%s gen=%d", r.Method, r.Path, r.Status, r.Source, r.Credential, r.Generation)
	}
	return b.String()
}
