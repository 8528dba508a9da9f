package schemas_test

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/heliostat-dev/heliostat/schemas"
)

func TestDecodeErrorError(t *testing.T) {
	err := &schemas.DecodeError{Message: "sample batch", Field: "samples[12].gpu", Offset: 345, Kind: schemas.ErrKindRange, Detail: "GPU 9 of a batch with 8 GPUs"}
	const want = "schemas: decode sample batch: samples[12].gpu at byte 345: out_of_range: GPU 9 of a batch with 8 GPUs"
	if got := err.Error(); got != want {
		t.Errorf("DecodeError.Error() = %q; want %q", got, want)
	}
}

// TestDecodeErrorKinds: DecodeErrorKinds lists every ErrKind constant of
// wire.go once, so that ingest's counters by kind all start at zero.
func TestDecodeErrorKinds(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "wire.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var consts []string
	for _, d := range f.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		for _, sp := range gd.Specs {
			for i, n := range sp.(*ast.ValueSpec).Names {
				if strings.HasPrefix(n.Name, "ErrKind") {
					v, err := strconv.Unquote(sp.(*ast.ValueSpec).Values[i].(*ast.BasicLit).Value)
					if err != nil {
						t.Fatalf("%s: %v", n.Name, err)
					}
					consts = append(consts, v)
				}
			}
		}
	}
	got := schemas.DecodeErrorKinds()
	slices.Sort(consts)
	slices.Sort(got)
	if len(consts) == 0 || !slices.Equal(got, consts) {
		t.Errorf("DecodeErrorKinds() = %v; wire.go's ErrKind constants are %v", got, consts)
	}
}

// decodeErrorCase is one malformed message and the DecodeError it must cause.
type decodeErrorCase struct {
	name  string
	msg   []byte
	field string // DecodeError.Field
	kind  string // DecodeError.Kind
	off   int    // DecodeError.Offset
}

// checkDecodeError checks that err, returned by decoder fn for tt.msg
// (a message of kind what), is the DecodeError that tt describes.
func checkDecodeError(t *testing.T, fn, what string, tt decodeErrorCase, err error) {
	t.Helper()
	var de *schemas.DecodeError
	if !errors.As(err, &de) {
		t.Fatalf("%s(%q) error = %v (%T); want a *schemas.DecodeError", fn, short(tt.msg), err, err)
	}
	if de.Kind != tt.kind {
		t.Errorf("%s(%q) kind = %v; want %v (%v)", fn, short(tt.msg), de.Kind, tt.kind, err)
	}
	if de.Field != tt.field {
		t.Errorf("%s(%q) field = %q; want %q (%v)", fn, short(tt.msg), de.Field, tt.field, err)
	}
	if de.Offset != tt.off {
		t.Errorf("%s(%q) offset = %d; want %d (%v)", fn, short(tt.msg), de.Offset, tt.off, err)
	}
	if de.Message != what {
		t.Errorf("%s(%q) message = %q; want %q", fn, short(tt.msg), de.Message, what)
	}
	text := err.Error()
	for _, part := range []string{"schemas: decode " + what + ": ", tt.field, fmt.Sprintf("at byte %d", tt.off), tt.kind} {
		if !strings.Contains(text, part) {
			t.Errorf("%s(%q) error %q does not contain %q", fn, short(tt.msg), text, part)
		}
	}
}

// short cuts long messages for failure output.
func short(msg []byte) []byte {
	if len(msg) > 80 {
		return msg[:80]
	}
	return msg
}
