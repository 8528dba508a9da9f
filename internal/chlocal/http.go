package chlocal

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	chproto "github.com/ClickHouse/ch-go/proto"
	"github.com/ClickHouse/clickhouse-go/v2/lib/column"
	"github.com/ClickHouse/clickhouse-go/v2/lib/proto"
)

// Handler serves ClickHouse's HTTP interface on a DB, as far as
// clickhouse-go's HTTP protocol uses it: the statement in the body, or in
// the query parameter with an INSERT's data in the body; the output format
// from default_format; settings as other parameters, applied for the one
// statement; an error as status 500 with X-ClickHouse-Exception-Code and
// the exception's text. Compressed bodies (compress, decompress) and
// sessions are refused with 400, so that nothing is silently ignored. It
// runs one request at a time; a query_id is accepted and not used (no
// other query can be running under it), so system.processes never shows a
// query while another runs.
type Handler struct {
	db     *DB
	tmp    string // INSERT data lands here before the engine reads it
	logger *slog.Logger
	n      atomic.Uint64

	mu  sync.Mutex // one request at a time: its database and settings are the engine's
	cur string     // the database in use; "" before the first USE
}

// NewHandler serves db; tmpDir holds each INSERT's data while it is
// inserted.
func NewHandler(db *DB, tmpDir string, logger *slog.Logger) *Handler {
	return &Handler{db: db, tmp: tmpDir, logger: logger}
}

// The parameters that are not settings.
var params = map[string]bool{"query": true, "default_format": true, "client_protocol_version": true, "query_id": true, "quota_key": true, "database": true}

// refused names the parameters the handler does not implement.
var refused = map[string]string{
	"compress":   "compressed responses",
	"decompress": "compressed request bodies",
	"session_id": "sessions",
}

// insertFormat finds an INSERT whose data follows in another format: its
// text up to FORMAT, and the format's name.
var insertFormat = regexp.MustCompile(`(?is)^\s*(INSERT\s+INTO\s.*?)\s+FORMAT\s+([A-Za-z0-9_]+)\s*$`)

var settingName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/" && r.URL.Path != "" {
		http.Error(w, "chlocal: only / is served", http.StatusNotFound)
		return
	}
	if r.Header.Get("Content-Encoding") != "" {
		http.Error(w, "chlocal: Content-Encoding "+r.Header.Get("Content-Encoding")+" is not supported", http.StatusBadRequest)
		return
	}
	q := r.URL.Query()
	var settings []string
	for k, v := range q {
		if what, ok := refused[k]; ok {
			http.Error(w, fmt.Sprintf("chlocal: %s (%s=%s) are not supported", what, k, v[0]), http.StatusBadRequest)
			return
		}
		if strings.HasPrefix(k, "param_") {
			http.Error(w, "chlocal: query parameters ("+k+") are not supported", http.StatusBadRequest)
			return
		}
		if params[k] {
			continue
		}
		if !settingName.MatchString(k) {
			http.Error(w, fmt.Sprintf("chlocal: parameter %q is not a setting name", k), http.StatusBadRequest)
			return
		}
		settings = append(settings, k+" = '"+strings.ReplaceAll(strings.ReplaceAll(v[0], `\`, `\\`), `'`, `\'`)+"'")
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, "chlocal: read body: "+err.Error(), http.StatusBadRequest)
		return
	}
	format := q.Get("default_format")
	if format == "" {
		format = "TabSeparated"
	}
	out, err := h.run(q.Get("query"), body, format, q.Get("database"), settings)
	if err != nil {
		var ce *Error
		code := 1002 // UNKNOWN_EXCEPTION
		if errors.As(err, &ce) && ce.Code != 0 {
			code = ce.Code
		}
		h.logger.Debug("chlocal: query failed", "query", q.Get("query"), "err", err)
		w.Header().Set("X-ClickHouse-Exception-Code", strconv.Itoa(code))
		w.Header().Set("Content-Type", "text/plain; charset=UTF-8")
		w.WriteHeader(http.StatusInternalServerError)
		fmt.Fprintln(w, err.Error())
		return
	}
	if rev, _ := strconv.ParseUint(q.Get("client_protocol_version"), 10, 64); rev > 0 && format == "Native" && len(out) > 0 {
		if out, err = reencode(out, rev); err != nil {
			http.Error(w, "chlocal: "+err.Error(), http.StatusInternalServerError)
			return
		}
	}
	w.Header().Set("X-ClickHouse-Format", format)
	w.Header().Set("Content-Length", strconv.Itoa(len(out)))
	_, _ = w.Write(out)
}

// run executes one request's statement with its settings applied for it
// alone.
func (h *Handler) run(query string, body []byte, format, database string, settings []string) ([]byte, error) {
	stmt := body
	if query != "" {
		stmt = []byte(query)
		if len(bytes.TrimSpace(body)) > 0 {
			m := insertFormat.FindStringSubmatch(query)
			if m == nil {
				stmt = append(append(stmt, '\n'), body...)
			} else {
				// The data goes through a file: the engine reads it by
				// its format, whatever bytes it starts with.
				path := filepath.Join(h.tmp, fmt.Sprintf("insert-%d.%s", h.n.Add(1), strings.ToLower(m[2])))
				if err := os.WriteFile(path, body, 0o600); err != nil {
					return nil, fmt.Errorf("chlocal: keep INSERT data: %w", err)
				}
				defer os.Remove(path)
				stmt = []byte(fmt.Sprintf("%s SELECT * FROM file('%s', '%s')", m[1], path, m[2]))
			}
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if database == "" {
		database = "default"
	}
	if database != h.cur {
		if !settingName.MatchString(database) {
			return nil, fmt.Errorf("chlocal: database %q is not a plain identifier", database)
		}
		if _, err := h.db.Query([]byte("USE "+database), format); err != nil {
			return nil, err
		}
		h.cur = database
	}
	for i, s := range settings {
		if _, err := h.db.Query([]byte("SET "+s), format); err != nil {
			h.reset(settings[:i])
			return nil, err
		}
	}
	out, err := h.db.Query(stmt, format)
	h.reset(settings)
	return out, err
}

// reset puts settings back to their defaults.
func (h *Handler) reset(settings []string) {
	for _, s := range settings {
		name, _, _ := strings.Cut(s, " ")
		if _, err := h.db.Query([]byte("SET "+name+" = DEFAULT"), "TabSeparated"); err != nil {
			h.logger.Warn("chlocal: reset setting", "setting", name, "err", err)
		}
	}
}

// reencode rewrites the engine's Native output (blocks as a file holds
// them) the way a server writes them for a client of protocol revision
// rev: each block with its block info and, from revision 54454, a flag
// per column saying it has no custom serialization.
func reencode(native []byte, rev uint64) ([]byte, error) {
	r := chproto.NewReader(bytes.NewReader(native))
	var out chproto.Buffer
	sc := column.ServerContext{Revision: rev, Timezone: time.UTC}
	for {
		b := proto.Block{ServerContext: &sc}
		if err := b.Decode(r, 0); err != nil {
			if errors.Is(err, io.EOF) {
				return out.Buf, nil
			}
			return nil, fmt.Errorf("re-encode Native output for protocol revision %d: %w", rev, err)
		}
		if err := b.Encode(&out, rev); err != nil {
			return nil, fmt.Errorf("re-encode Native output for protocol revision %d: %w", rev, err)
		}
	}
}
