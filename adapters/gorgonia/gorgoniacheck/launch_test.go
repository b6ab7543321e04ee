package gorgoniacheck

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"gorgonia.org/tensor"
)

// TestHelperServe is not a test: it is the child of TestServeUnderTheHarness (Go's os/exec
// helper-process idiom), a program whose main is Serve and whose builder prints to stdout.
func TestHelperServe(t *testing.T) {
	if os.Getenv("GORGONIACHECK_HELPER") != "1" {
		t.Skip("the child of TestServeUnderTheHarness")
	}
	Serve(tinyBuilder(tinyOpts{printer: func() { fmt.Println("the user's print") }}))
}

func TestServeUnderTheHarness(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperServe$")
	cmd.Env = append(os.Environ(), "GORGONIACHECK_HELPER=1", "GRADCHECK_PROTOCOL=model")
	cmd.Stdin = strings.NewReader(`{"id":1,"method":"hello","params":{"protocol":1,"client":"gradcheck"}}` + "\n" +
		`{"id":2,"method":"model.loss","params":{"dtype":"float64"}}` + "\n")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the child: %v (stderr: %s)", err, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 2 {
		t.Fatalf("stdout must hold the two answers only, got %q", out)
	}
	for i, l := range lines {
		var resp struct {
			ID     int                    `json:"id"`
			Result map[string]interface{} `json:"result"`
		}
		if err := json.Unmarshal([]byte(l), &resp); err != nil || resp.ID != i+1 || resp.Result == nil {
			t.Errorf("answer %d: %q (%v)", i+1, l, err)
		}
	}
	if !strings.Contains(stderr.String(), "the user's print") {
		t.Errorf("the user's print should be on stderr: %q", stderr.String())
	}
}

// fakeHarness writes a shell script standing in for $GRADCHECK_PYTHON: it records its
// arguments, asks hello and model.loss, sends model.done and exits with code.
func fakeHarness(t *testing.T, checks string, code int) (string, string) {
	dir := t.TempDir()
	argsFile := filepath.Join(dir, "args")
	script := fmt.Sprintf(`#!/bin/sh
echo "$@" > %q
echo '{"id":1,"method":"hello","params":{"protocol":1,"client":"gradcheck"}}'
read -r a; echo "$a" >> %q
echo '{"id":2,"method":"model.loss","params":{"dtype":"float32"}}'
read -r a; echo "$a" >> %q
echo '{"id":3,"method":"model.done","params":{"passed":%v,"checks":%s}}'
read -r a
exit %d
`, argsFile, argsFile, argsFile, code == 0, checks, code)
	path := filepath.Join(dir, "python")
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path, argsFile
}

func TestRunHarnessServesItsPipes(t *testing.T) {
	py, argsFile := fakeHarness(t, `[{"name":"flow[b]","status":"failed","message":"blocked"}]`, 1)
	t.Setenv("GRADCHECK_PYTHON", py)
	t.Setenv("GRADCHECK_ARGS", "--seed 3")
	res, err := runHarness(tinyBuilder(tinyOpts{}), []Option{DTypes(tensor.Float32)})
	if err != nil {
		t.Fatal(err)
	}
	if res.code != 1 || res.done == nil || res.done.Passed || res.done.Checks[0].Name != "flow[b]" {
		t.Errorf("outcome %+v %+v", res, res.done)
	}
	got, _ := os.ReadFile(argsFile)
	lines := strings.Split(strings.TrimSpace(string(got)), "\n")
	if lines[0] != "-m gradcheck model --peer-stdio --dtype float32 --seed 3" {
		t.Errorf("harness command line: %q", lines[0])
	}
	if len(lines) != 3 || !strings.Contains(lines[1], `"kind":"model"`) || !strings.Contains(lines[2], `"loss":`) {
		t.Errorf("the answers the harness read: %q", lines[1:])
	}
}

func TestRunHarnessMissing(t *testing.T) {
	for _, py := range []string{filepath.Join(t.TempDir(), "no-python"), "false"} {
		t.Setenv("GRADCHECK_PYTHON", py)
		_, err := runHarness(tinyBuilder(tinyOpts{}), nil)
		if !errors.Is(err, errNotStarted) || !strings.Contains(err.Error(), "pip install") {
			t.Errorf("%s: %v", py, err)
		}
	}
}

func TestRunHarnessUsageErrorIsNotASkip(t *testing.T) {
	py := filepath.Join(t.TempDir(), "python")
	if err := os.WriteFile(py, []byte("#!/bin/sh\necho 'usage: gradcheck model: unrecognized arguments' >&2\nexit 2\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GRADCHECK_PYTHON", py)
	_, err := runHarness(tinyBuilder(tinyOpts{}), nil)
	if err == nil || errors.Is(err, errNotStarted) || !strings.Contains(err.Error(), "usage error") {
		t.Errorf("a usage error must fail, not skip: %v", err)
	}
}

func TestKnobsAreSetPerExperimentOnly(t *testing.T) {
	k := KnobOf("max_norm", 1.5) // made outside any builder, as a package-level variable would be
	seen := []float64{}
	c := converse(t, func(dt tensor.Dtype) (*Model, error) {
		m, err := tinyBuilder(tinyOpts{})(dt)
		if m != nil {
			m.ClipNorm = k
			inner := m.Step
			m.Step = func() (Logged, error) { seen = append(seen, k.Value()); return inner() }
		}
		return m, err
	})
	c.ask("model.step", map[string]interface{}{"dtype": "float64", "knobs": map[string]float64{"max_norm": 0.25}})
	c.ask("model.step", map[string]interface{}{"dtype": "float64", "knobs": map[string]float64{}})
	if fmt.Sprint(seen) != "[0.25 1.5]" || k.Value() != 1.5 {
		t.Errorf("the step saw max_norm %v; after the experiments %v", seen, k.Value())
	}
}

func TestCheckReportsEachVerdictAsASubtest(t *testing.T) {
	py, _ := fakeHarness(t, `[{"name":"grad[w]","status":"passed","message":""},`+
		`{"name":"step.clip","status":"skipped","message":"no clip declared"}]`, 0)
	t.Setenv("GRADCHECK_PYTHON", py)
	Check(t, tinyBuilder(tinyOpts{}))
}

// With the real harness (gradcheck model, the Python package of this repository): a correct
// model passes every check. Skipped where it cannot run, unless CI is set.
func TestCheckWithTheHarness(t *testing.T) {
	root, _ := filepath.Abs("../../..")
	if os.Getenv("PYTHONPATH") == "" {
		t.Setenv("PYTHONPATH", root)
	}
	py := os.Getenv("GRADCHECK_PYTHON")
	if py == "" {
		py = "python3"
	}
	if err := exec.Command(py, "-m", "gradcheck", "model", "--help").Run(); err != nil {
		if os.Getenv("CI") == "" {
			t.Skipf("%s -m gradcheck model --help: %v", py, err)
		}
		t.Fatalf("CI is set and %s -m gradcheck model --help fails: %v", py, err)
	}
	t.Setenv("GRADCHECK_ARGS", "--report-dir "+t.TempDir())
	Check(t, func(dt tensor.Dtype) (*Model, error) {
		m, err := tinyBuilder(tinyOpts{})(dt)
		if m != nil {
			m.ClipNorm = nil // the tiny step does not clip
			// its canned logged norm (42) is for the protocol tests; here the real harness
			// judges the step, so it logs none
			inner := m.Step
			m.Step = func() (Logged, error) { l, err := inner(); l.GradNorm = nil; return l, err }
		}
		return m, err
	})
}
