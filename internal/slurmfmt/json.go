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

// ExitCode is a job's exit code in `squeue --json`: a wait(2) status in
// Slurm 22.05 to 23.02 (a number, or an Int object), and from OpenAPI v0.0.40
// (Slurm 23.11) an object {"status": […], "return_code": Int, "signal":
// {"id": Int, "name": …}}. Code is what a shell reports: the exit status, or
// 128 plus the signal that killed the job.
type ExitCode struct {
	Code int64
	Set  bool
}

// UnmarshalJSON implements json.Unmarshaler.
func (c *ExitCode) UnmarshalJSON(b []byte) error {
	*c = ExitCode{}
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '{' {
		var v struct {
			Status     []string `json:"status"`
			ReturnCode *Int     `json:"return_code"`
			Signal     *struct {
				ID Int `json:"id"`
			} `json:"signal"`
		}
		if err := json.Unmarshal(b, &v); err != nil {
			return err
		}
		if v.Status != nil || v.ReturnCode != nil || v.Signal != nil {
			switch {
			case v.Signal != nil && v.Signal.ID.Set && v.Signal.ID.V > 0 && v.Signal.ID.V < 128:
				*c = ExitCode{Code: 128 + v.Signal.ID.V, Set: true}
			case v.ReturnCode != nil && v.ReturnCode.Set:
				*c = ExitCode{Code: v.ReturnCode.V, Set: true}
			}
			return nil
		}
	}
	var status Int
	if err := status.UnmarshalJSON(b); err != nil {
		return err
	}
	if status.Set {
		*c = ExitCode{Code: WaitStatus(status.V), Set: true}
	}
	return nil
}

// Or returns the code, or def when unset.
func (c ExitCode) Or(def int64) int64 {
	if !c.Set {
		return def
	}
	return c.Code
}

// WaitStatus turns a wait(2) status into what a shell reports: the exit
// status, or 128 plus the signal for a process killed by a signal.
func WaitStatus(status int64) int64 {
	if sig := status & 0x7f; sig != 0 {
		return 128 + sig
	}
	return (status >> 8) & 0xff
}
