// Package bom drops the UTF-8 byte-order mark some tools (Excel, PowerShell)
// write at the start of a CSV file. It must go before the CSV reader sees the
// bytes: after it, a quoted first header cell reads as `\uFEFF"job_id"`, a
// bare quote in an unquoted cell, and the whole file fails.
package bom

import (
	"bufio"
	"bytes"
	"io"
)

// mark is the UTF-8 encoding of U+FEFF.
var mark = []byte{0xEF, 0xBB, 0xBF}

// Skip returns a reader of r without the byte-order mark it may start with.
// A read error while looking for the mark is returned by the first Read.
func Skip(r io.Reader) io.Reader {
	br := bufio.NewReader(r)
	if b, _ := br.Peek(len(mark)); bytes.Equal(b, mark) {
		br.Discard(len(mark)) // cannot fail: the bytes are buffered
	}
	return br
}
