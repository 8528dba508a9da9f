package spool

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
)

// Record is one Kafka message held by the spool.
type Record struct {
	Topic string
	// Key is nil when the message was appended with a nil key; the spool
	// keeps nil and empty apart because Kafka partitioners treat them
	// differently.
	Key   []byte
	Value []byte
}

// MaxRecordBytes is the largest encoded record (topic, key and value plus 14
// bytes of framing) that Append accepts. Kafka brokers reject far smaller
// messages by default; the bound exists so that a corrupt length field on
// disk can never make the decoder allocate gigabytes.
const MaxRecordBytes = 16 << 20

// On disk a record is framed as
//
//	uint32 payload length | uint32 CRC-32C of payload | payload
//
// and the payload is
//
//	uint16 topic length | topic | uint32 key length (nilKey for nil) | key | value
//
// all integers big-endian.
const (
	frameHeaderLen   = 8
	payloadHeaderLen = 2 + 4
	nilKey           = math.MaxUint32
	maxPayloadLen    = MaxRecordBytes - frameHeaderLen
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Decoding errors. errTruncated and errLength mean the frame boundary is lost
// (a torn write, or garbage); errChecksum and errPayload mean the frame
// boundary is intact and only this record is bad, so a reader can skip it.
var (
	errTruncated = errors.New("spool: truncated record")
	errLength    = errors.New("spool: implausible record length")
	errChecksum  = errors.New("spool: record checksum mismatch")
	errPayload   = errors.New("spool: malformed record payload")
)

// encodedLen returns the size of the frame that encodes the record.
func encodedLen(topic string, key, value []byte) int64 {
	return int64(frameHeaderLen+payloadHeaderLen) + int64(len(topic)) + int64(len(key)) + int64(len(value))
}

// appendRecord appends the framed record to dst. The caller checks the size
// limits first.
func appendRecord(dst []byte, topic string, key, value []byte) []byte {
	payloadLen := payloadHeaderLen + len(topic) + len(key) + len(value)
	start := len(dst)
	dst = binary.BigEndian.AppendUint32(dst, uint32(payloadLen))
	dst = binary.BigEndian.AppendUint32(dst, 0) // CRC, filled in below
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(topic)))
	dst = append(dst, topic...)
	if key == nil {
		dst = binary.BigEndian.AppendUint32(dst, nilKey)
	} else {
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(key)))
		dst = append(dst, key...)
	}
	dst = append(dst, value...)
	crc := crc32.Checksum(dst[start+frameHeaderLen:], castagnoli)
	binary.BigEndian.PutUint32(dst[start+4:], crc)
	return dst
}

// frameLen reads the total frame length from a frame header. It returns
// errTruncated if b is shorter than a header and errLength if the length
// cannot be a record written by Append.
func frameLen(b []byte) (int, error) {
	if len(b) < frameHeaderLen {
		return 0, errTruncated
	}
	n := binary.BigEndian.Uint32(b)
	if n < payloadHeaderLen || n > maxPayloadLen {
		return 0, fmt.Errorf("%w: %d bytes", errLength, n)
	}
	return frameHeaderLen + int(n), nil
}

// decodeRecord decodes the frame at the start of b. It returns the record and
// the frame length. On errChecksum and errPayload the frame length is still
// valid so the caller can skip the record; on errTruncated and errLength it is
// zero. The record's Key and Value alias b.
func decodeRecord(b []byte) (Record, int, error) {
	n, err := frameLen(b)
	if err != nil {
		return Record{}, 0, err
	}
	if len(b) < n {
		return Record{}, 0, errTruncated
	}
	payload := b[frameHeaderLen:n]
	if crc32.Checksum(payload, castagnoli) != binary.BigEndian.Uint32(b[4:]) {
		return Record{}, n, errChecksum
	}
	rec, err := decodePayload(payload)
	if err != nil {
		return Record{}, n, err
	}
	return rec, n, nil
}

func decodePayload(p []byte) (Record, error) {
	topicLen := int(binary.BigEndian.Uint16(p))
	p = p[2:]
	if len(p) < topicLen+4 {
		return Record{}, fmt.Errorf("%w: topic length %d exceeds payload", errPayload, topicLen)
	}
	rec := Record{Topic: string(p[:topicLen])}
	p = p[topicLen:]
	keyLen := binary.BigEndian.Uint32(p)
	p = p[4:]
	if keyLen != nilKey {
		if uint64(keyLen) > uint64(len(p)) {
			return Record{}, fmt.Errorf("%w: key length %d exceeds payload", errPayload, keyLen)
		}
		rec.Key = p[:keyLen:keyLen]
		p = p[keyLen:]
	}
	rec.Value = p
	return rec, nil
}
