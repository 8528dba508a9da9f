package nvml

import (
	"context"
	"fmt"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/heliostat-dev/heliostat/schemas"
)

// watchedEvents are the NVML event types WatchEvents asks for.
const watchedEvents = gonvml.EventTypeXidCriticalError | gonvml.EventTypeSingleBitEccError | gonvml.EventTypeDoubleBitEccError

// eventWaitMillis bounds one EventSet.Wait so that WatchEvents notices the end
// of its context within about that long.
const eventWaitMillis = 500

// WatchEvents registers every whole GPU for XID and ECC events (those it
// supports) and calls emit for each event until ctx is done, when it returns
// nil. Events carry the time they were received (the now func given to New)
// and the UUID of the whole GPU, also for events of a MIG instance. When no
// GPU supports any of the events (or a GPU cannot be registered, which is
// logged) it watches the others or just waits for ctx; it fails only when
// waiting for events fails.
func (s *Source) WatchEvents(ctx context.Context, emit func(schemas.GPUEvent)) error {
	set, ret := s.lib.EventSetCreate()
	if absent(ret) {
		s.logger.Info("nvml events not supported", "err", ret)
		<-ctx.Done()
		return nil
	}
	if ret != gonvml.SUCCESS {
		return fmt.Errorf("nvml: create event set: %w", ret)
	}
	defer set.Free()

	registered := 0
	for _, d := range s.devices {
		if d.parent != nil {
			continue
		}
		// A GPU that cannot be registered is logged and left out rather than
		// failing the watch: its samples are still worth collecting, and a
		// lost GPU fails Collect anyway.
		supported, ret := d.h.GetSupportedEventTypes()
		if ret != gonvml.SUCCESS {
			if !absent(ret) {
				s.logger.Warn("nvml supported event types unknown", "gpu_uuid", d.gpu.UUID, "err", ret)
			}
			continue
		}
		mask := supported & watchedEvents
		if mask == 0 {
			continue
		}
		if ret := d.h.RegisterEvents(mask, set); ret != gonvml.SUCCESS {
			if !absent(ret) {
				s.logger.Warn("nvml register events failed", "gpu_uuid", d.gpu.UUID, "event_mask", mask, "err", ret)
			}
			continue
		}
		registered++
	}
	if registered == 0 {
		s.logger.Info("nvml events not supported by any gpu")
		<-ctx.Done()
		return nil
	}

	for ctx.Err() == nil {
		data, ret := set.Wait(eventWaitMillis)
		switch ret {
		case gonvml.SUCCESS:
		case gonvml.ERROR_TIMEOUT:
			continue
		default:
			return fmt.Errorf("nvml: wait for events: %w", ret)
		}
		e := schemas.GPUEvent{TSMillis: s.now().UnixMilli(), GPUUUID: s.uuidOf(data.Device), XID: data.EventData}
		switch {
		case data.EventType&gonvml.EventTypeXidCriticalError != 0:
			e.Type = schemas.EventXID
		case data.EventType&gonvml.EventTypeDoubleBitEccError != 0:
			e.Type = schemas.EventECCDoubleBit
		case data.EventType&gonvml.EventTypeSingleBitEccError != 0:
			e.Type = schemas.EventECCSingleBit
		default:
			s.logger.Debug("nvml event ignored", "gpu_uuid", e.GPUUUID, "event_type", data.EventType)
			continue
		}
		emit(e)
	}
	return nil
}

// uuidOf returns the UUID of the device an event came from. It asks the
// device rather than comparing handles, which are interface values whose
// dynamic types need not be comparable. An event whose device cannot be named
// is still emitted, with an empty UUID: losing an XID is worse.
func (s *Source) uuidOf(h gonvml.Device) string {
	if h == nil {
		return ""
	}
	uuid, ret := h.GetUUID()
	if ret != gonvml.SUCCESS {
		s.logger.Warn("nvml event device unknown", "err", ret)
		return ""
	}
	return uuid
}
