package api

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// spec is openapi.yaml as far as answers are checked against it: each
// operation's responses and the schemas they name. Of a schema it reads
// type, nullable, required, enum, properties and items, the keywords the
// file's responses use.
type spec struct {
	Paths      map[string]map[string]struct{ Responses map[string]specResponse } `yaml:"paths"`
	Components struct {
		Schemas   map[string]*schema      `yaml:"schemas"`
		Responses map[string]specResponse `yaml:"responses"`
	} `yaml:"components"`
}

type specResponse struct {
	Ref     string                              `yaml:"$ref"`
	Content map[string]struct{ Schema *schema } `yaml:"content"`
}

type schema struct {
	Ref        string             `yaml:"$ref"`
	Type       string             `yaml:"type"`
	Nullable   bool               `yaml:"nullable"`
	Required   []string           `yaml:"required"`
	Enum       []string           `yaml:"enum"`
	Properties map[string]*schema `yaml:"properties"`
	Items      *schema            `yaml:"items"`
}

func loadSpec(t *testing.T) *spec {
	t.Helper()
	var sp spec
	if err := yaml.Unmarshal(OpenAPI, &sp); err != nil {
		t.Fatalf("openapi.yaml: %v", err)
	}
	return &sp
}

// answerSchema returns the schema of the JSON body of method path's answer
// with status code (nil: not JSON), and whether openapi.yaml documents that
// answer. A route or method it does not document answers errors only, each
// an Error, as its description says.
func (sp *spec) answerSchema(method, path string, code int) (*schema, bool) {
	op, ok := sp.Paths[path][strings.ToLower(method)]
	if !ok {
		return sp.Components.Schemas["Error"], code >= 400
	}
	r, ok := op.Responses[strconv.Itoa(code)]
	if !ok {
		return nil, false
	}
	if name, ok := strings.CutPrefix(r.Ref, "#/components/responses/"); ok {
		r = sp.Components.Responses[name]
	}
	if c, ok := r.Content["application/json"]; ok {
		return c.Schema, true
	}
	return nil, true
}

// check appends to errs where v, a JSON value decoded with UseNumber, does
// not fit s; at names v.
func (sp *spec) check(at string, s *schema, v any, errs *[]string) {
	if s == nil {
		return
	}
	if name, ok := strings.CutPrefix(s.Ref, "#/components/schemas/"); ok {
		s = sp.Components.Schemas[name]
	}
	if v == nil {
		if !s.Nullable && s.Type != "" {
			*errs = append(*errs, fmt.Sprintf("%s: null; the schema's %s is not nullable", at, s.Type))
		}
		return
	}
	if len(s.Enum) > 0 && !slices.Contains(s.Enum, fmt.Sprint(v)) {
		*errs = append(*errs, fmt.Sprintf("%s: %v is not one of %q", at, v, s.Enum))
	}
	var ok bool
	switch s.Type {
	case "object":
		var o map[string]any
		if o, ok = v.(map[string]any); !ok {
			break
		}
		for _, r := range s.Required {
			if _, ok := o[r]; !ok {
				*errs = append(*errs, fmt.Sprintf("%s: required %q missing", at, r))
			}
		}
		for _, k := range slices.Sorted(maps.Keys(o)) {
			if ps, ok := s.Properties[k]; ok {
				sp.check(at+"."+k, ps, o[k], errs)
			} else if s.Properties != nil {
				*errs = append(*errs, fmt.Sprintf("%s.%s: not a property of the schema", at, k))
			}
		}
	case "array":
		var a []any
		if a, ok = v.([]any); ok {
			for i, e := range a {
				sp.check(fmt.Sprintf("%s[%d]", at, i), s.Items, e, errs)
			}
		}
	case "string":
		_, ok = v.(string)
	case "integer":
		n, isNum := v.(json.Number)
		ok = isNum && !strings.ContainsAny(string(n), ".eE")
	case "number":
		_, ok = v.(json.Number)
	case "boolean":
		_, ok = v.(bool)
	default:
		ok = true
	}
	if !ok {
		*errs = append(*errs, fmt.Sprintf("%s: %s is not of type %s", at, v, s.Type))
	}
}

// checkAnswer checks w, the answer to method target, against openapi.yaml:
// its status is documented for the route and its body fits the schema.
func checkAnswer(t *testing.T, sp *spec, method, target string, w *httptest.ResponseRecorder) {
	t.Helper()
	path, _, _ := strings.Cut(target, "?")
	s, ok := sp.answerSchema(method, path, w.Code)
	if !ok {
		t.Errorf("%s %s = %d: openapi.yaml documents no such answer", method, target, w.Code)
		return
	}
	if s == nil {
		return
	}
	dec := json.NewDecoder(strings.NewReader(w.Body.String()))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Errorf("%s %s = %d: body is not JSON: %v", method, target, w.Code, err)
		return
	}
	var errs []string
	sp.check("body", s, v, &errs)
	for _, e := range errs {
		t.Errorf("%s %s = %d, not as openapi.yaml says: %s", method, target, w.Code, e)
	}
}
