package gorgoniacheck

// Observe: a solver wrapper that records, by node name, copies of the gradients the solver is
// handed before it divides, clamps and zeroes them; and the collector that ties the knobs and
// observers created inside a Builder call to that build.

import (
	"fmt"
	"reflect"
	"runtime/debug"
	"sync"

	G "gorgonia.org/gorgonia"
)

// reflectPin is the gorgonia version whose unexported VanillaSolver fields Observe reads.
const reflectPin = "v0.9.18"

// Observed is the solver Observe returns: a G.Solver that records what it is handed.
type Observed struct {
	inner G.Solver
	decl  Declaration
	note  string
	mu    sync.Mutex
	// received: per node name, the sum of the gradients handed to Step since the last reset.
	received map[string][]float64
	calls    int
}

// Observe wraps the user's solver. Step records a float64 copy of each ValueGrad's gradient under
// its node name, then delegates. The declaration is read from a *G.VanillaSolver's fields
// (gorgonia v0.9.18's names, by reflect); for any other solver, or another gorgonia version,
// declare the optimizer with Model.Optimizer.
func Observe(s G.Solver) G.Solver {
	o := &Observed{inner: s, received: map[string][]float64{}}
	o.decl, o.note = declarationOf(s)
	registerObserver(o)
	return o
}

// Step records, then delegates to the wrapped solver.
func (o *Observed) Step(model []G.ValueGrad) error {
	o.mu.Lock()
	o.calls++
	for i, vg := range model {
		name := fmt.Sprintf("#%d", i)
		if n, ok := vg.(interface{ Name() string }); ok {
			name = n.Name()
		}
		g, err := vg.Grad()
		if err != nil || g == nil {
			continue
		}
		vals, err := valueFloats(g)
		if err != nil {
			continue
		}
		if acc, ok := o.received[name]; ok && len(acc) == len(vals) {
			for j := range acc {
				acc[j] += vals[j]
			}
		} else {
			o.received[name] = vals
		}
	}
	o.mu.Unlock()
	return o.inner.Step(model)
}

func (o *Observed) reset() {
	o.mu.Lock()
	o.received = map[string][]float64{}
	o.calls = 0
	o.mu.Unlock()
}

func (o *Observed) applied(name string) ([]float64, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	v, ok := o.received[name]
	return v, ok
}

// declarationOf reads a VanillaSolver's settings, pinned to gorgonia v0.9.18's field names.
func declarationOf(s G.Solver) (Declaration, string) {
	vs, ok := s.(*G.VanillaSolver)
	if !ok {
		return nil, fmt.Sprintf("%T is not read by Observe: declare it with Model.Optimizer", s)
	}
	if v := gorgoniaVersion(); v != reflectPin {
		return nil, fmt.Sprintf("VanillaSolver's fields are read for gorgonia %s only (linked: %s): declare it with Model.Optimizer", reflectPin, v)
	}
	rv := reflect.ValueOf(vs).Elem()
	f := func(name string) (float64, bool) {
		fv := rv.FieldByName(name)
		if !fv.IsValid() || fv.Kind() != reflect.Float64 {
			return 0, false
		}
		return fv.Float(), true
	}
	b := func(name string) (bool, bool) {
		fv := rv.FieldByName(name)
		if !fv.IsValid() || fv.Kind() != reflect.Bool {
			return false, false
		}
		return fv.Bool(), true
	}
	eta, ok1 := f("eta")
	batch, ok2 := f("batch")
	clip, ok3 := f("clip")
	l1, ok4 := f("l1reg")
	l2, ok5 := f("l2reg")
	useClip, ok6 := b("useClip")
	useL1, ok7 := b("useL1Reg")
	useL2, ok8 := b("useL2Reg")
	if !(ok1 && ok2 && ok3 && ok4 && ok5 && ok6 && ok7 && ok8) {
		return nil, "VanillaSolver's fields are not gorgonia v0.9.18's: declare it with Model.Optimizer"
	}
	d := Vanilla{LR: eta, Batch: batch}
	if useClip && clip > 0 {
		d.Clip = clip
	}
	if useL1 {
		d.L1 = l1
	}
	if useL2 {
		d.L2 = l2
	}
	return d, ""
}

var versionOnce struct {
	sync.Once
	v string
}

// gorgoniaVersion is the linked gorgonia module's version (the build info), else go.mod's.
func gorgoniaVersion() string {
	versionOnce.Do(func() {
		versionOnce.v = reflectPin
		if bi, ok := debug.ReadBuildInfo(); ok {
			for _, d := range bi.Deps {
				if d.Path == "gorgonia.org/gorgonia" {
					versionOnce.v = d.Version
					if d.Replace != nil {
						versionOnce.v = d.Replace.Version
					}
				}
			}
		}
	})
	return versionOnce.v
}

// collector gathers the knobs and observers created while one Builder call runs.
type collector struct {
	knobs     []*knob
	observers []*Observed
}

var (
	buildMu sync.Mutex // one Builder call at a time
	current *collector
	curMu   sync.Mutex
)

func registerKnob(k *knob) {
	curMu.Lock()
	if current != nil {
		current.knobs = append(current.knobs, k)
	}
	curMu.Unlock()
}

func registerObserver(o *Observed) {
	curMu.Lock()
	if current != nil {
		current.observers = append(current.observers, o)
	}
	curMu.Unlock()
}

// collect calls the builder through call and returns the model with the knobs and observers it created.
func collect(what string, call func() (*Model, error)) (m *Model, c *collector, err error) {
	buildMu.Lock()
	defer buildMu.Unlock()
	c = &collector{}
	curMu.Lock()
	current = c
	curMu.Unlock()
	defer func() {
		curMu.Lock()
		current = nil
		curMu.Unlock()
		if r := recover(); r != nil {
			err = fmt.Errorf("the builder panicked (%s): %v", what, r)
		}
	}()
	m, err = call()
	return m, c, err
}
