package api

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/url"
	"slices"
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
	// MemReqBytes is the memory requested in all, in bytes; 0: unknown.
	// Jobs of the user's with the same request shape and memory are the
	// closest history.
	MemReqBytes int64 `json:"mem_req_bytes"`
	// GPUType is the type of GPU asked for, as the scheduler names it
	// ("a100"); "": any or unknown. The user's runs of the same request
	// shape on that type are the closest history.
	GPUType string `json:"gpu_type"`
}

// Limits of a PredictRequest.
const (
	maxGPUs       = 100_000
	maxTimeLimitS = 10 * 365 * 24 * 3600
	maxString     = 256
	maxMemBytes   = 1 << 50 // 1 PiB
	maxGPUType    = 64
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
	if err := exactNames(b); err != nil {
		return req, time.Time{}, err
	}
	for _, f := range []struct{ name, v string }{{"user", req.User}, {"name", req.Name}, {"partition", req.Partition}} {
		// Characters, as openapi.yaml's maxLength counts.
		if utf8.RuneCountInString(f.v) > maxString {
			return req, time.Time{}, bad(f.name, "longer than %d characters", maxString)
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
	if req.MemReqBytes < 0 || req.MemReqBytes > maxMemBytes {
		return req, time.Time{}, bad("mem_req_bytes", "%d is not in 0..%d", req.MemReqBytes, int64(maxMemBytes))
	}
	if !gpuTypeName(req.GPUType) {
		return req, time.Time{}, bad("gpu_type", "%q is not a GPU type: up to %d letters, digits, '_', '-' and '.'", req.GPUType, maxGPUType)
	}
	var submit time.Time
	if req.SubmitTime != "" {
		t, err := time.Parse(time.RFC3339, req.SubmitTime)
		if err != nil {
			return req, time.Time{}, bad("submit_time", "%q is not an RFC 3339 time", req.SubmitTime)
		}
		submit = t.UTC()
		if submit.Year() < 2000 || submit.Year() > 2200 {
			return req, time.Time{}, bad("submit_time", "%q is not between 2000-01-01T00:00:00Z and 2200-12-31T23:59:59Z", req.SubmitTime)
		}
	}
	return req, submit, nil
}

var errTooLarge = errors.New("api: body too large")

// exactNames returns an error naming the first name of the JSON object b
// that is not exactly one of PredictRequest's, or that is given twice:
// encoding/json also takes "USER" for "user", or a later "Gpus" over
// "gpus", which openapi.yaml's additionalProperties: false refuses, and
// keeps the last of two "gpus" without a word. b has decoded as a
// PredictRequest, so it is one object whose values are strings, numbers or
// null: it is scanned rather than read again with json.Decoder.Token, which
// tripled the allocations of POST /v1/predict (BenchmarkPredict).
func exactNames(b []byte) error {
	var seen uint8 // bit predictIndex(name) of each name read
	i := bytes.IndexByte(b, '{') + 1
	for {
		i = skipSpace(b, i)
		end, ok := stringEnd(b, i)
		if !ok {
			return nil // the object's end
		}
		k := predictIndex(b[i+1 : end-1])
		name := "" // set only when needed: it allocates
		if k < 0 {
			// Unescaped, it may be one ("\u0075ser").
			if json.Unmarshal(b[i:end], &name) == nil {
				k = predictIndex([]byte(name))
			}
			if k < 0 {
				return bad(name, "unknown field (names are case-sensitive)")
			}
		}
		if seen&(1<<k) != 0 {
			if name == "" {
				name = string(b[i+1 : end-1])
			}
			return bad(name, "given twice")
		}
		seen |= 1 << k
		// Past the colon and the value: a string, then up to the comma
		// (or the end) after it.
		i = skipSpace(b, skipSpace(b, end)+1)
		if end, ok := stringEnd(b, i); ok {
			i = end
		}
		for i < len(b) && b[i] != ',' && b[i] != '}' {
			i++
		}
		i++
	}
}

// predictIndex returns the place of name among PredictRequest's JSON
// names, from 0, or -1 when it is none of them.
func predictIndex(name []byte) int {
	switch string(name) {
	case "user":
		return 0
	case "name":
		return 1
	case "partition":
		return 2
	case "gpus":
		return 3
	case "time_limit_s":
		return 4
	case "submit_time":
		return 5
	case "mem_req_bytes":
		return 6
	case "gpu_type":
		return 7
	}
	return -1
}

// gpuTypeName reports whether s may name a GPU type: empty, or up to
// maxGPUType ASCII letters, digits, '_', '-' and '.' (Slurm's gres types,
// "a100", "nvidia_h100_80gb_hbm3", "1g.10gb").
func gpuTypeName(s string) bool {
	if len(s) > maxGPUType {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

// predictName reports whether name is one of PredictRequest's JSON names.
func predictName(name []byte) bool { return predictIndex(name) >= 0 }

// stringEnd returns the index after the JSON string that starts at b[i],
// and false when none does.
func stringEnd(b []byte, i int) (int, bool) {
	if i >= len(b) || b[i] != '"' {
		return 0, false
	}
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1, true
		}
	}
	return 0, false
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

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

// parseQuery reads the raw query of an endpoint that allows the parameters
// named: limit (1..maxLimit, default def), since (RFC 3339 or Unix seconds),
// kind, target, partition and before (an audit cursor). It refuses a query
// that does not parse, then any other parameter; errors name the first
// parameter at fault, in the query's order.
func parseQuery(raw string, def, maxLimit int, allowed ...string) (listQuery, error) {
	q := listQuery{Limit: def}
	params, err := splitQuery(raw)
	if err != nil {
		return q, err
	}
	for i, p := range params {
		k, val := p.name, p.value
		if k == "" {
			return q, bad("query", "parameter without a name")
		}
		if !slices.Contains(allowed, k) {
			return q, bad(k, "unknown query parameter")
		}
		// The first of k's: an earlier one would have been refused.
		times := 0
		for _, o := range params[i:] {
			if o.name == k {
				times++
			}
		}
		if times != 1 {
			return q, bad(k, "given %d times", times)
		}
		if !utf8.ValidString(val) {
			return q, bad(k, "not UTF-8")
		}
		if utf8.RuneCountInString(val) > maxString {
			return q, bad(k, "longer than %d characters", maxString)
		}
		switch k {
		case "limit":
			n, err := strconv.Atoi(val)
			if err != nil || n < 1 || n > maxLimit {
				return q, bad("limit", "%q is not an integer in 1..%d", val, maxLimit)
			}
			q.Limit = n
		case "since":
			t, err := parseSince(val)
			if err != nil {
				return q, err
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

// queryParam is one name=value of a query, unescaped.
type queryParam struct{ name, value string }

// splitQuery returns the parameters of a raw query in its order. Where
// url.ParseQuery drops a parameter it cannot read (a bad %-escape, a ";")
// and reads on, a filter dropped would widen the answer: splitQuery refuses
// the query, naming the parameter when its name can be read, else "query".
func splitQuery(raw string) ([]queryParam, error) {
	var params []queryParam
	for raw != "" {
		var p string
		p, raw, _ = strings.Cut(raw, "&")
		if p == "" {
			continue
		}
		rawName, rawValue, _ := strings.Cut(p, "=")
		name, err := url.QueryUnescape(rawName)
		if err != nil || strings.Contains(rawName, ";") {
			return nil, bad("query", "%q is not a parameter name: URL-encode it, without \";\"", rawName)
		}
		field := cmp.Or(name, "query")
		if strings.Contains(rawValue, ";") {
			return nil, bad(field, "%q holds a \";\": separate parameters with \"&\" and encode a \";\" as %%3B", rawValue)
		}
		value, err := url.QueryUnescape(rawValue)
		if err != nil {
			return nil, bad(field, "not URL-encoded: %v", err)
		}
		params = append(params, queryParam{name, value})
	}
	return params, nil
}

// maxSinceUnix is the last second a ClickHouse DateTime holds
// (2106-02-07T06:28:15Z): the audit table's query would wrap a later since
// around to 1970, and list every action.
const maxSinceUnix = 1<<32 - 1

// parseSince reads since: RFC 3339 or Unix seconds, from 1970-01-01 to
// maxSinceUnix.
func parseSince(s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return time.Time{}, bad("since", "%q is neither RFC 3339 nor Unix seconds", s)
		}
		// Clamped to just outside the range, so time.Unix cannot overflow.
		t = time.Unix(min(max(n, -1), maxSinceUnix+1), 0)
	}
	if t.Unix() < 0 || t.Unix() > maxSinceUnix {
		return time.Time{}, bad("since", "%q is not between 1970-01-01T00:00:00Z and 2106-02-07T06:28:15Z (Unix seconds 0..%d), the times the audit table holds",
			s, maxSinceUnix)
	}
	return t.UTC(), nil
}
