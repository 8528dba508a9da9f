// Package chlocal runs a current ClickHouse inside the process, from chDB's
// libchdb.so (ClickHouse built as a library, published on npm as
// @chdb/lib-linux-x64-gnu), and serves the part of ClickHouse's HTTP
// interface that clickhouse-go's HTTP protocol uses. Debian ships only
// ClickHouse 18.16, while heliostat's users run current releases: the tests
// run the schema and the queries on both (schematest, HELIOSTAT_CHDB_LIB).
//
// The library is loaded with dlopen at Open, so nothing links against it and
// a build without it works; only one DB can be open in a process (chDB keeps
// one engine per process).
package chlocal

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdlib.h>
#include <stddef.h>

typedef struct {
	void *handle;
	void **(*connect)(int, char **);
	void (*close_conn)(void **);
	void *(*query_n)(void *, const char *, size_t, const char *, size_t);
	const char *(*error)(void *);
	char *(*buffer)(void *);
	size_t (*length)(void *);
	void (*destroy)(void *);
	void (*signals)(int);
	void **conn;
} chl_lib;

// chl_open loads the library at path and looks up the functions used;
// it returns NULL and sets *err (dlerror's text) on failure.
static chl_lib *chl_open(const char *path, const char **err) {
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		*err = dlerror();
		return NULL;
	}
	chl_lib *l = calloc(1, sizeof(chl_lib));
	l->handle = h;
	l->connect = dlsym(h, "chdb_connect");
	l->close_conn = dlsym(h, "chdb_close_conn");
	l->query_n = dlsym(h, "chdb_query_n");
	l->error = dlsym(h, "chdb_result_error");
	l->buffer = dlsym(h, "chdb_result_buffer");
	l->length = dlsym(h, "chdb_result_length");
	l->destroy = dlsym(h, "chdb_destroy_query_result");
	l->signals = dlsym(h, "chdb_set_signal_handlers_enabled");
	if (!l->connect || !l->close_conn || !l->query_n || !l->error || !l->buffer || !l->length || !l->destroy) {
		*err = "libchdb lacks one of chdb_connect, chdb_close_conn, chdb_query_n, chdb_result_error, chdb_result_buffer, chdb_result_length, chdb_destroy_query_result";
		free(l);
		return NULL;
	}
	return l;
}

// chl_connect starts the engine with argv (clickhouse-local's options);
// the Go runtime keeps its own signal handlers.
static int chl_connect(chl_lib *l, int argc, char **argv) {
	if (l->signals) l->signals(0);
	l->conn = l->connect(argc, argv);
	return l->conn != NULL && *l->conn != NULL;
}

static void *chl_query(chl_lib *l, const char *q, size_t qn, const char *f, size_t fn) {
	return l->query_n(*l->conn, q, qn, f, fn);
}
static const char *chl_error(chl_lib *l, void *r) { return l->error(r); }
static char *chl_buffer(chl_lib *l, void *r) { return l->buffer(r); }
static size_t chl_length(chl_lib *l, void *r) { return l->length(r); }
static void chl_destroy(chl_lib *l, void *r) { l->destroy(r); }
static void chl_close(chl_lib *l) { if (l->conn) l->close_conn(l->conn); l->conn = NULL; }
*/
import "C"

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"sync"
	"unsafe"
)

// EnvLib names the environment variable that holds the path of
// libchdb.so; the Makefile's chdb target fetches it and sets it for make
// test.
const EnvLib = "HELIOSTAT_CHDB_LIB"

// DB is the in-process ClickHouse. Its queries run one at a time.
type DB struct {
	mu  sync.Mutex
	lib *C.chl_lib
}

// Open loads libchdb.so from libPath and starts ClickHouse on dataDir
// (its databases and tables live there).
func Open(libPath, dataDir string) (*DB, error) {
	cpath := C.CString(libPath)
	defer C.free(unsafe.Pointer(cpath))
	var cerr *C.char
	lib := C.chl_open(cpath, &cerr)
	if lib == nil {
		return nil, fmt.Errorf("chlocal: load %s: %s", libPath, C.GoString(cerr))
	}
	args := []string{"clickhouse", "--path=" + dataDir}
	argv := make([]*C.char, len(args))
	for i, a := range args {
		argv[i] = C.CString(a)
		defer C.free(unsafe.Pointer(argv[i]))
	}
	if C.chl_connect(lib, C.int(len(argv)), &argv[0]) == 0 {
		return nil, fmt.Errorf("chlocal: start ClickHouse from %s on %s: chdb_connect failed", libPath, dataDir)
	}
	return &DB{lib: lib}, nil
}

// Error is a failed query's exception.
type Error struct {
	// Code is ClickHouse's error code (0 when the text carries none).
	Code int
	// Message is the exception's text.
	Message string
}

func (e *Error) Error() string { return e.Message }

var codeRE = regexp.MustCompile(`^Code: (\d+)\.`)

// Query runs one statement and returns its output in format (the output
// format when the statement names none; e.g. "Native", "TabSeparated").
// The statement may carry binary data after an INSERT's FORMAT clause.
func (d *DB) Query(sql []byte, format string) ([]byte, error) {
	if len(sql) == 0 {
		return nil, &Error{Code: 62, Message: "Code: 62. DB::Exception: Empty query. (SYNTAX_ERROR)"}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.lib == nil {
		return nil, errors.New("chlocal: closed")
	}
	cf := C.CString(format)
	defer C.free(unsafe.Pointer(cf))
	r := C.chl_query(d.lib, (*C.char)(unsafe.Pointer(&sql[0])), C.size_t(len(sql)), cf, C.size_t(len(format)))
	if r == nil {
		return nil, errors.New("chlocal: chdb_query_n returned no result")
	}
	defer C.chl_destroy(d.lib, r)
	if e := C.chl_error(d.lib, r); e != nil {
		if msg := C.GoString(e); msg != "" {
			err := &Error{Message: msg}
			if m := codeRE.FindStringSubmatch(msg); m != nil {
				err.Code, _ = strconv.Atoi(m[1])
			}
			return nil, err
		}
	}
	n := C.chl_length(d.lib, r)
	if n == 0 {
		return nil, nil
	}
	return C.GoBytes(unsafe.Pointer(C.chl_buffer(d.lib, r)), C.int(n)), nil
}

// Close stops the engine. The library stays loaded: chDB cannot start a
// second engine in the same process.
func (d *DB) Close() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.lib != nil {
		C.chl_close(d.lib)
		d.lib = nil
	}
}
