// Package slurmfmt reads what Slurm's commands print, for the two parts of
// heliostat that talk to Slurm (the collector's job source and the
// actuator's adapter): host lists ("gpu[01-04],cpu7"), GRES and TRES strings
// ("gres:gpu:a100:2", "gpu:8(IDX:0-7)"), and the values of `squeue --json`
// and `sinfo --json` that changed shape between OpenAPI versions (22.05's
// plain numbers and state strings, later versions' {set, infinite, number}
// objects and state lists).
//
// Every parser returns an error that says what is wrong and never panics;
// each has a fuzz target.
package slurmfmt

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strconv"
)

// Int is an integer of Slurm's JSON output, which may be unset: Slurm 22.05
// (OpenAPI v0.0.38) writes a number or null, later versions
// {"set": …, "infinite": …, "number": …}. null, unset, infinite, and the
// unsigned NO_VAL64/INFINITE64 markers that do not fit int64 all read as
// unset. A whole number written as a float (1e3) is accepted.
type Int struct {
	V   int64
	Set bool
}

// UnmarshalJSON implements json.Unmarshaler. A type error names the value;
// encoding/json adds the field.
func (n *Int) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	*n = Int{}
	switch {
	case bytes.Equal(b, []byte("null")):
		return nil
	case len(b) > 0 && b[0] == '{':
		var v struct {
			Set      *bool `json:"set"`
			Infinite bool  `json:"infinite"`
			Number   *Int  `json:"number"`
		}
		if err := json.Unmarshal(b, &v); err != nil {
			return err
		}
		if v.Number == nil {
			return typeErr("object without \"number\"", reflect.TypeFor[int64]())
		}
		if (v.Set == nil || *v.Set) && !v.Infinite {
			*n = *v.Number
		}
		return nil
	}
	if i, err := strconv.ParseInt(string(b), 10, 64); err == nil {
		*n = Int{V: i, Set: true}
		return nil
	}
	if u, err := strconv.ParseUint(string(b), 10, 64); err == nil && u > math.MaxInt64 {
		return nil // NO_VAL64, INFINITE64
	}
	if f, err := strconv.ParseFloat(string(b), 64); err == nil && f == math.Trunc(f) && math.Abs(f) < 1<<53 {
		*n = Int{V: int64(f), Set: true}
		return nil
	}
	return typeErr(fmt.Sprintf("value %.40s", b), reflect.TypeFor[int64]())
}

// Or returns the value, or def when unset.
func (n Int) Or(def int64) int64 {
	if !n.Set {
		return def
	}
	return n.V
}

// States is a job or node state: Slurm 22.05 writes one string ("PENDING",
// "idle"), later versions a list of the base state and its flags (["IDLE",
// "POWERED_DOWN"]).
type States []string

// UnmarshalJSON implements json.Unmarshaler.
func (s *States) UnmarshalJSON(b []byte) error {
	var str string
	if err := json.Unmarshal(b, &str); err == nil {
		*s = States{str}
		return nil
	}
	var list []string
	if err := json.Unmarshal(b, &list); err != nil {
		return typeErr(fmt.Sprintf("value %.40s", b), reflect.TypeFor[[]string]())
	}
	*s = list
	return nil
}

// Base returns the base state, the first of the list; "" when there is none.
func (s States) Base() string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}

// typeErr is a type error that encoding/json completes with the field's
// name.
func typeErr(value string, t reflect.Type) error {
	return &json.UnmarshalTypeError{Value: value, Type: t}
}
