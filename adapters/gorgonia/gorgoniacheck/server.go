package gorgoniacheck

// The model protocol's answers (docs/protocol-model.md): hello, model.describe, model.loss,
// model.grads, model.line, model.step, model.done. The harness asks, the package answers.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"

	"gorgonia.org/tensor"
)

const (
	protocolVersion = 1
	libraryVersion  = "0.1.0"
)

// Check is one verdict of model.done.
type CheckResult struct {
	Name    string `json:"name"`
	Status  string `json:"status"` // passed, failed, inconclusive, error, skipped
	Message string `json:"message"`
}

// Done is model.done's content.
type Done struct {
	Passed bool          `json:"passed"`
	Checks []CheckResult `json:"checks"`
}

// server holds the builds of one conversation.
type server struct {
	builder  Builder
	builds   map[string]*build // by dtype name
	errs     map[string]error  // a dtype the builder refused
	dtypes   []string
	stamp    map[string][]float64
	done     *Done
	started  bool
	firstErr error
}

func newServer(b Builder) *server {
	return &server{builder: b, builds: map[string]*build{}, errs: map[string]error{}}
}

// start builds float32 first (theta0 comes from it when the builder accepts it), then float64
// with float32's values stamped in (exact).
func (s *server) start() {
	if s.started {
		return
	}
	s.started = true
	for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
		bd, err := newBuild(s.builder, dt, s.stamp)
		name := dtypeName(dt)
		if err != nil {
			s.errs[name] = err
			if s.firstErr == nil {
				s.firstErr = err
			}
			continue
		}
		s.builds[name] = bd
		if s.stamp == nil {
			s.stamp = bd.values()
		}
	}
	for _, name := range []string{"float64", "float32"} {
		if s.builds[name] != nil {
			s.dtypes = append(s.dtypes, name)
		}
	}
}

func (s *server) get(raw json.RawMessage) (*build, error) {
	var p struct {
		Dtype string `json:"dtype"`
	}
	if err := json.Unmarshal(raw, &p); err != nil {
		return nil, invalid("params: %v", err)
	}
	s.start()
	if p.Dtype != "float64" && p.Dtype != "float32" {
		return nil, &protoError{"unsupported", fmt.Sprintf("dtype %q: float64 or float32", p.Dtype)}
	}
	if bd := s.builds[p.Dtype]; bd != nil {
		return bd, nil
	}
	return nil, &protoError{"unsupported", s.errs[p.Dtype].Error()}
}

