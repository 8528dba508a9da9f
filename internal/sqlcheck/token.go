package sqlcheck

import "strings"

type kind int

const (
	word   kind = iota // a bare name, keyword or number
	quoted             // a `quoted` or "quoted" name
	other              // punctuation, a string literal or a placeholder
)

// token is one token of SQL text.
type token struct {
	text string
	kind kind
	pos  int // byte offset in the text
	// match is, for "(" and ")", the index of the other parenthesis of the
	// pair: the last token for a "(" never closed, itself for a ")" never
	// opened.
	match int
}

// is reports whether t is the keyword kw (upper case), in any case.
func (t token) is(kw string) bool { return t.kind == word && strings.EqualFold(t.text, kw) }

// tokenize splits SQL text into tokens, leaving out white space, comments
// (-- to the end of the line, /* … */) and the contents of string literals.
func tokenize(s string) []token {
	var toks []token
	var open []int // indexes of the "(" not yet closed
	for i := 0; i < len(s); {
		c := s[i]
		start := i
		k := other
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
			continue
		case strings.HasPrefix(s[i:], "--"):
			i = skipPast(s, i, "\n")
			continue
		case strings.HasPrefix(s[i:], "/*"):
			i = skipPast(s, i+2, "*/")
			continue
		case c == '\'' || c == '"' || c == '`':
			i = quoteEnd(s, i)
			if c != '\'' {
				k = quoted
			}
		case c == '{' || strings.HasPrefix(s[i:], "${"):
			// a runner placeholder {name} or a Grafana variable ${name:format}
			i = skipPast(s, i, "}")
		case c == '$':
			i = nameEnd(s, i+1)
		case isNameByte(c):
			i = nameEnd(s, i)
			k = word
		default:
			i++
		}
		toks = append(toks, token{text: s[start:i], kind: k, pos: start})
		n := len(toks) - 1
		switch toks[n].text {
		case "(":
			open = append(open, n)
		case ")":
			toks[n].match = n
			if len(open) > 0 {
				o := open[len(open)-1]
				open = open[:len(open)-1]
				toks[n].match, toks[o].match = o, n
			}
		}
	}
	for _, o := range open {
		toks[o].match = len(toks) - 1
	}
	return toks
}

// skipPast returns the offset just past the first end at or after i, or
// len(s) when there is none.
func skipPast(s string, i int, end string) int {
	if j := strings.Index(s[i:], end); j >= 0 {
		return i + j + len(end)
	}
	return len(s)
}

// quoteEnd returns the offset just past the quoted text that starts at i;
// a backslash escapes the next character. A doubled quote inside is read as
// the end of one quoted text and the start of another, which does not matter
// here.
func quoteEnd(s string, i int) int {
	q := s[i]
	for j := i + 1; j < len(s); j++ {
		switch s[j] {
		case '\\':
			j++
		case q:
			return j + 1
		}
	}
	return len(s)
}

func nameEnd(s string, i int) int {
	for i < len(s) && isNameByte(s[i]) {
		i++
	}
	return i
}

// isNameByte reports whether c can be part of a name or number; bytes of
// multi-byte characters count, as ClickHouse allows them in names.
func isNameByte(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c >= 0x80
}
