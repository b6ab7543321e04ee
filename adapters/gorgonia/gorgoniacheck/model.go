// Package gorgoniacheck lets a Gorgonia user check their own model and training step with
// gradcheck (docs/engines/gorgonia-user.md). The user writes a Builder (their graph, their fixed
// batch, their cost, optionally the body of their training loop); the package answers the
// harness's model protocol (docs/protocol-model.md) by calling it: it perturbs the learnables in
// place and restores them bitwise, computes fresh gradients by node name with a machine of its
// own, and observes what the solver receives. The harness keeps every verdict.
//
//	func TestGradcheck(t *testing.T) { gc.Check(t, build) }   // go test: one subtest per check
//	func main() { gc.Serve(build) }                            // gradcheck model --command "..."
package gorgoniacheck

import (
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Builder builds the user's model in dtype dt (tensor.Float64 or tensor.Float32): a fresh graph,
// the user's fixed batch, the cost, and optionally the training step. It is called once per dtype
// and again for every step experiment; it returns an error for a dtype it does not support.
type Builder func(dt tensor.Dtype) (*Model, error)

// Model is what a Builder returns.
type Model struct {
	// Cost is the scalar cost node, built as the user's training code builds it.
	Cost *G.Node
	// Learnables are the registry: named nodes (G.WithName), in the order the report lists them.
	Learnables G.Nodes
	// Forward (optional) evaluates the cost when that takes more than one machine run (a
	// pipeline of graphs); without it the package runs the cost's graph with a machine of its own.
	Forward func() (float64, error)
	// Step (optional) is the training loop's body: run, (clip,) solver.Step, reset. It returns
	// what the user's logs show.
	Step func() (Logged, error)
	// ClipNorm (optional) declares global-norm clipping at the knob's value; the harness compares
	// what the solver received with the clipped true gradient.
	ClipNorm Knob
	// Stopped are learnable-name globs cut from the cost on purpose.
	Stopped []string
	// Optimizer (optional) declares the update rule the user intends (SGD, Adam, AdamW,
	// Vanilla). It takes precedence over what Observe reads from the solver.
	Optimizer Declaration
	// Name names the model in the report (default: the program's name).
	Name string
}

// Logged is what the user's training step logs.
type Logged struct {
	// GradNorm is the gradient norm the logs show; nil when the step logs none.
	GradNorm *float64
	// PostClip says GradNorm is measured after clipping (default: before).
	PostClip bool
}

// Norm is a Logged with the given gradient norm (before clipping).
func Norm(x float64) Logged { return Logged{GradNorm: &x} }

// Declaration is an optimizer declaration of docs/protocol-model.md's model.describe.
type Declaration interface {
	declaration() map[string]interface{}
}

// SGD is plain gradient descent: p -= LR*g.
type SGD struct{ LR float64 }

// Adam is Adam with its coupled defaults spelled out.
type Adam struct{ LR, Beta1, Beta2, Eps float64 }

// AdamW is Adam with decoupled weight decay (p *= 1 - LR*WeightDecay first).
type AdamW struct{ LR, Beta1, Beta2, Eps, WeightDecay float64 }

// Vanilla is Gorgonia's VanillaSolver: g/Batch (Batch 0 means 1), then the elementwise clamp to
// [-Clip, Clip] (Clip 0 means none), plus L1*sign(p) + L2*p, then p -= LR*g.
type Vanilla struct{ LR, Batch, Clip, L1, L2 float64 }

func (d SGD) declaration() map[string]interface{} {
	return map[string]interface{}{"kind": "sgd", "lr": d.LR}
}

func (d Adam) declaration() map[string]interface{} {
	return map[string]interface{}{"kind": "adam", "lr": d.LR, "beta1": d.Beta1, "beta2": d.Beta2, "eps": d.Eps}
}

func (d AdamW) declaration() map[string]interface{} {
	return map[string]interface{}{"kind": "adamw", "lr": d.LR, "beta1": d.Beta1, "beta2": d.Beta2,
		"eps": d.Eps, "weight_decay": d.WeightDecay}
}

func (d Vanilla) declaration() map[string]interface{} {
	batch := d.Batch
	if batch == 0 {
		batch = 1
	}
	var clip interface{}
	if d.Clip > 0 {
		clip = d.Clip
	}
	return map[string]interface{}{"kind": "vanilla", "lr": d.LR, "batch": batch, "clip": clip,
		"l1": d.L1, "l2": d.L2}
}

// Knob is a value the harness may override per step experiment (a clipping threshold).
type Knob interface {
	// Name is the knob's name in model.describe.
	Name() string
	// Default is the value outside the harness's experiments.
	Default() float64
	// Value is the value to use now.
	Value() float64
}

type knob struct {
	name string
	def  float64
	cur  *float64
}

func (k *knob) Name() string     { return k.name }
func (k *knob) Default() float64 { return k.def }
func (k *knob) Value() float64 {
	if k.cur != nil {
		return *k.cur
	}
	return k.def
}

// KnobOf returns a knob named name with the default def. Called inside a Builder, the knob is
// registered with the build, so the harness can set it per step experiment.
func KnobOf(name string, def float64) Knob {
	k := &knob{name: name, def: def}
	registerKnob(k)
	return k
}
