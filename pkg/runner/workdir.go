package runner

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// skipped says whether an entry of the module directory stays out of the
// working copy (SPEC T2): Terraform's data directory at the module's root
// (providers and a backend configuration from the image's build, which
// would make `init` use the image's backend instead of the runner's), and
// any local state, `*.tfstate*` (terraform.tfstate, its .backup, the lock
// info, the terraform.tfstate.d workspaces), which could otherwise be taken
// for the object's state.
func skipped(rel string, d fs.DirEntry) bool {
	if rel == ".terraform" && d.IsDir() {
		return true
	}
	m, _ := filepath.Match("*.tfstate*", d.Name())
	return m
}

// prepareWorkdir checks that workdir can hold a copy of module: both
// resolved (so a symlinked path cannot hide nesting), neither inside the
// other, and workdir an existing, empty directory. It returns both resolved.
func prepareWorkdir(module, workdir string) (string, string, error) {
	mod, err := filepath.EvalSymlinks(module)
	if err != nil {
		return "", "", fmt.Errorf("module directory: %v", err)
	}
	abs, err := filepath.Abs(workdir)
	if err != nil {
		return "", "", fmt.Errorf("working directory: %v", err)
	}
	wd, err := filepath.EvalSymlinks(abs)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", "", fmt.Errorf("working directory %q does not exist; --workdir must name an existing empty directory", abs)
	case err != nil:
		return "", "", fmt.Errorf("working directory: %v", err)
	}
	if within(wd, mod) || within(mod, wd) {
		return "", "", fmt.Errorf("working directory %q and module directory %q overlap; --workdir must be outside the module directory and not contain it", wd, mod)
	}
	entries, err := os.ReadDir(wd)
	if err != nil {
		return "", "", fmt.Errorf("working directory: %v", err)
	}
	if len(entries) > 0 {
		return "", "", fmt.Errorf("working directory %q is not empty (it holds %q); --workdir must name an empty directory, so that no earlier run's files or state are used", wd, entries[0].Name())
	}
	return mod, wd, nil
}

// within reports whether path is dir or inside it. Both are clean and
// absolute.
func within(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

// copyModule copies the module directory src into the empty directory dst
// (both resolved, see prepareWorkdir) for SPEC T2: regular files with their
// permission bits, directories with theirs (applied once their content is
// written, so a read-only directory can still be filled), symlinks as
// symlinks. It follows no symlink: a symlink is copied only if its target
// is relative and, resolved in the module directory, stays inside it; any
// other (absolute, leaving the tree, dangling, or in a loop) is refused, as
// are devices, pipes and sockets. The module directory is only read.
func copyModule(src, dst string) error {
	type dirMode struct {
		path string
		mode fs.FileMode
	}
	var dirs []dirMode
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		if rel == "." {
			return nil // dst exists; its own mode is the volume's
		}
		if skipped(rel, d) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		target := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch mode := info.Mode(); {
		case mode.IsDir():
			if err := os.Mkdir(target, 0o700); err != nil {
				return err
			}
			dirs = append(dirs, dirMode{target, mode.Perm()})
			return nil
		case mode.IsRegular():
			return copyFile(path, target, mode.Perm())
		case mode&fs.ModeSymlink != 0:
			link, err := os.Readlink(path)
			if err != nil {
				return err
			}
			if err := insideLink(src, path, link); err != nil {
				return fmt.Errorf("symlink %q: %v", rel, err)
			}
			return os.Symlink(link, target)
		default:
			return fmt.Errorf("%q is not a regular file, directory or symlink (%v); the working copy holds only those", rel, mode.Type())
		}
	})
	if err != nil {
		return err
	}
	// Deepest first, so that a read-only parent is set after its children.
	for i := len(dirs) - 1; i >= 0; i-- {
		if err := os.Chmod(dirs[i].path, dirs[i].mode); err != nil {
			return err
		}
	}
	return nil
}

// insideLink checks that a symlink at path in the module root, with target
// link, resolves inside root.
func insideLink(root, path, link string) error {
	if filepath.IsAbs(link) {
		return fmt.Errorf("points to %q, an absolute path; only relative symlinks that stay inside the module directory are copied", link)
	}
	resolved, err := filepath.EvalSymlinks(path)
	if err != nil {
		return fmt.Errorf("points to %q, which does not resolve (%v); only symlinks to something inside the module directory are copied", link, err)
	}
	if !within(resolved, root) {
		return fmt.Errorf("points to %q, outside the module directory; only symlinks that stay inside it are copied", link)
	}
	return nil
}

func copyFile(src, dst string, perm fs.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	// Chmod, not the create mode: the umask must not narrow the module's
	// permission bits.
	if err := out.Chmod(perm); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// writeFile writes a file the runner generates into the working copy,
// replacing one of the same name copied from the module (which may be
// read-only).
func writeFile(path string, data []byte) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}
