package schemas

import (
	"errors"
	"fmt"
	"strconv"
)

// Kafka headers that number the messages of one publisher, so that ingest can
// tell a message sent twice (a retried write, a spool replayed after a crash)
// from a new one. They are optional: a message without them is ingested as
// before, with no deduplication beyond the Kafka offset.
const (
	// HeaderProducer names the publisher that numbered the message: a
	// random id drawn when the publisher starts (and again after it has
	// numbered a bounded number of keys), so two processes never share one.
	HeaderProducer = "heliostat-producer"
	// HeaderSequence is the message's number among its producer's messages
	// with the same topic and key, in decimal, counting from 1. Numbers go
	// up by one per message the producer accepted, so a gap means messages
	// lost on the way.
	HeaderSequence = "heliostat-seq"
)

// MaxProducerLen is the longest producer id ParseSequence accepts.
const MaxProducerLen = 64

// Sequence is a message's place in its producer's stream.
type Sequence struct {
	Producer string
	Seq      uint64
}

// Valid reports whether s can be put on a message: a producer id of 1 to
// MaxProducerLen characters from [0-9a-zA-Z._-] and a sequence number of at
// least 1.
func (s Sequence) Valid() bool {
	return s.Seq > 0 && validProducer(s.Producer)
}

// FormatSeq returns the value of the HeaderSequence header for s.
func (s Sequence) FormatSeq() []byte { return strconv.AppendUint(nil, s.Seq, 10) }

// ErrNoSequence is returned by ParseSequence for a message that carries
// neither header.
var ErrNoSequence = errors.New("schemas: message has no sequence headers")

// ParseSequence reads the values of the HeaderProducer and HeaderSequence
// headers (nil when a header is absent). A message with neither gets
// ErrNoSequence; one with only one of them, or with a value that is not
// what HeaderProducer and HeaderSequence describe, gets an error naming the
// header at fault.
func ParseSequence(producer, seq []byte) (Sequence, error) {
	if producer == nil && seq == nil {
		return Sequence{}, ErrNoSequence
	}
	if producer == nil {
		return Sequence{}, fmt.Errorf("schemas: header %s present without %s", HeaderSequence, HeaderProducer)
	}
	if seq == nil {
		return Sequence{}, fmt.Errorf("schemas: header %s present without %s", HeaderProducer, HeaderSequence)
	}
	if !validProducer(string(producer)) {
		return Sequence{}, fmt.Errorf("schemas: header %s: %q is not 1 to %d characters from [0-9a-zA-Z._-]",
			HeaderProducer, truncate(producer), MaxProducerLen)
	}
	if len(seq) == 0 || len(seq) > 20 || seq[0] == '0' {
		return Sequence{}, fmt.Errorf("schemas: header %s: %q is not a decimal number from 1 without leading zeros", HeaderSequence, truncate(seq))
	}
	n, err := strconv.ParseUint(string(seq), 10, 64)
	if err != nil {
		return Sequence{}, fmt.Errorf("schemas: header %s: %q is not a decimal number from 1 to 2^64-1", HeaderSequence, truncate(seq))
	}
	return Sequence{Producer: string(producer), Seq: n}, nil
}

func validProducer(p string) bool {
	if len(p) == 0 || len(p) > MaxProducerLen {
		return false
	}
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch {
		case c >= '0' && c <= '9', c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c == '.', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}

// truncate keeps error messages short when a header is long.
func truncate(b []byte) []byte {
	if len(b) > 80 {
		return b[:80]
	}
	return b
}
