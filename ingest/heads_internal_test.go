package ingest

import "testing"

func TestDigest(t *testing.T) {
	base := digest([]byte("h1"), []byte("value"))
	for _, c := range []struct {
		name       string
		key, value []byte
		same       bool
	}{
		{"same key and value", []byte("h1"), []byte("value"), true},
		{"another value", []byte("h1"), []byte("valuf"), false},
		{"another key", []byte("h2"), []byte("value"), false},
		{"a byte moved from the value to the key", []byte("h1v"), []byte("alue"), false},
		{"the key's bytes moved into the value", nil, []byte("h1value"), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := digest(c.key, c.value) == base; got != c.same {
				t.Errorf("digest(%q, %q) equal to digest(h1, value): %v; want %v", c.key, c.value, got, c.same)
			}
		})
	}
	// A null key (kafka-go's reader) and an empty one (a fetched record)
	// are the same message.
	if digest(nil, []byte("v")) != digest([]byte{}, []byte("v")) {
		t.Error("a null key and an empty key digest differently")
	}
}
