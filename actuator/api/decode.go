package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/heliostat-dev/heliostat/actuator/audit"
)

// fieldError is a bad request naming the field at fault.
type fieldError struct {
	Field  string
	Reason string
	// Code is the HTTP status; 0: 400.
	Code int
}

func (e *fieldError) Error() string {
	if e.Field == "" {
		return e.Reason
	}
	return e.Field + ": " + e.Reason
}

func bad(field, format string, args ...any) error {
	return &fieldError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

// PredictRequest is the body of POST /v1/predict: a job as it would be
// submitted.
type PredictRequest struct {
	// User submitting the job; required.
	User string `json:"user"`
	// Name is the job's name (or command hash); optional.
	Name string `json:"name"`
	// Partition (or virtual cluster); optional.
	Partition string `json:"partition"`
	// GPUs requested, 0..maxGPUs.
	GPUs int `json:"gpus"`
	// TimeLimitS is the requested time limit in seconds; 0: none.
	TimeLimitS float64 `json:"time_limit_s"`
	// SubmitTime is when it is (or was) submitted, RFC 3339; empty: now.
	SubmitTime string `json:"submit_time"`
}

// Limits of a PredictRequest.
const (
	maxGPUs       = 100_000
	maxTimeLimitS = 10 * 365 * 24 * 3600
	maxString     = 256
)

// decodePredict reads and checks a PredictRequest from a body of at most
// limit bytes. Errors name the field (or the body) at fault.
func decodePredict(r io.Reader, limit int64) (PredictRequest, time.Time, error) {
	var req PredictRequest
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return req, time.Time{}, bad("body", "read: %v", err)
	}
	if int64(len(b)) > limit {
		return req, time.Time{}, errTooLarge
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return req, time.Time{}, bad("body", "empty; want a JSON object")
	}
	if !utf8.Valid(b) {
		return req, time.Time{}, bad("body", "not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return req, time.Time{}, jsonError(err)
	}
	if dec.More() {
		return req, time.Time{}, bad("body", "more than one JSON value")
	}
	if _, err := dec.Token(); err != io.EOF {
		return req, time.Time{}, bad("body", "trailing data after the JSON object")
	}
	for _, f := range []struct{ name, v string }{{"user", req.User}, {"name", req.Name}, {"partition", req.Partition}} {
		if len(f.v) > maxString {
			return req, time.Time{}, bad(f.name, "longer than %d bytes", maxString)
		}
		if !utf8.ValidString(f.v) {
			return req, time.Time{}, bad(f.name, "not valid UTF-8")
		}
	}
	if strings.TrimSpace(req.User) == "" {
		return req, time.Time{}, bad("user", "required")
	}
	if req.GPUs < 0 || req.GPUs > maxGPUs {
		return req, time.Time{}, bad("gpus", "%d is not in 0..%d", req.GPUs, maxGPUs)
	}
	if math.IsNaN(req.TimeLimitS) || req.TimeLimitS < 0 || req.TimeLimitS > maxTimeLimitS {
		return req, time.Time{}, bad("time_limit_s", "%v is not in 0..%d", req.TimeLimitS, maxTimeLimitS)
	}
	var submit time.Time
	if req.SubmitTime != "" {
		t, err := time.Parse(time.RFC3339, req.SubmitTime)
		if err != nil {
			return req, time.Time{}, bad("submit_time", "%q is not an RFC 3339 time", req.SubmitTime)
		}
		if t.Year() < 2000 || t.Year() > 2200 {
			return req, time.Time{}, bad("submit_time", "%q is not between 2000 and 2200", req.SubmitTime)
		}
		submit = t.UTC()
	}
	return req, submit, nil
}

var errTooLarge = errors.New("api: body too large")

// jsonError turns a decoding error into a fieldError naming the field or
// the offset.
func jsonError(err error) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return bad("body", "invalid JSON at offset %d: %v", se.Offset, se)
	case errors.As(err, &te):
		field := te.Field
		if field == "" {
			field = "body"
		}
		return bad(field, "want %s, got %s", te.Type, te.Value)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return bad("body", "truncated JSON")
	}
	msg := err.Error()
	if f, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
		return bad(strings.Trim(f, `"`), "unknown field")
	}
	return bad("body", "%s", msg)
}

// listQuery is the parsed query of a list endpoint.
type listQuery struct {
	Limit     int
	Since     time.Time
	Kind      string
	Target    string
	Partition string
	Before    audit.Cursor
}

// parseQuery reads limit (1..maxLimit, default def), since (RFC 3339 or Unix
// seconds), kind, target, partition and before (an audit cursor), rejecting
// any other parameter.
func parseQuery(v url.Values, def, maxLimit int, allowed ...string) (listQuery, error) {
	q := listQuery{Limit: def}
	for k, vals := range v {
		ok := k == "limit"
		for _, a := range allowed {
			ok = ok || k == a
		}
		if k == "" {
			return q, bad("query", "parameter without a name")
		}
		if !ok {
			return q, bad(k, "unknown query parameter")
		}
		if len(vals) != 1 {
			return q, bad(k, "given %d times", len(vals))
		}
		val := vals[0]
		if len(val) > maxString || !utf8.ValidString(val) {
			return q, bad(k, "longer than %d bytes or not UTF-8", maxString)
		}
		switch k {
		case "limit":
			n, err := strconv.Atoi(val)
			if err != nil || n < 1 || n > maxLimit {
				return q, bad("limit", "%q is not an integer in 1..%d", val, maxLimit)
			}
			q.Limit = n
		case "since":
			t, err := parseTime(val)
			if err != nil {
				return q, bad("since", "%q is neither RFC 3339 nor Unix seconds", val)
			}
			q.Since = t
		case "kind":
			switch val {
			case "set_priority", "power_down", "power_up":
			default:
				return q, bad("kind", "%q is not set_priority, power_down or power_up", val)
			}
			q.Kind = val
		case "target":
			q.Target = val
		case "partition":
			q.Partition = val
		case "before":
			c, err := audit.ParseCursor(val)
			if err != nil {
				return q, bad("before", "%q is not the \"next\" of a previous answer (Unix seconds, \"_\", action id)", val)
			}
			q.Before = c
		}
	}
	return q, nil
}

func parseTime(s string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t.UTC(), nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || n > 1<<33 {
		return time.Time{}, errors.New("bad time")
	}
	return time.Unix(n, 0).UTC(), nil
}
