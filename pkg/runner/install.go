package runner

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// Install copies the running captf binary to dest, executable and read-only
// (SPEC J5): the Job's init container runs `captf runner install <dest>` from
// the manager's image into a volume the module image's container shares, so
// the module image needs nothing of captf's. It returns an exit code.
func Install(args []string, stderr io.Writer) int {
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "captf runner: install: "+format+"\n", a...)
		return ExitRunnerError
	}
	if len(args) != 1 || args[0] == "" {
		return fail("usage: captf runner install <destination path>")
	}
	dest := args[0]
	self, err := os.Executable()
	if err != nil {
		return fail("finding the captf binary: %v", err)
	}
	in, err := os.Open(self)
	if err != nil {
		return fail("opening %s: %v", self, err)
	}
	defer in.Close()
	tmp, err := os.CreateTemp(filepath.Dir(dest), ".captf-*")
	if err != nil {
		return fail("creating a file beside %s: %v", dest, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := io.Copy(tmp, in); err != nil {
		tmp.Close()
		return fail("copying to %s: %v", dest, err)
	}
	if err := tmp.Chmod(0o555); err != nil {
		tmp.Close()
		return fail("making %s executable: %v", dest, err)
	}
	if err := tmp.Close(); err != nil {
		return fail("writing %s: %v", dest, err)
	}
	if err := os.Rename(tmp.Name(), dest); err != nil {
		return fail("installing %s: %v", dest, err)
	}
	fmt.Fprintf(stderr, "captf runner: installed %s\n", dest)
	return 0
}
