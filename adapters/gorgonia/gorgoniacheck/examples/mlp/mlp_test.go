package main

import (
	"testing"

	gc "github.com/gradcheck/gradcheck/adapters/gorgonia/gorgoniacheck"
)

// go test runs gradcheck on the model: one subtest per check (flow[fc1.weight], grad[fc2.weight],
// step.applied[fc1.bias], ...); skipped with the install line where the harness cannot start,
// failed when CI is set.
func TestGradcheck(t *testing.T) {
	gc.Check(t, build)
}
