package gorgoniacheck

// The examples' stories at the protocol level: each example binary, correct and -buggy, run under
// GRADCHECK_PROTOCOL=model, shows the signal its check reads (the verdicts are the harness's:
// tests/engines/test_gorgonia_model_check.py runs them through gradcheck.audit_process).

import (
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

var examplesOnce struct {
	sync.Once
	dir string
	err error
	out []byte
}

// exampleBinaries builds the examples once per test run (go build, from the module cache).
func exampleBinaries(t *testing.T) string {
	t.Helper()
	examplesOnce.Do(func() {
		dir, err := os.MkdirTemp("", "gorgoniacheck-examples")
		if err != nil {
			examplesOnce.err = err
			return
		}
		cmd := exec.Command("go", "build", "-o", dir+string(os.PathSeparator), "./examples/...")
		examplesOnce.out, examplesOnce.err = cmd.CombinedOutput()
		examplesOnce.dir = dir
	})
	if examplesOnce.err != nil {
		t.Fatalf("go build ./examples/...: %v\n%s", examplesOnce.err, examplesOnce.out)
	}
	return examplesOnce.dir
}

// ask runs an example with the given requests and returns the results in order.
func askExample(t *testing.T, name string, flags []string, reqs ...string) []map[string]interface{} {
	t.Helper()
	cmd := exec.Command(filepath.Join(exampleBinaries(t), name), flags...)
	cmd.Env = append(os.Environ(), "GRADCHECK_PROTOCOL=model")
	lines := []string{}
	for i, r := range reqs {
		lines = append(lines, `{"id":`+itoa(i+1)+`,`+r+`}`)
	}
	cmd.Stdin = strings.NewReader(strings.Join(lines, "\n") + "\n")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %v: %v", name, flags, err)
	}
	res := []map[string]interface{}{}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var r struct {
			Result map[string]interface{} `json:"result"`
			Error  map[string]interface{} `json:"error"`
		}
		if err := json.Unmarshal([]byte(l), &r); err != nil || r.Error != nil {
			t.Fatalf("%s %v: %s (%v)", name, flags, l, err)
		}
		res = append(res, r.Result)
	}
	return res
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

const stepReq = `"method":"model.step","params":{"dtype":"float64","knobs":{},"steps":1,"experiment":"run","sample":64}`

func TestExampleDualRun(t *testing.T) {
	for _, flags := range [][]string{nil, {"-buggy"}} {
		want := 1.0
		if len(flags) > 0 {
			want = 2 // the solver receives g + g
		}
		r := askExample(t, "dualrun", flags, stepReq)
		for name, e := range stepTensors(t, r[0], 0) {
			// exact: the dual value is 0 + g (+ g), and doubling is exact in binary floating point
			ratio := e["applied_dot_grad"].(float64) / e["grad_sumsq"].(float64)
			if ratio != want {
				t.Errorf("dualrun %v %s: applied = %v g, want %v g", flags, name, ratio, want)
			}
		}
	}
}

func TestExampleLetBatch(t *testing.T) {
	for _, flags := range [][]string{nil, {"-buggy"}} {
		r := askExample(t, "letbatch", flags, stepReq)
		for name, e := range stepTensors(t, r[0], 0) {
			same := e["applied_sumsq"].(float64) == e["grad_sumsq"].(float64) &&
				e["applied_dot_grad"].(float64) == e["grad_sumsq"].(float64)
			if same != (len(flags) == 0) { // -buggy: g(validation) + g(training)
				t.Errorf("letbatch %v %s: applied sumsq %v, dot with g %v, g sumsq %v", flags, name,
					e["applied_sumsq"], e["applied_dot_grad"], e["grad_sumsq"])
			}
		}
	}
}