// serve answers requests from r on w until r closes (or model.done's pipe close).
func (s *server) serve(r io.Reader, w io.Writer) error {
	in := bufio.NewReaderSize(r, 1<<16)
	out := bufio.NewWriter(w)
	for {
		line, err := in.ReadBytes('\n')
		if len(strings.TrimSpace(string(line))) > 0 {
			resp := s.handle(line)
			b, merr := json.Marshal(resp)
			if merr != nil {
				b, _ = json.Marshal(map[string]interface{}{"id": resp["id"], "error": map[string]string{
					"type": "engine_error", "message": "encoding the answer: " + merr.Error()}})
			}
			if _, werr := out.Write(append(b, '\n')); werr != nil {
				return werr
			}
			if werr := out.Flush(); werr != nil {
				return werr
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

func (s *server) handle(line []byte) (resp map[string]interface{}) {
	var req request
	if err := json.Unmarshal(line, &req); err != nil {
		return map[string]interface{}{"id": nil, "error": map[string]string{
			"type": "invalid_request", "message": "not a JSON request: " + err.Error()}}
	}
	id := req.ID
	if id == nil {
		id = json.RawMessage("null")
	}
	defer func() {
		if r := recover(); r != nil {
			resp = map[string]interface{}{"id": id, "error": map[string]string{
				"type": "engine_error", "message": fmt.Sprintf("%s panicked: %v", req.Method, r)}}
		}
	}()
	result, err := s.dispatch(req.Method, req.Params)
	if err != nil {
		pe, ok := err.(*protoError)
		if !ok {
			pe = &protoError{"engine_error", err.Error()}
		}
		return map[string]interface{}{"id": id, "error": map[string]string{"type": pe.kind, "message": pe.msg}}
	}
	return map[string]interface{}{"id": id, "result": result}
}

func (s *server) dispatch(method string, raw json.RawMessage) (interface{}, error) {
	if len(raw) == 0 {
		raw = json.RawMessage("{}")
	}
	switch method {
	case "hello":
		return s.hello(raw)
	case "model.describe":
		bd, err := s.get(raw)
		if err != nil {
			return nil, err
		}
		return bd.describe(), nil
	case "model.loss":
		bd, err := s.get(raw)
		if err != nil {
			return nil, err
		}
		l, err := bd.loss()
		if err != nil {
			return nil, engineErr(err)
		}
		return map[string]interface{}{"loss": num(l)}, nil
	case "model.grads":
		return s.grads(raw)
	case "model.line":
		return s.line(raw)
	case "model.step":
		return s.step(raw)
	case "model.done":
		var d Done
		if err := json.Unmarshal(raw, &d); err != nil {
			return nil, invalid("model.done: %v", err)
		}
		s.done = &d
		return map[string]interface{}{}, nil
	}
	return nil, &protoError{"unsupported", fmt.Sprintf("method %q: a model child answers hello and model.*", method)}
}

func (s *server) hello(raw json.RawMessage) (interface{}, error) {
	var p struct {
		Protocol int `json:"protocol"`
	}
	if err := json.Unmarshal(raw, &p); err != nil {
		return nil, invalid("hello: %v", err)
	}
	if p.Protocol != protocolVersion {
		return nil, &protoError{"version_mismatch", fmt.Sprintf("protocol %d asked, this library speaks %d", p.Protocol, protocolVersion)}
	}
	s.start()
	if len(s.dtypes) == 0 {
		return nil, &protoError{"engine_error", "the builder failed: " + s.firstErr.Error()}
	}
	first := s.builds[s.dtypes[0]]
	name := first.model.Name
	if name == "" {
		name = filepath.Base(os.Args[0])
	}
	return map[string]interface{}{
		"protocol": protocolVersion, "kind": "model", "engine": "gorgonia",
		"engine_version": strings.TrimPrefix(gorgoniaVersion(), "v"), "library": "gorgoniacheck",
		"library_version": libraryVersion, "model": name, "dtypes": s.dtypes, "devices": []string{"cpu"},
		"capabilities": map[string]interface{}{"step": first.model.Step != nil},
		// dual values add (docs/engines/gorgonia.md); the user's machine decides when they are zeroed
		"semantics": map[string]interface{}{"accumulation": "accumulating"},
	}, nil
}

func (bd *build) describe() map[string]interface{} {
	tensors := []map[string]interface{}{}
	for _, name := range bd.names {
		p := bd.param(name)
		sq, mx := 0.0, 0.0
		for j := 0; j < p.size(); j++ {
			v := p.get(j)
			sq += v * v
			mx = math.Max(mx, math.Abs(v))
		}
		tensors = append(tensors, map[string]interface{}{"name": name, "shape": p.shape,
			"dtype": dtypeName(bd.dt), "rms": num(math.Sqrt(sq / float64(p.size()))), "max_abs": num(mx)})
	}
	knobs := map[string]interface{}{}
	for _, k := range bd.knobs {
		knobs[k.name] = k.def
	}
	var clip interface{}
	if k := bd.model.ClipNorm; k != nil {
		clip = map[string]interface{}{"kind": "global_norm", "max_norm": k.Default(), "knob": k.Name()}
	}
	stopped := bd.model.Stopped
	if stopped == nil {
		stopped = []string{}
	}
	return map[string]interface{}{"tensors": tensors, "unregistered": bd.unregistered(),
		"knobs": knobs, "clip": clip, "optimizer": bd.declaration(), "stopped": stopped,
		"step": bd.model.Step != nil}
}

// declaration: Model.Optimizer (the user's intent) first, else what Observe read. Where the two
// differ, or neither exists, a note on stderr says which one the check uses.
func (bd *build) declaration() interface{} {
	var observed Declaration
	note := "no solver passed through gorgoniacheck.Observe"
	for _, o := range bd.observers {
		if o.decl != nil {
			observed = o.decl
			break
		}
		note = o.note
	}
	if bd.model.Optimizer != nil {
		intent := bd.model.Optimizer.declaration()
		if observed != nil && fmt.Sprint(observed.declaration()) != fmt.Sprint(intent) {
			bd.notef("Model.Optimizer declares %v; the observed solver is configured %v: the update is compared with the declaration",
				intent, observed.declaration())
		}
		return intent
	}
	if observed != nil {
		return observed.declaration()
	}
	if bd.model.Step != nil {
		bd.notef("the optimizer is not declared (%s): step.effective is skipped", note)
	}
	return nil
}

// notef writes a note for the user on stderr, once per build.
func (bd *build) notef(format string, a ...interface{}) {
	msg := fmt.Sprintf(format, a...)
	if bd.noted[msg] {
		return
	}
	if bd.noted == nil {
		bd.noted = map[string]bool{}
	}
	bd.noted[msg] = true
	fmt.Fprintf(os.Stderr, "gorgoniacheck (%s): %s\n", dtypeName(bd.dt), msg)
}

func (s *server) grads(raw json.RawMessage) (interface{}, error) {
	bd, err := s.get(raw)
	if err != nil {
		return nil, err
	}
	var p struct {
		Arrays bool `json:"arrays"`
	}
	if err := json.Unmarshal(raw, &p); err != nil {
		return nil, invalid("model.grads: %v", err)
	}
	g, l, err := bd.gradsAt0()
	if err != nil {
		return nil, engineErr(err)
	}
	out := map[string]interface{}{}
	for _, name := range bd.names {
		vals, present := g[name]
		sq, sa, mx := 0.0, 0.0, 0.0
		for _, v := range vals {
			sq += v * v
			sa += math.Abs(v)
			mx = math.Max(mx, math.Abs(v))
		}
		e := map[string]interface{}{"present": present, "sumsq": num(sq), "sumabs": num(sa), "maxabs": num(mx)}
		if !present {
			e["note"] = bd.absentNote(name)
		}
		if p.Arrays && present {
			e["array"] = encodeArray(vals, bd.param(name).shape, bd.dt)
		}
		out[name] = e
	}
	return map[string]interface{}{"loss": num(l), "grads": out}, nil
}

// absentNote says why a learnable has no gradient node.
func (bd *build) absentNote(name string) string {
	if bd.nodes[name].Graph() != bd.model.Cost.Graph() {
		return fmt.Sprintf("%s is in another graph than the cost: no gradient of the cost reaches it", name)
	}
	if bd.refused != "" && strings.Contains(bd.refused, name) {
		return bd.refused
	}
	return fmt.Sprintf("%s has no gradient node: gorgonia.Grad was not asked for it", name)
}
