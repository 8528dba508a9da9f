package nvml

import (
	"context"
	"errors"
	"fmt"
	"time"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/heliostat-dev/heliostat/schemas"
)

// watchedEvents are the NVML event types WatchEvents asks for.
const watchedEvents = gonvml.EventTypeXidCriticalError | gonvml.EventTypeSingleBitEccError | gonvml.EventTypeDoubleBitEccError

// eventWaitMillis bounds one EventSet.Wait so that WatchEvents notices the end
// of its context, and GPUs that answer again, within about that long.
const eventWaitMillis = 500

const (
	// eventRetryMin and eventRetryMax bound the wait before WatchEvents
	// builds a new event set after waiting answered that a GPU is lost; the
	// wait doubles while new sets fail at once and starts again from
	// eventRetryMin once one works.
	eventRetryMin = time.Second
	eventRetryMax = LostRecheckInterval
	// eventLogInterval is how often failed waits are logged at most.
	eventLogInterval = time.Minute
)

// errGPUFound makes WatchEvents build a new event set at once: a GPU that was
// lost answers again and may be registered.
var errGPUFound = errors.New("nvml: a lost gpu answers again")

// WatchEvents registers every whole GPU for XID and ECC events (those it
// supports) and calls emit for each event until ctx is done, when it returns
// nil. Events carry the time they were received (the now func given to New)
// and the UUID of the whole GPU, also for events of a MIG instance.
//
// A GPU that cannot be registered is logged and left out, and so is a GPU
// that Collect found lost. When waiting answers that a GPU is lost,
// WatchEvents logs it (at most once a minute), waits a second, doubling up to
// LostRecheckInterval while that keeps happening, and registers the GPUs that
// answer in a new event set: their events in between are missed. It does the
// same, at once, when a lost GPU answers Collect again. When no GPU supports
// any of the events it just waits for ctx. It fails only when NVML as a whole
// stops answering (an error wrapping ErrDriverLost) or waiting fails for
// another reason.
func (s *Source) WatchEvents(ctx context.Context, emit func(schemas.GPUEvent)) error {
	delay := eventRetryMin
	for {
		worked, err := s.watchSet(ctx, emit)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, errGPUFound):
			continue
		case !errors.Is(err, ErrDeviceLost):
			return err
		}
		if worked {
			delay = eventRetryMin
		}
		if n, ok := s.logs.Note("events", s.now(), 1); ok {
			s.logger.Warn("nvml event wait failed, watching the gpus that answer again",
				"err", err, "retry_in", delay, "failures", n)
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
		delay = min(2*delay, eventRetryMax)
	}
}

// watchSet watches the events of the GPUs that answer with one event set
// until ctx is done (nil) or the set fails. worked reports whether a wait
// succeeded or timed out before the failure.
func (s *Source) watchSet(ctx context.Context, emit func(schemas.GPUEvent)) (worked bool, err error) {
	found := s.found.Load()
	set, ret := s.lib.EventSetCreate()
	if absent(ret) {
		s.logger.Info("nvml events not supported", "err", ret)
		<-ctx.Done()
		return false, nil
	}
	if ret != gonvml.SUCCESS {
		return false, fmt.Errorf("nvml: create event set: %w", retErr(ret))
	}
	defer set.Free()

	registered, lost := s.register(set)
	if registered == 0 {
		if lost > 0 {
			return false, fmt.Errorf("nvml: watch events: %d gpus lost, no other gpu registered: %w", lost, ErrDeviceLost)
		}
		s.logger.Info("nvml events not supported by any gpu")
		<-ctx.Done()
		return false, nil
	}

	for ctx.Err() == nil {
		data, ret := set.Wait(eventWaitMillis)
		switch ret {
		case gonvml.SUCCESS:
			worked = true
		case gonvml.ERROR_TIMEOUT:
			worked = true
			if lost > 0 && s.found.Load() != found {
				return worked, errGPUFound
			}
			continue
		default:
			return worked, fmt.Errorf("nvml: wait for events: %w", retErr(ret))
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
	return worked, nil
}

// register registers every whole GPU that answers for the events it
// supports. It returns how many it registered and how many it left out as
// lost: lost to Collect, or answering so now.
func (s *Source) register(set gonvml.EventSet) (registered, lost int) {
	for _, d := range s.deviceList() {
		if d.parent != nil {
			continue
		}
		s.lostMu.Lock()
		// A GPU with a call stalled would stall registering too.
		known := d.lostErr != nil || !d.stalledSince.IsZero()
		s.lostMu.Unlock()
		if known {
			lost++
			continue
		}
		// A GPU that cannot be registered is logged and left out rather
		// than failing the watch: its samples are still worth collecting.
		supported, ret := d.h.GetSupportedEventTypes()
		if ret != gonvml.SUCCESS {
			lost += s.registerFailed(d, "nvml supported event types unknown", ret)
			continue
		}
		mask := supported & watchedEvents
		if mask == 0 {
			continue
		}
		if ret := d.h.RegisterEvents(mask, set); ret != gonvml.SUCCESS {
			lost += s.registerFailed(d, "nvml register events failed", ret, "event_mask", mask)
			continue
		}
		registered++
	}
	return registered, lost
}

// registerFailed logs why d could not be registered, with msg unless d is
// lost (then at most once a minute, as sets are made again), and returns 1 if
// it is lost, else 0.
func (s *Source) registerFailed(d *device, msg string, ret gonvml.Return, attrs ...any) int {
	switch {
	case lostGPU(ret):
		if _, ok := s.logs.Note("register "+d.gpu.UUID, s.now(), 1); ok {
			s.logger.Warn("nvml gpu lost, its events are not watched", "gpu_uuid", d.gpu.UUID, "err", ret)
		}
		return 1
	case !absent(ret):
		s.logger.Warn(msg, append([]any{"gpu_uuid", d.gpu.UUID, "err", ret}, attrs...)...)
	}
	return 0
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
