// Command drand-interop exercises an sbft-beacon chain (or any drand v1 HTTP
// API) with drand's own Go code: the go-clients HTTP client with signature
// verification, and the tlock timelock encryption library.
//
//	drand-interop client-verify --url URL [--chain-hash HEX] --rounds N
//	drand-interop tle-encrypt --chain-info FILE --round R [--in FILE] [--out FILE] [--armor]
//	drand-interop tle-decrypt --url URL [--in FILE] [--out FILE]
//	drand-interop vectors
//
// Every subcommand exits 0 on success, 1 on failure (with one line on stderr
// saying why) and 2 on a usage error.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"

	dlog "github.com/drand/drand/v2/common/log"
	"go.uber.org/zap/zapcore"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

const usage = `usage:
  drand-interop client-verify --url URL [--chain-hash HEX] --rounds N [--wait DUR] [--timeout DUR] [-v]
  drand-interop tle-encrypt --chain-info FILE --round R [--in FILE] [--out FILE] [--armor]
  drand-interop tle-decrypt --url URL [--in FILE] [--out FILE] [--timeout DUR]
  drand-interop vectors
`

// errUsage marks errors that should exit with status 2.
var errUsage = errors.New("usage")

// run is main without the process: tests call it directly.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	cmd, rest := args[0], args[1:]
	var err error
	switch cmd {
	case "client-verify":
		err = cmdClientVerify(rest, stdout, stderr)
	case "tle-encrypt":
		err = cmdEncrypt(rest, stdin, stdout, stderr)
	case "tle-decrypt":
		err = cmdDecrypt(rest, stdin, stdout, stderr)
	case "vectors":
		err = cmdVectors(rest, stdout, stderr)
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "drand-interop: unknown subcommand %q\n%s", cmd, usage)
		return 2
	}
	if err == nil {
		return 0
	}
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	fmt.Fprintf(stderr, "drand-interop %s: FAIL: %v\n", cmd, oneLine(err))
	if errors.Is(err, errUsage) {
		return 2
	}
	return 1
}

func oneLine(err error) string {
	return strings.ReplaceAll(strings.TrimSpace(err.Error()), "\n", " | ")
}

// newFlagSet returns a flag set whose errors come back as errUsage.
func newFlagSet(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected arguments %q", errUsage, fs.Args())
	}
	return nil
}

var configureLogOnce sync.Once

// drandLogger routes drand's logging to stderr (never stdout, which carries
// results) at warn level with -v and error level otherwise. drand's default
// logger is also redirected, since some library paths log through it.
func drandLogger(stderr io.Writer, verbose bool) dlog.Logger {
	level := dlog.ErrorLevel
	if verbose {
		level = dlog.InfoLevel
	}
	configureLogOnce.Do(func() {
		// DefaultLogger installs its own global on first use; call it first
		// so that ours replaces it rather than the other way round.
		_ = dlog.DefaultLogger()
		dlog.ConfigureDefaultLogger(zapcore.AddSync(os.Stderr), dlog.ErrorLevel, false)
	})
	return dlog.New(zapcore.AddSync(stderr), level, false)
}
