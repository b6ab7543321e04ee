package gorgoniacheck

import "testing"

// The contract's test vectors (docs/protocol-model.md): the Python generator
// (gradcheck.model_audit.directions) and the Rust crate test the same table.
func TestDirectionVectors(t *testing.T) {
	cases := []struct {
		seed  uint64
		name  string
		fnv   uint64
		key   uint64
		signs string
		sum   int
	}{
		{0, "fc1.weight", 0x0fc5ab63896269ed, 0x97a85473b1ac470b, "+-+-+++++--+++--", -12},
		{1, "fc1.weight", 0x0fc5ab63896269ed, 0x0c0dee666185dac9, "+--++++---+---++", 30},
		{0, "fc2.bias", 0x9025e524e4887e83, 0xac97325035b8facb, "+--++-+---+-+--+", -36},
		{12345, "w", 0xaf63ea4c86020456, 0xe35cec8d4893e4e5, "-+-+-+---++--+++", -10},
		{9007199254740991, "layer.0.weight", 0x7b3e0c79a947673a, 0x2c31aa0d52257019, "--+-+-+++-+-++--", -14},
	}
	for _, c := range cases {
		if got := fnv1a64(c.name); got != c.fnv {
			t.Errorf("fnv1a64(%q) = %#x, want %#x", c.name, got, c.fnv)
		}
		key := directionKey(c.seed, c.name)
		if key != c.key {
			t.Errorf("key(%d, %q) = %#x, want %#x", c.seed, c.name, key, c.key)
		}
		if got := signString(key, 0, 16); got != c.signs {
			t.Errorf("signs(%d, %q) = %s, want %s", c.seed, c.name, got, c.signs)
		}
		sum := 0.0
		for j := 0; j < 1000; j++ {
			sum += signAt(key, j)
		}
		if int(sum) != c.sum {
			t.Errorf("sum of the first 1000 signs (%d, %q) = %v, want %d", c.seed, c.name, sum, c.sum)
		}
	}
	if got := signString(directionKey(0, "fc1.weight"), 1000, 1008); got != "--+++-++" {
		t.Errorf("signs j=1000..1007 = %s, want --+++-++", got)
	}
}

func signString(key uint64, from, to int) string {
	b := make([]byte, 0, to-from)
	for j := from; j < to; j++ {
		if signAt(key, j) > 0 {
			b = append(b, '+')
		} else {
			b = append(b, '-')
		}
	}
	return string(b)
}

func TestSampleIndicesStratified(t *testing.T) {
	for _, c := range []struct{ n, k int }{{100, 7}, {65, 64}, {1 << 20, 64}} {
		idx := sampleIndices(c.n, c.k)
		if len(idx) != c.k {
			t.Fatalf("n=%d k=%d: %d indices", c.n, c.k, len(idx))
		}
		for m, i := range idx {
			lo, hi := m*c.n/c.k, (m+1)*c.n/c.k
			if i < lo || i >= hi {
				t.Errorf("n=%d k=%d: index %d = %d outside its stratum [%d, %d)", c.n, c.k, m, i, lo, hi)
			}
		}
	}
	a, b := sampleIndices(1000, 64), sampleIndices(1000, 64)
	for m := range a {
		if a[m] != b[m] {
			t.Fatalf("sampleIndices is not a function of (n, k): %v vs %v", a, b)
		}
	}
}
