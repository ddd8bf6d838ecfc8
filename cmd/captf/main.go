// Command captf is the captf manager, the in-Job runner, and a version
// printer in one binary (SPEC section 12):
//
//	captf manager [flags]            controllers (leader-elected) and the admission webhook
//	captf runner apply|destroy [...]  runs Terraform inside a Job (SPEC J6)
//	captf version                     prints version, commit and Go version
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/klog/v2"

	"github.com/captf/captf/pkg/manager"
	"github.com/captf/captf/pkg/runner"
	"github.com/captf/captf/pkg/version"
)

const usage = `usage: captf <command> [flags]

commands:
  manager                 run the controllers and the admission webhook
  runner apply|destroy    run Terraform inside a Job (used by the Jobs captf creates)
  runner install DEST     copy this binary to DEST (the Jobs' init container)
  version                 print the version

Run 'captf manager -h' for the manager's flags.
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "manager":
		return runManager(args[1:], stderr)
	case "runner":
		if len(args) > 1 && args[1] == "install" {
			// The Job's init container copies this binary (SPEC J5).
			return runner.Install(args[2:], stderr)
		}
		// The runner handles its own signals: it forwards them to Terraform.
		return runner.Main(context.Background(), args[1:], os.Environ(), stdout, stderr)
	case "version", "--version", "-version":
		fmt.Fprintln(stdout, version.Info())
		return 0
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "captf: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
}

func runManager(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("captf manager", flag.ContinueOnError)
	fs.SetOutput(stderr)
	opts := manager.NewOptions()
	opts.AddFlags(fs)
	klog.InitFlags(fs)
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "captf manager: unexpected arguments %q\n", fs.Args())
		return 2
	}
	defer klog.Flush()

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	logger := klog.Background()
	ctx = klog.NewContext(ctx, logger)
	if err := manager.Run(ctx, opts); err != nil {
		logger.Error(err, "captf manager failed")
		return 1
	}
	logger.Info("captf manager stopped")
	return 0
}
