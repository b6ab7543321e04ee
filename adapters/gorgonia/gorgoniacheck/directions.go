package gorgoniacheck

// Seeded directions both sides regenerate (docs/protocol-model.md, "Directions both sides
// regenerate"): element j of tensor N in a direction of seed S is s*sign(S, N, j) inside the
// scope's [start, stop) and 0 elsewhere. The generator is splitmix64's finaliser over the seed,
// the name's FNV-1a 64 hash and the index; the Python harness regenerates the same signs.

const (
	fnvOffset = 0xcbf29ce484222325
	fnvPrime  = 0x100000001b3
	golden    = 0x9E3779B97F4A7C15
)

// fnv1a64 is the 64-bit FNV-1a hash of the UTF-8 bytes of name.
func fnv1a64(name string) uint64 {
	h := uint64(fnvOffset)
	for i := 0; i < len(name); i++ {
		h = (h ^ uint64(name[i])) * fnvPrime
	}
	return h
}

// mix is splitmix64's finaliser (all arithmetic mod 2^64).
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xBF58476D1CE4E5B9
	x ^= x >> 27
	x *= 0x94D049BB133111EB
	x ^= x >> 31
	return x
}

// directionKey is the per-(seed, tensor) key of the generator.
func directionKey(seed uint64, name string) uint64 { return mix(seed ^ fnv1a64(name)) }

// signAt is +1 or -1: the sign of element j (flat C-order index) for the key of directionKey.
func signAt(key uint64, j int) float64 {
	z := mix(key + uint64(j+1)*golden)
	if z>>63 == 0 {
		return 1
	}
	return -1
}

// sampleIndices is the stratified sample of k of the n flat indices of a tensor (n > k):
// i_m = floor(m*n/k) + mix(m) mod (floor((m+1)*n/k) - floor(m*n/k)), ascending; it depends
// only on n and k, so tensors of one shape are sampled alike.
func sampleIndices(n, k int) []int {
	out := make([]int, k)
	un, uk := uint64(n), uint64(k)
	for m := uint64(0); m < uk; m++ {
		lo, hi := m*un/uk, (m+1)*un/uk
		out[m] = int(lo + mix(m)%(hi-lo))
	}
	return out
}
