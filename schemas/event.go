package schemas

import (
	"encoding/binary"
	"fmt"
)

// EventType is the kind of an NVML device event.
type EventType uint8

// GPU event types. The numbering is part of the wire format.
const (
	EventXID EventType = iota + 1
	EventECCSingleBit
	EventECCDoubleBit
	EventPState
	EventClock
	EventPowerSource

	numEventTypes = iota + 1
)

var eventTypeNames = [numEventTypes]string{
	EventXID:          "xid",
	EventECCSingleBit: "ecc_single_bit",
	EventECCDoubleBit: "ecc_double_bit",
	EventPState:       "pstate",
	EventClock:        "clock",
	EventPowerSource:  "power_source",
}

// String returns the name stored in ClickHouse's event_type column.
func (t EventType) String() string {
	if t == 0 || int(t) >= len(eventTypeNames) {
		return fmt.Sprintf("event_type(%d)", uint8(t))
	}
	return eventTypeNames[t]
}

// GPUEvent is one NVML device event. Driver events carry no timestamp of their
// own, so the time is when the collector received it.
type GPUEvent struct {
	TSMillis int64 // received, Unix milliseconds
	GPUUUID  string
	Type     EventType
	XID      uint64 // the XID for EventXID, else the event's data word
}

// EventBatch is one Kafka message on TopicGPUEvents: one host's events.
type EventBatch struct {
	Cluster string
	Host    string
	Events  []GPUEvent
}

// Event batch wire format, version 1 (after the header 'H' 'S' 'E' 1): cluster,
// host (strings), event count (uvarint), then per event: timestamp varint (Unix
// ms), GPU uuid string, type uvarint, XID uvarint.

// AppendEventBatch appends the encoding of b to dst. On error it returns dst as
// it was.
func AppendEventBatch(dst []byte, b *EventBatch) ([]byte, error) {
	out, err := appendEventBatch(dst, b)
	if err != nil {
		return dst, err
	}
	return out, nil
}

func appendEventBatch(dst []byte, b *EventBatch) ([]byte, error) {
	if err := checkString("cluster", b.Cluster); err != nil {
		return dst, err
	}
	if err := checkString("host", b.Host); err != nil {
		return dst, err
	}
	if len(b.Events) > MaxEventsPerMessage {
		return dst, fmt.Errorf("schemas: encode event batch: %d events exceeds %d", len(b.Events), MaxEventsPerMessage)
	}
	dst = appendHeader(dst, kindEventBatch)
	dst = appendString(dst, b.Cluster)
	dst = appendString(dst, b.Host)
	dst = binary.AppendUvarint(dst, uint64(len(b.Events)))
	for i := range b.Events {
		e := &b.Events[i]
		if err := checkString("gpu uuid", e.GPUUUID); err != nil {
			return dst, err
		}
		if e.Type == 0 || int(e.Type) >= numEventTypes {
			return dst, fmt.Errorf("schemas: encode event batch: events[%d].type %d is unknown", i, e.Type)
		}
		if p := TimeProblem(e.TSMillis); p != "" {
			return dst, fmt.Errorf("schemas: encode event batch: events[%d].ts: %s", i, p)
		}
		dst = binary.AppendVarint(dst, e.TSMillis)
		dst = appendString(dst, e.GPUUUID)
		dst = binary.AppendUvarint(dst, uint64(e.Type))
		dst = binary.AppendUvarint(dst, e.XID)
	}
	return dst, nil
}

// DecodeEventBatch decodes msg into b, reusing b's slices. On error the error is
// a *DecodeError.
func DecodeEventBatch(msg []byte, b *EventBatch) error {
	b.Cluster, b.Host, b.Events = "", "", b.Events[:0]
	r := reader{b: msg, msg: "event batch"}
	if err := r.header(kindEventBatch); err != nil {
		return err
	}
	var err error
	if b.Cluster, err = r.string("cluster", -1); err != nil {
		return err
	}
	if b.Host, err = r.string("host", -1); err != nil {
		return err
	}
	n, err := r.bounded("event count", -1, MaxEventsPerMessage)
	if err != nil {
		return err
	}
	if left := uint64(len(msg) - r.off); n > left/4 {
		return r.fail("event count", -1, ErrKindTruncated, fmt.Sprintf("%d events cannot fit in %d bytes", n, left))
	}
	for i := 0; i < int(n); i++ {
		var e GPUEvent
		if e.TSMillis, err = r.time("events[%d].ts", i); err != nil {
			return err
		}
		if e.GPUUUID, err = r.string("events[%d].gpu_uuid", i); err != nil {
			return err
		}
		start := r.off
		t, err := r.uvarint("events[%d].type", i)
		if err != nil {
			return err
		}
		if t == 0 || t >= numEventTypes {
			r.off = start
			return r.fail("events[%d].type", i, ErrKindUnknownEnum, fmt.Sprintf("event type %d", t))
		}
		e.Type = EventType(t)
		if e.XID, err = r.uvarint("events[%d].xid", i); err != nil {
			return err
		}
		b.Events = append(b.Events, e)
	}
	return r.end()
}