func TestExampleBatchSize(t *testing.T) {
	for _, flags := range [][]string{nil, {"-buggy"}} {
		want := -0.1 // the declared rate: delta = -lr*g
		if len(flags) > 0 {
			want = -0.1 / 16
		}
		r := askExample(t, "batchsize", flags, `"method":"model.describe","params":{"dtype":"float64"}`, stepReq)
		if d := r[0]["optimizer"].(map[string]interface{}); d["kind"] != "vanilla" || d["lr"] != 0.1 || d["batch"] != 1.0 {
			t.Errorf("batchsize %v: the declared intent %v", flags, d)
		}
		for name, e := range stepTensors(t, r[1], 0) {
			// delta = theta_after - theta_before is rounded at |theta|: each element is off by at
			// most 2^-52 (|theta| + |delta|), which bounds delta·g's error
			theta, delta, g := decode(t, e["theta"]), decode(t, e["delta"]), decode(t, e["grad"])
			bound := 0.0
			for j := range g {
				bound += 0x1p-52 * (math.Abs(theta[j]) + math.Abs(delta[j])) * math.Abs(g[j])
			}
			dg, gg := e["delta_dot_grad"].(float64), e["grad_sumsq"].(float64)
			if math.Abs(dg-want*gg) > bound+4*0x1p-52*math.Abs(want*gg) {
				t.Errorf("batchsize %v %s: delta = %v g, want %v g (allowed %v in delta·g)", flags, name, dg/gg, want, bound)
			}
		}
	}
}

func TestExampleNormProxy(t *testing.T) {
	for _, flags := range [][]string{nil, {"-buggy"}} {
		r := askExample(t, "normproxy", flags, stepReq)
		st := r[0]["steps"].([]interface{})[0].(map[string]interface{})
		logged := st["logged"].(map[string]interface{})["grad_norm"].(float64)
		sq := 0.0
		for _, e := range stepTensors(t, r[0], 0) {
			sq += e["grad_sumsq"].(float64)
		}
		// the same squares summed in another order: at most n ulps apart (n = 48 parameters)
		rel := math.Abs(logged-math.Sqrt(sq)) / math.Sqrt(sq)
		if (len(flags) == 0) != (rel < 48*0x1p-52) {
			t.Errorf("normproxy %v: logged %v, true global L2 %v", flags, logged, math.Sqrt(sq))
		}
	}
}

func TestExampleTwoGraph(t *testing.T) {
	const h = 0.0009765625
	for _, flags := range [][]string{nil, {"-buggy"}} {
		r := askExample(t, "twograph", flags, `"method":"model.grads","params":{"dtype":"float64"}`,
			`"method":"model.line","params":{"dtype":"float64","t":[0.0009765625,-0.0009765625,0.00048828125,-0.00048828125],`+
				`"direction":{"seed":5,"scope":[{"name":"fc1.weight"}]}}`)
		fc1 := r[0]["grads"].(map[string]interface{})["fc1.weight"].(map[string]interface{})
		l := r[1]["losses"].([]interface{})
		fdH := (l[0].(float64) - l[1].(float64)) / (2 * h)
		fdH2 := (l[2].(float64) - l[3].(float64)) / h
		// the allowance: FD(h/2)'s truncation error is a third of |FD(h) - FD(h/2)| (Richardson),
		// plus the rounding of the losses (a few ulps of the loss over the step)
		allowed := math.Abs(fdH-fdH2) + 16*0x1p-52*math.Abs(l[2].(float64))/h
		proj := r[1]["projection"].(float64)
		if len(flags) == 0 && (fc1["present"] != true || math.Abs(fdH2-proj) > allowed) {
			t.Errorf("twograph: fc1.weight %v, FD %v vs projection %v (allowed %v)", fc1, fdH2, proj, allowed)
		}
		if len(flags) > 0 && (fc1["present"] != false || proj != 0 || math.Abs(fdH2) < 100*allowed) {
			t.Errorf("twograph -buggy: fc1.weight %v, FD %v (the cost depends on it; allowed %v), projection %v",
				fc1, fdH2, allowed, proj)
		}
	}
}

func TestExampleMLP(t *testing.T) {
	r := askExample(t, "mlp", nil, `"method":"hello","params":{"protocol":1}`, stepReq)
	if r[0]["model"] != "mlp" {
		t.Errorf("hello: %v", r[0])
	}
	for name, e := range stepTensors(t, r[1], 0) {
		if e["applied_dot_grad"].(float64) != e["grad_sumsq"].(float64) {
			t.Errorf("mlp %s: %v", name, e)
		}
	}
}

func TestMain(m *testing.M) {
	code := m.Run()
	if examplesOnce.dir != "" {
		_ = os.RemoveAll(examplesOnce.dir)
	}
	os.Exit(code)
}
