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
	// Headers are the message's Kafka headers, in order; nil when it has
	// none.
	Headers []Header
}

// Header is one Kafka message header.
type Header struct {
	Key   string
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
//	uint16 topic length | topic | [headers] | uint32 key length (nilKey for nil) | key | value
//
// all integers big-endian. The top bit of the topic length (hasHeaders) says
// that headers follow the topic, as
//
//	uint16 count | count × (uint16 key length | key | uint32 value length | value)
//
// Records written before headers existed have the bit clear and read as
// records without headers.
const (
	frameHeaderLen   = 8
	payloadHeaderLen = 2 + 4
	nilKey           = math.MaxUint32
	maxPayloadLen    = MaxRecordBytes - frameHeaderLen
	hasHeaders       = 0x8000
	// MaxTopicBytes is the longest topic name Append accepts (Kafka's own
	// limit is 249).
	MaxTopicBytes = hasHeaders - 1
	// maxHeaders bounds the headers of one record.
	maxHeaders = math.MaxUint16
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
func encodedLen(topic string, key, value []byte, headers []Header) int64 {
	n := int64(frameHeaderLen+payloadHeaderLen) + int64(len(topic)) + int64(len(key)) + int64(len(value))
	if len(headers) > 0 {
		n += 2
		for _, h := range headers {
			n += 2 + int64(len(h.Key)) + 4 + int64(len(h.Value))
		}
	}
	return n
}

// checkHeaders returns an error if headers cannot be encoded.
func checkHeaders(headers []Header) error {
	if len(headers) > maxHeaders {
		return fmt.Errorf("spool: %d headers, at most %d fit in a record", len(headers), maxHeaders)
	}
	for _, h := range headers {
		if len(h.Key) > math.MaxUint16 {
			return fmt.Errorf("spool: header key of %d bytes is too long", len(h.Key))
		}
	}
	return nil
}

// appendRecord appends the framed record to dst. The caller checks the size
// limits first (MaxTopicBytes, checkHeaders, MaxRecordBytes).
func appendRecord(dst []byte, topic string, key, value []byte, headers []Header) []byte {
	payloadLen := int(encodedLen(topic, key, value, headers)) - frameHeaderLen
	start := len(dst)
	dst = binary.BigEndian.AppendUint32(dst, uint32(payloadLen))
	dst = binary.BigEndian.AppendUint32(dst, 0) // CRC, filled in below
	if len(headers) == 0 {
		dst = binary.BigEndian.AppendUint16(dst, uint16(len(topic)))
		dst = append(dst, topic...)
	} else {
		dst = binary.BigEndian.AppendUint16(dst, uint16(len(topic))|hasHeaders)
		dst = append(dst, topic...)
		dst = binary.BigEndian.AppendUint16(dst, uint16(len(headers)))
		for _, h := range headers {
			dst = binary.BigEndian.AppendUint16(dst, uint16(len(h.Key)))
			dst = append(dst, h.Key...)
			dst = binary.BigEndian.AppendUint32(dst, uint32(len(h.Value)))
			dst = append(dst, h.Value...)
		}
	}
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
	withHeaders := topicLen&hasHeaders != 0
	topicLen &^= hasHeaders
	p = p[2:]
	if len(p) < topicLen+4 {
		return Record{}, fmt.Errorf("%w: topic length %d exceeds payload", errPayload, topicLen)
	}
	rec := Record{Topic: string(p[:topicLen])}
	p = p[topicLen:]
	if withHeaders {
		var err error
		if rec.Headers, p, err = decodeHeaders(p); err != nil {
			return Record{}, err
		}
		if len(p) < 4 {
			return Record{}, fmt.Errorf("%w: headers leave no room for the key length", errPayload)
		}
	}
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

// decodeHeaders decodes the header list at the start of p and returns the
// rest of p. Header values alias p.
func decodeHeaders(p []byte) ([]Header, []byte, error) {
	if len(p) < 2 {
		return nil, nil, fmt.Errorf("%w: header count past payload", errPayload)
	}
	n := int(binary.BigEndian.Uint16(p))
	p = p[2:]
	// Each header takes at least 6 bytes: do not let a bad count allocate.
	if n == 0 || n > len(p)/6 {
		return nil, nil, fmt.Errorf("%w: %d headers cannot fit in %d bytes", errPayload, n, len(p))
	}
	hs := make([]Header, n)
	for i := range hs {
		if len(p) < 2 {
			return nil, nil, fmt.Errorf("%w: header %d key length past payload", errPayload, i)
		}
		kl := int(binary.BigEndian.Uint16(p))
		p = p[2:]
		if len(p) < kl+4 {
			return nil, nil, fmt.Errorf("%w: header %d key length %d exceeds payload", errPayload, i, kl)
		}
		hs[i].Key = string(p[:kl])
		p = p[kl:]
		vl := binary.BigEndian.Uint32(p)
		p = p[4:]
		if uint64(vl) > uint64(len(p)) {
			return nil, nil, fmt.Errorf("%w: header %d value length %d exceeds payload", errPayload, i, vl)
		}
		hs[i].Value = p[:vl:vl]
		p = p[vl:]
	}
	return hs, p, nil
}
