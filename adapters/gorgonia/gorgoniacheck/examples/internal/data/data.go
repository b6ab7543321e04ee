// Package data holds the examples' fixed batches: deterministic values, so every build the
// check makes sees the same batch (a user passes their own data).
package data

import (
	"math"

	"gorgonia.org/tensor"
)

// Batch is a rows x cols tensor of dtype dt with values 0.9*sin(1.3*i + seed) (deterministic).
func Batch(dt tensor.Dtype, rows, cols int, seed float64) tensor.Tensor {
	n := rows * cols
	if dt == tensor.Float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(0.9 * math.Sin(1.3*float64(i)+seed))
		}
		return tensor.New(tensor.WithShape(rows, cols), tensor.WithBacking(v))
	}
	v := make([]float64, n)
	for i := range v {
		v[i] = 0.9 * math.Sin(1.3*float64(i)+seed)
	}
	return tensor.New(tensor.WithShape(rows, cols), tensor.WithBacking(v))
}

// Scalar reads a scalar node's value as float64 (float32 or float64).
func Scalar(v interface{ Data() interface{} }) float64 {
	if f, ok := v.Data().(float32); ok {
		return float64(f)
	}
	return v.Data().(float64)
}
