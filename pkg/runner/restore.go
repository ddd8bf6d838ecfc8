package runner

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"

	"github.com/captf/captf/pkg/runresult"
	"github.com/captf/captf/pkg/tfstate"
)

// SPEC O5 (upstream A3-44, A3-56): `captf runner restore` pushes a state
// backup back into the backend. The manager mounts the backup's Secrets
// (one per part of a state HashiCorp Terraform split) as the files 0, 1,
// ... of --restore-chunks, so the backup's content never enters the Job's
// spec, and the runner reads it from the pod's own volume: no API access
// beyond what the kubernetes backend already has. The runner joins the
// chunks, decompresses them (the backend stores the state gzip-compressed)
// into RestoreStateFile in the working copy, then runs init with the
// backend as for an apply, `state push -force` of that file (force: the
// backup's serial is lower than the state's, and its lineage may differ),
// and `state list`, which reads the pushed state back through the backend
// as a check. Nothing is planned or applied. The state's content never
// reaches the output or the result document: Terraform prints no state on
// a push, and `state list` prints resource addresses only.

// RestoreStateFile is the decompressed backup `state push` reads, in the
// working copy.
const RestoreStateFile = ".captf-restore.tfstate"

// restoreSteps are a restore's steps after init.
func (c config) restoreSteps(init step) []step {
	return []step{
		init,
		{name: runresult.StepStatePush, args: []string{"state", "push", "-force", c.lockTimeoutArg(), RestoreStateFile}},
		{name: runresult.StepStateList, args: []string{"state", "list"}},
	}
}

// writeRestoreState joins the chunk files 0, 1, ... of dir (until the
// first missing one; at least 0), decompresses them, checks that they are
// a JSON object, and writes it to RestoreStateFile in workdir, readable by
// the runner's user only. A backup that is missing, not gzip, over
// tfstate.MaxStateBytes or not JSON is the runner's failure, before any
// step runs: nothing is pushed.
func writeRestoreState(dir, workdir string, stderr io.Writer) error {
	var compressed bytes.Buffer
	n := 0
	for ; n < tfstate.MaxParts; n++ {
		b, err := os.ReadFile(filepath.Join(dir, strconv.Itoa(n)))
		if errors.Is(err, fs.ErrNotExist) {
			break
		}
		if err != nil {
			return otherErr("reading the backup's chunk %d: %v", n, err)
		}
		compressed.Write(b)
	}
	if n == 0 {
		return otherErr("the backup to restore has no chunk: no file 0 in %s", dir)
	}
	zr, err := gzip.NewReader(&compressed)
	if err != nil {
		return otherErr("the backup to restore is not a gzip-compressed state: %v", err)
	}
	state, err := io.ReadAll(io.LimitReader(zr, tfstate.MaxStateBytes+1))
	if err != nil {
		return otherErr("the backup to restore is not a valid gzip stream: %v", err)
	}
	if len(state) > tfstate.MaxStateBytes {
		return otherErr("the backup to restore is over %d bytes decompressed", tfstate.MaxStateBytes)
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(state, &obj); err != nil {
		return otherErr("the backup to restore is not a JSON state (%d bytes decompressed)", len(state))
	}
	path := filepath.Join(workdir, RestoreStateFile)
	if err := os.WriteFile(path, state, 0o600); err != nil {
		return otherErr("writing %s: %v", RestoreStateFile, err)
	}
	fmt.Fprintf(stderr, "captf runner: the backup to restore (%d chunk(s), %d bytes decompressed) is in %s (SPEC O5)\n", n, len(state), path)
	return nil
}
