package runner

import (
	"bytes"
	"compress/gzip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/captf/captf/pkg/runresult"
)

// backupState is a state a backup holds, with a value only the state
// has: it must reach the file Terraform pushes, never a log or the
// document (X1).
const backupState = `{"version":4,"serial":3,"lineage":"l-1","outputs":{"token":{"value":"state-only-value-77","type":"string","sensitive":true}},"resources":[]}`

// writeChunks writes data gzip-compressed to dir as the chunk files 0, 1,
// ... of at most size bytes each, as the Job's volume lays out a backup.
func writeChunks(t *testing.T, dir string, data string, size int) {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	_, err := zw.Write([]byte(data))
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	z := b.Bytes()
	for i := 0; len(z) > 0; i++ {
		n := min(size, len(z))
		require.NoError(t, os.WriteFile(filepath.Join(dir, strconv.Itoa(i)), z[:n], 0o600))
		z = z[n:]
	}
}

// TestRestoreO5: `captf runner restore` runs init with the backend, then
// `state push -force` of the backup's state, decompressed from its
// chunks in order, then `state list`; the document records the operation
// and its steps, and the state's values reach neither the output nor the
// document.
func TestRestoreO5(t *testing.T) {
	for _, size := range []int{1 << 20, 40} { // one chunk; a split state (at most 16 parts)
		t.Run("chunk size "+strconv.Itoa(size), func(t *testing.T) {
			t.Parallel()
			f, args, doc := resultFixture(t)
			chunks := t.TempDir()
			writeChunks(t, chunks, backupState, size)
			work := strings.TrimPrefix(args[1], "--workdir=")
			args = append(args, "--restore-chunks="+chunks, "--state-namespace=team-a", "--state-suffix=web-cluster")
			code, stdout, stderr := f.run(append([]string{"restore"}, args...)...)
			require.Equal(t, 0, code, stderr)
			require.Equal(t, "captf runner: init succeeded, state-push succeeded, state-list succeeded", lastLine(stderr))
			require.Equal(t, []string{"version", "init", "state", "state"}, f.lines("steps"), "never a plan or an apply")
			require.Contains(t, f.lines("init.args"), "-backend-config=secret_suffix=web-cluster")
			require.Equal(t, []string{"state push -force -lock-timeout=300s " + RestoreStateFile, "state list"}, strings.Split(strings.TrimSpace(f.read("state.calls")), "\n"))
			pushed, err := os.ReadFile(filepath.Join(work, RestoreStateFile))
			require.NoError(t, err)
			require.Equal(t, backupState, string(pushed))

			r := readResult(t, doc)
			require.Equal(t, runresult.OperationRestore, r.Operation)
			require.Nil(t, r.Error)
			var names []string
			for _, s := range r.Steps {
				names = append(names, s.Name)
			}
			require.Equal(t, []string{"init", "state-push", "state-list"}, names)
			docText, err := os.ReadFile(doc)
			require.NoError(t, err)
			for _, s := range []string{stdout, stderr, string(docText)} {
				require.NotContains(t, s, "state-only-value-77")
			}
		})
	}
}

// TestRestoreFailsO5: a failed push skips the check and fails the run
// with the step's kind; a backup that is missing or not a compressed
// state is the runner's failure before any Terraform step but version.
func TestRestoreFailsO5(t *testing.T) {
	t.Run("push fails", func(t *testing.T) {
		t.Parallel()
		f, args, doc := resultFixture(t)
		chunks := t.TempDir()
		writeChunks(t, chunks, backupState, 1<<20)
		f.environ = append(f.environ, "FAKE_state_EXIT=1")
		code, _, stderr := f.run(append([]string{"restore", "--restore-chunks=" + chunks}, args...)...)
		require.Equal(t, 1, code, stderr)
		require.Equal(t, "captf runner: init succeeded, state-push failed with exit code 1, state-list not run", lastLine(stderr))
		r := readResult(t, doc)
		require.Equal(t, runresult.KindStep, r.Error.Kind)
		require.Equal(t, runresult.StepStatePush, r.Error.Step)
	})
	for name, write := range map[string]func(dir string){
		"no chunk": func(string) {},
		"not gzip": func(dir string) {
			require.NoError(t, os.WriteFile(filepath.Join(dir, "0"), []byte(backupState), 0o600))
		},
		"not a state": func(dir string) { writeChunks(t, dir, "state-only-value-77 is no JSON", 1<<20) },
		"chunk 1 only": func(dir string) {
			writeChunks(t, dir, backupState, 1<<20)
			require.NoError(t, os.Rename(filepath.Join(dir, "0"), filepath.Join(dir, "1")))
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f, args, doc := resultFixture(t)
			chunks := t.TempDir()
			write(chunks)
			code, _, stderr := f.run(append([]string{"restore", "--restore-chunks=" + chunks}, args...)...)
			require.Equal(t, ExitRunnerError, code, stderr)
			require.NotContains(t, stderr, "state-only-value-77")
			require.NotContains(t, f.lines("steps"), "init", "nothing runs on a bad backup")
			r := readResult(t, doc)
			require.Equal(t, runresult.KindRunner, r.Error.Kind)
		})
	}
}

// TestRestoreChunksFlagO5: restore needs --restore-chunks, and no other
// operation takes it.
func TestRestoreChunksFlagO5(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"restore"}, "restore: --restore-chunks is required"},
		{[]string{"apply", "--restore-chunks=/x"}, "apply: --restore-chunks is for restore only"},
	} {
		var stdout, stderr bytes.Buffer
		code := Main(t.Context(), tt.args, nil, &stdout, &stderr)
		require.Equal(t, ExitRunnerError, code)
		require.Contains(t, stderr.String(), tt.want)
	}
}
