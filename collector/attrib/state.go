package attrib

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"time"
	"unicode/utf8"

	"github.com/heliostat-dev/heliostat/internal/atomicfile"
	"github.com/heliostat-dev/heliostat/schemas"
)

// stateVersion is the version of the state file's format.
const stateVersion = 1

// maxStateBytes bounds the state file read: open intervals are a few per GPU
// and pending records are bounded by maxPending.
const maxStateBytes = 64 << 20

// State is what an Attributor keeps across restarts: the open intervals and
// the records it has not yet managed to publish.
type State struct {
	Open    []Interval
	Pending []schemas.Alloc
}

// stateFile is the JSON form of State.
type stateFile struct {
	Version int           `json:"version"`
	Open    []stateRecord `json:"open"`
	Pending []stateRecord `json:"pending"`
}

// stateRecord is an open interval (Misses, LastSeenMillis) or a pending
// record (Host, EndMillis).
type stateRecord struct {
	Host           string `json:"host,omitempty"`
	GPUIndex       int64  `json:"gpu_index"`
	GPUUUID        string `json:"gpu_uuid"`
	MIGUUID        string `json:"mig_uuid,omitempty"`
	JobID          string `json:"job_id"`
	User           string `json:"user,omitempty"`
	Source         uint8  `json:"source"`
	StartMillis    int64  `json:"start_ms"`
	EndMillis      int64  `json:"end_ms,omitempty"`
	LastSeenMillis int64  `json:"last_seen_ms,omitempty"`
	Misses         int    `json:"misses,omitempty"`
}

// LoadState reads the state file at path. A missing file is an empty State.
// Errors name the path and, for a bad record, its field.
func LoadState(path string) (State, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return State{}, nil
	}
	if err != nil {
		return State{}, fmt.Errorf("attrib: load state: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxStateBytes+1))
	if err != nil {
		return State{}, fmt.Errorf("attrib: load state: %w", err)
	}
	if len(data) > maxStateBytes {
		return State{}, fmt.Errorf("attrib: load state %s: longer than %d bytes", path, maxStateBytes)
	}
	st, err := DecodeState(data)
	if err != nil {
		return State{}, fmt.Errorf("attrib: load state %s: %w", path, err)
	}
	return st, nil
}

// DecodeState decodes the contents of a state file, checking every record.
func DecodeState(data []byte) (State, error) {
	var sf stateFile
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&sf); err != nil {
		return State{}, fmt.Errorf("decode: %w", err)
	}
	if sf.Version != stateVersion {
		return State{}, fmt.Errorf("version %d, want %d", sf.Version, stateVersion)
	}
	var st State
	for i, r := range sf.Open {
		if err := r.check(false); err != nil {
			return State{}, fmt.Errorf("open[%d].%w", i, err)
		}
		st.Open = append(st.Open, Interval{
			GPU:      GPU{Index: int(r.GPUIndex), UUID: r.GPUUUID, MIGUUID: r.MIGUUID},
			JobID:    r.JobID,
			User:     r.User,
			Source:   schemas.AllocSource(r.Source),
			Start:    time.UnixMilli(r.StartMillis).UTC(),
			LastSeen: time.UnixMilli(r.LastSeenMillis).UTC(),
			Misses:   r.Misses,
		})
	}
	for i, r := range sf.Pending {
		if err := r.check(true); err != nil {
			return State{}, fmt.Errorf("pending[%d].%w", i, err)
		}
		st.Pending = append(st.Pending, schemas.Alloc{
			Host: r.Host, GPUIndex: r.GPUIndex, GPUUUID: r.GPUUUID, MIGUUID: r.MIGUUID, JobID: r.JobID,
			User: r.User, StartMillis: r.StartMillis, EndMillis: r.EndMillis, Source: schemas.AllocSource(r.Source),
		})
	}
	return st, nil
}

// check validates r; the error starts with the field's name.
func (r *stateRecord) check(pending bool) error {
	for _, s := range []struct{ name, v string }{
		{"host", r.Host}, {"gpu_uuid", r.GPUUUID}, {"mig_uuid", r.MIGUUID}, {"job_id", r.JobID}, {"user", r.User},
	} {
		if len(s.v) > schemas.MaxStringLen || !utf8.ValidString(s.v) {
			return fmt.Errorf("%s: not UTF-8 of at most %d bytes", s.name, schemas.MaxStringLen)
		}
	}
	switch {
	case r.JobID == "":
		return errors.New("job_id: empty")
	case r.GPUIndex < 0 || r.GPUIndex > 1<<31-1:
		return fmt.Errorf("gpu_index: %d out of range", r.GPUIndex)
	case r.Source != uint8(schemas.AllocCgroup) && r.Source != uint8(schemas.AllocEnviron):
		return fmt.Errorf("source: %d is neither cgroup nor environ", r.Source)
	case r.StartMillis <= 0:
		return fmt.Errorf("start_ms: %d is not positive", r.StartMillis)
	case r.EndMillis != 0 && r.EndMillis < r.StartMillis:
		return fmt.Errorf("end_ms: %d before start_ms %d", r.EndMillis, r.StartMillis)
	case !pending && (r.Host != "" || r.EndMillis != 0):
		return errors.New("host: an open interval has no host or end_ms")
	case !pending && r.LastSeenMillis < r.StartMillis:
		return fmt.Errorf("last_seen_ms: %d before start_ms %d", r.LastSeenMillis, r.StartMillis)
	case r.Misses < 0:
		return fmt.Errorf("misses: %d is negative", r.Misses)
	case pending && (r.LastSeenMillis != 0 || r.Misses != 0):
		return errors.New("last_seen_ms: a pending record has no last_seen_ms or misses")
	}
	return nil
}

// EncodeState returns the contents of a state file holding st.
func EncodeState(st State) ([]byte, error) {
	sf := stateFile{Version: stateVersion, Open: []stateRecord{}, Pending: []stateRecord{}}
	for _, iv := range st.Open {
		sf.Open = append(sf.Open, stateRecord{
			GPUIndex: int64(iv.GPU.Index), GPUUUID: iv.GPU.UUID, MIGUUID: iv.GPU.MIGUUID, JobID: iv.JobID,
			User: iv.User, Source: uint8(iv.Source), StartMillis: iv.Start.UnixMilli(),
			LastSeenMillis: iv.LastSeen.UnixMilli(), Misses: iv.Misses,
		})
	}
	for _, a := range st.Pending {
		sf.Pending = append(sf.Pending, stateRecord{
			Host: a.Host, GPUIndex: a.GPUIndex, GPUUUID: a.GPUUUID, MIGUUID: a.MIGUUID, JobID: a.JobID,
			User: a.User, Source: uint8(a.Source), StartMillis: a.StartMillis, EndMillis: a.EndMillis,
		})
	}
	data, err := json.MarshalIndent(sf, "", "\t")
	if err != nil {
		return nil, fmt.Errorf("attrib: encode state: %w", err)
	}
	return append(data, '\n'), nil
}

// SaveState writes st to path atomically: to a temporary file in the same
// directory, synced, then renamed over path, so that a crash leaves either
// the old or the new state. The directory is created if missing.
func SaveState(path string, st State) error {
	data, err := EncodeState(st)
	if err != nil {
		return err
	}
	if err := atomicfile.Write(path, data); err != nil {
		return fmt.Errorf("attrib: save state: %w", err)
	}
	return nil
}
