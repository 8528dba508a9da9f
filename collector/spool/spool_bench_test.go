package spool

import (
	"bytes"
	"testing"
)

// BenchmarkAppend measures one synced append of a 1 KiB message, the cost
// Publish pays per message while the brokers are unreachable.
func BenchmarkAppend(b *testing.B) {
	s, err := Open(b.TempDir(), 1<<40, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	value := bytes.Repeat([]byte("v"), 1024)
	b.SetBytes(encodedLen("heliostat.gpu.samples", []byte("host-1"), value, nil))
	b.ReportAllocs()
	for b.Loop() {
		if err := s.Append("heliostat.gpu.samples", []byte("host-1"), value); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReplay measures reading and committing batches of 500 records of
// 1 KiB, the replay path.
func BenchmarkReplay(b *testing.B) {
	s, err := Open(b.TempDir(), 1<<40, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	value := bytes.Repeat([]byte("v"), 1024)
	const batch = 500
	b.SetBytes(batch * encodedLen("heliostat.gpu.samples", []byte("host-1"), value, nil))
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		for range batch {
			if err := s.Append("heliostat.gpu.samples", []byte("host-1"), value); err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
		recs, err := s.PeekN(batch, 1<<30)
		if err != nil || len(recs) != batch {
			b.Fatalf("PeekN = %d records, %v", len(recs), err)
		}
		if err := s.Commit(len(recs)); err != nil {
			b.Fatal(err)
		}
	}
}
