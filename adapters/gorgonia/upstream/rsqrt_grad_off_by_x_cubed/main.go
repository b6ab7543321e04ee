// Gorgonia: the symbolic gradient of InverseSqrt is -1/(2 y^3) = -x^1.5/2 where the derivative
// of y = x^-1/2 is -y^3/2 = -x^-1.5/2: off by a factor x^3.
//
// Standalone: gorgonia.org/gorgonia and gorgonia.org/tensor only.
// `go run ./upstream/rsqrt_grad_off_by_x_cubed` (from adapters/gorgonia: its go.mod pins
// gorgonia v0.9.18, tensor v0.9.24).
//
// inverseSqrtDiffExpr (operatorPointwise_unary.go) computes -gradY / (2 y^3); the derivative
// is -gradY * y^3 / 2.
// Exact (closed form): d/dx x^-1/2 = -x^-3/2 / 2; at x = 4: -0.0625.
// Last line: REPRODUCES while the bug is there, FIXED once the gradient is right.
package main

import (
	"fmt"
	"math"
	"os"
	"runtime/debug"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

func main() {
	const x0 = 4.0
	g := G.NewGraph()
	x := G.NewScalar(g, tensor.Float64, G.WithName("x"), G.WithValue(x0))
	y := G.Must(G.InverseSqrt(x))
	grads, err := G.Grad(y, x)
	if err != nil {
		fmt.Fprintln(os.Stderr, "Grad:", err)
		os.Exit(1)
	}
	m := G.NewTapeMachine(g)
	defer m.Close()
	if err := m.RunAll(); err != nil {
		fmt.Fprintln(os.Stderr, "RunAll:", err)
		os.Exit(1)
	}
	got := grads[0].Value().Data().(float64)
	exact := -0.5 * math.Pow(x0, -1.5)
	fmt.Println(versions())
	fmt.Printf("d/dx x^-1/2 at x = %v: gorgonia %.17g, exact -x^-1.5/2 = %.17g\n", x0, got, exact)
	fmt.Printf("ratio gorgonia/exact = %.17g (x^3 = %.17g)\n", got/exact, x0*x0*x0)
	// control: a central difference of Gorgonia's own forward agrees with the closed form
	const h = 1e-5
	fd := (forward(x0+h) - forward(x0-h)) / (2 * h)
	fmt.Printf("central difference of gorgonia's forward (h = %g): %.12g\n", h, fd)
	if math.Abs(got-exact) > 1e-15*math.Abs(exact) {
		fmt.Println("REPRODUCES")
	} else {
		fmt.Println("FIXED")
	}
}

// forward evaluates InverseSqrt at v with Gorgonia.
func forward(v float64) float64 {
	g := G.NewGraph()
	x := G.NewScalar(g, tensor.Float64, G.WithName("x"), G.WithValue(v))
	y := G.Must(G.InverseSqrt(x))
	m := G.NewTapeMachine(g)
	defer m.Close()
	if err := m.RunAll(); err != nil {
		fmt.Fprintln(os.Stderr, "RunAll:", err)
		os.Exit(1)
	}
	return y.Value().Data().(float64)
}

// versions reports the Go toolchain and the gorgonia and tensor modules this binary was built with.
func versions() string {
	s := "go unknown"
	if info, ok := debug.ReadBuildInfo(); ok {
		s = "go " + info.GoVersion
		for _, d := range info.Deps {
			if d.Path == "gorgonia.org/gorgonia" || d.Path == "gorgonia.org/tensor" {
				s += ", " + d.Path + " " + d.Version
			}
		}
	}
	return s
}
