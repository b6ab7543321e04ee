package gorgoniacheck

// The two launch directions of docs/protocol-model.md: under the harness
// (GRADCHECK_PROTOCOL=model: answer on stdin/stdout), or starting the harness
// ($GRADCHECK_PYTHON -m gradcheck model --peer-stdio $GRADCHECK_ARGS) and answering over its pipes.

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"

	"gorgonia.org/tensor"
)

// InstallLine is what a user runs to make the harness available.
const InstallLine = "pip install -e <gradcheck checkout> (or set GRADCHECK_PYTHON to a python with gradcheck installed)"

// Option adjusts Check and Serve when they start the harness.
type Option func(*options)

type options struct{ args []string }

// DTypes limits the check to the given dtypes (tensor.Float64, tensor.Float32).
func DTypes(dts ...tensor.Dtype) Option {
	return func(o *options) {
		has := map[string]bool{}
		for _, dt := range dts {
			has[dtypeName(dt)] = true
		}
		v := "both"
		if len(has) == 1 {
			for k := range has {
				v = k
			}
		}
		o.args = append(o.args, "--dtype", v)
	}
}

// Args appends options to the harness's command line (gradcheck model --help lists them).
func Args(args ...string) Option { return func(o *options) { o.args = append(o.args, args...) } }

// errNotStarted: the harness could not be started or exited before asking anything.
var errNotStarted = errors.New("the gradcheck harness could not be started")

// outcome is one conversation with a harness the package started.
type outcome struct {
	code int
	done *Done
}

// runHarness starts the harness and serves it over its pipes.
func runHarness(b Builder, opts []Option) (outcome, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	python := os.Getenv("GRADCHECK_PYTHON")
	if python == "" {
		python = "python3"
	}
	args := append([]string{"-m", "gradcheck", "model", "--peer-stdio"}, o.args...)
	args = append(args, strings.Fields(os.Getenv("GRADCHECK_ARGS"))...)
	cmd := exec.Command(python, args...)
	cmd.Stderr = os.Stderr // the harness's report
	toHarness, err := cmd.StdinPipe()
	if err != nil {
		return outcome{}, err
	}
	fromHarness, err := cmd.StdoutPipe()
	if err != nil {
		return outcome{}, err
	}
	if err := cmd.Start(); err != nil {
		return outcome{}, fmt.Errorf("%w: %s %s: %v; install it: %s", errNotStarted, python,
			strings.Join(args, " "), err, InstallLine)
	}
	s := newServer(b)
	counted := &countingReader{r: fromHarness}
	serr := s.serve(counted, toHarness)
	_ = toHarness.Close()
	werr := cmd.Wait()
	code := 0
	if ee, ok := werr.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if werr != nil {
		return outcome{}, werr
	}
	if counted.n == 0 && code == 2 { // argparse's usage error: the harness runs, its options do not
		return outcome{code: code}, fmt.Errorf("%s %s: usage error (exit 2, its message is above; GRADCHECK_ARGS: %q)",
			python, strings.Join(args, " "), os.Getenv("GRADCHECK_ARGS"))
	}
	if counted.n == 0 {
		return outcome{code: code}, fmt.Errorf("%w: %s %s exited %d without a request; install it: %s",
			errNotStarted, python, strings.Join(args, " "), code, InstallLine)
	}
	if serr != nil && s.done == nil {
		return outcome{code: code, done: s.done}, fmt.Errorf("serving the harness: %v", serr)
	}
	return outcome{code: code, done: s.done}, nil
}

type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

// Serve is a main function's last call. Under the harness (GRADCHECK_PROTOCOL=model, set by
// gradcheck model --command "...") it answers on stdin/stdout, with file descriptor 1 pointed at
// stderr so the user's own prints cannot corrupt the stream, and exits 0 when stdin closes.
// Otherwise it starts the harness like Check and exits with its code (0 passed, 1 a finding,
// 2 usage or the model could not be built or answered).
func Serve(b Builder, opts ...Option) {
	if os.Getenv("GRADCHECK_PROTOCOL") == "model" {
		out, err := protocolStdout()
		if err != nil {
			fmt.Fprintln(os.Stderr, "gorgoniacheck:", err)
			os.Exit(2)
		}
		if err := newServer(b).serve(os.Stdin, out); err != nil {
			fmt.Fprintln(os.Stderr, "gorgoniacheck:", err)
			os.Exit(2)
		}
		os.Exit(0)
	}
	res, err := runHarness(b, opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "gorgoniacheck:", err)
		os.Exit(2)
	}
	os.Exit(res.code)
}

// Check runs the harness on the model from a Go test: one subtest per check of model.done
// (passed: ok, skipped: t.Skip with the reason, otherwise t.Error with the harness's message).
// Where the harness cannot be started it skips with the install line, or fails when CI is set.
func Check(t testing.TB, b Builder, opts ...Option) {
	t.Helper()
	res, err := runHarness(b, opts)
	if err != nil {
		if errors.Is(err, errNotStarted) && os.Getenv("CI") == "" {
			t.Skip(err.Error())
		}
		t.Fatal(err.Error())
	}
	if res.done == nil {
		t.Fatalf("gradcheck model exited %d without verdicts (its report is above, on stderr)", res.code)
	}
	runner, canRun := t.(interface {
		Run(string, func(*testing.T)) bool
	})
	for _, c := range res.done.Checks {
		c := c
		verdict := func(tb testing.TB) {
			tb.Helper()
			switch c.Status {
			case "passed":
			case "skipped":
				tb.Skip(c.Message)
			default:
				tb.Errorf("%s %s: %s", c.Name, c.Status, c.Message)
			}
		}
		if canRun {
			runner.Run(c.Name, func(t *testing.T) { verdict(t) })
		} else {
			verdict(t)
		}
	}
	if res.code != 0 && res.done.Passed {
		t.Errorf("gradcheck model exited %d although model.done said passed", res.code)
	}
}
